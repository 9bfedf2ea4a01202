/**
 * The installers: install.sh puts a working skulk on PATH (and a systemd user unit with --service), and
 * scripts/build-deb packs the same binary and unit into an apt package. The "binary" here is a launcher of
 * the real program from source, since compiling needs Deno's denort runtime, which this network lacks.
 */
import { describe, expect, it } from "vitest";
import { DENO, MAIN, tempDir } from "../helpers/daemon.ts";

const ROOT = new URL("../..", import.meta.url).pathname;

async function run(cmd: string, args: string[], env: Record<string, string> = {}) {
  const out = await new Deno.Command(cmd, { args, env, stdout: "piped", stderr: "piped" }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

function launcher(): string {
  const dir = tempDir("launcher-");
  const path = `${dir}/skulk-bin`;
  // Keep Deno's cache where it is, though the installer runs under another HOME.
  const denoDir = Deno.env.get("DENO_DIR") ?? `${Deno.env.get("HOME")}/.cache/deno`;
  Deno.writeTextFileSync(
    path,
    `#!/bin/sh\nDENO_DIR="${denoDir}" exec "${DENO}" run -A --quiet "${MAIN}" "$@"\n`,
  );
  Deno.chmodSync(path, 0o755);
  return path;
}

describe("install.sh", () => {
  it("installs a runnable skulk into the prefix and writes a user service", async () => {
    const home = tempDir("home-");
    const prefix = `${home}/prefix`;
    const r = await run("sh", [`${ROOT}install.sh`, "--from", launcher(), "--prefix", prefix, "--service"], {
      HOME: home,
      XDG_CONFIG_HOME: `${home}/.config`,
      PATH: "/usr/bin:/bin",
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/installed skulk \d+\.\d+\.\d+/);
    const v = await run(`${prefix}/bin/skulk`, ["version", "--json"]);
    expect(JSON.parse(v.stdout).version).toMatch(/^\d+\.\d+\.\d+$/);
    const unit = Deno.readTextFileSync(`${home}/.config/systemd/user/skulk.service`);
    expect(unit).toContain(`ExecStart=${prefix}/bin/skulk run`);
    expect(unit).toContain("RestartForceExitStatus=75");
    // The packaged unit is the same unit, with the package's path.
    expect(unit.replace(`${prefix}/bin/skulk`, "/usr/bin/skulk")).toBe(
      Deno.readTextFileSync(`${ROOT}packaging/skulk.service`),
    );
  });

  it("refuses unknown options and a missing file clearly", async () => {
    const bad = await run("sh", [`${ROOT}install.sh`, "--frobnicate"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/unknown option '--frobnicate'/);
    const missing = await run("sh", [
      `${ROOT}install.sh`,
      "--from",
      "/nonexistent/skulk",
      "--prefix",
      tempDir(),
    ]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/no such file/);
  });
});

describe("scripts/build-deb", () => {
  it("packs the binary and the systemd unit into an apt package", async () => {
    const out = tempDir("deb-");
    const r = await run(`${ROOT}scripts/build-deb`, ["--binary", launcher(), "--out", out]);
    expect(r.code, r.stderr).toBe(0);
    const deb = r.stdout.trim();
    expect(deb).toMatch(/skulk_\d+\.\d+\.\d+_amd64\.deb$/);
    const info = await run("dpkg-deb", ["-f", deb, "Package", "Version", "Architecture"]);
    expect(info.stdout).toMatch(/Package: skulk\nVersion: \d+\.\d+\.\d+\nArchitecture: amd64/);
    const files = (await run("dpkg-deb", ["-c", deb])).stdout;
    expect(files).toMatch(/-rwxr-xr-x root\/root .* \.\/usr\/bin\/skulk/);
    expect(files).toContain("./usr/lib/systemd/user/skulk.service");
  });
});
