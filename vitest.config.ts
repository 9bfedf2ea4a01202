import { configDefaults, defineConfig } from "vitest/config";

// The chaos suite (tests/chaos, `make chaos`) runs on its own: its figures mean little beside other tests.
const chaos = process.env.CHAOS_SUITE === "1";

export default defineConfig({
  test: {
    include: chaos ? ["tests/chaos/**/*.test.ts"] : ["tests/**/*.test.ts"],
    exclude: chaos ? configDefaults.exclude : [...configDefaults.exclude, "tests/chaos/**"],
    // Integration tests start real processes; forks isolate them and two workers suit 2 cores.
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
