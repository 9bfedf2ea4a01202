# Every target goes through scripts/setup, which installs Deno (from npm) and the pinned dependencies.
SHELL := /bin/bash
DENO = $(shell scripts/setup)
DENO_FLAGS = -A
TARGETS ?= x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-apple-darwin aarch64-apple-darwin
PORT ?= 52415

.PHONY: setup run test chaos test-unit check fmt embed dashboard engine binary deb deb-engine apt-repo test-package bench bench-all clean

setup:
	@scripts/setup >/dev/null && echo "setup: ok"

# Builds the dashboard from src/dashboard/app/ as part of embedding it.
embed:
	@$(DENO) run $(DENO_FLAGS) scripts/embed.ts

# The dashboard alone, written to src/dashboard/dist/ to look at.
dashboard:
	@$(DENO) run $(DENO_FLAGS) scripts/build-dashboard.ts

# A one-node cluster with the dashboard and a default model.
run:
	@scripts/run-local --api-port $(PORT)

test:
	@scripts/test

# The chaos suite alone (docs/cluster.md): three nodes in network namespaces under chat load, one fault per
# scenario; needs root; about 7 minutes; figures also in tests/.tmp/chaos-figures.jsonl. `make test` ends with it.
chaos:
	@CHAOS_SUITE=1 scripts/test

test-unit:
	@$(DENO) run $(DENO_FLAGS) npm:vitest run tests/unit

check: embed
	@$(DENO) fmt --check
	@$(DENO) lint
	@$(DENO) check src/main.ts scripts/*.ts bench/*.ts tests
	@$(DENO) check --no-lock --config src/dashboard/app/typecheck.json src/dashboard/app/main.tsx

fmt:
	@$(DENO) fmt

engine:
	@scripts/build-engine

# deno compile needs the denort runtime; set DENORT_BIN where Deno's download host is unreachable.
binary: embed
	@mkdir -p dist
	@for t in $(TARGETS); do \
	  echo "compiling skulk for $$t"; \
	  $(DENO) compile $(DENO_FLAGS) --include src/downloads/sink-worker.ts --include src/store/readonly-worker.ts --target $$t --output dist/skulk-$$t src/main.ts || exit 1; \
	  (cd dist && sha256sum skulk-$$t > skulk-$$t.sha256); \
	done

# The apt packages (docs/packaging.md): skulk (the compiled binary when `make binary` made one, else the Deno
# runtime and the program) and skulk-llama-cpu from the cached engine build; `make deb-engine BACKEND=vulkan`
# for another backend (needs its toolkit).
BACKEND ?= cpu
deb:
	@scripts/build-deb skulk
	@scripts/build-deb engine --backend cpu

deb-engine:
	@scripts/build-deb engine --backend $(BACKEND)

# A signed apt repository in dist/apt from the packages in dist/ (signing key kept in ~/.config/skulk/apt-signing).
apt-repo: deb
	@scripts/apt-repo

# The clean-machine test: a fresh Debian root installs the packages from the signed repository and serves a chat
# answer, then purges clean; lintian, systemd-analyze verify. Needs root, mmdebstrap, lintian; 105 s on 2 cores
# (up to 5.5 minutes when busy); `make test` runs it too (TEST_PACKAGE=0 leaves it out).
test-package:
	@rc=0; $(DENO) run $(DENO_FLAGS) npm:vitest run tests/integration/package.test.ts || rc=$$?; \
	  cat tests/.tmp/test-package-figures.txt 2>/dev/null; exit $$rc

# The quick benchmarks; `make bench-all` runs every one in bench/ (each prints its figures side by side).
bench:
	@$(DENO) run $(DENO_FLAGS) bench/startup.ts
	@$(DENO) run $(DENO_FLAGS) bench/placement.ts
	@$(DENO) run $(DENO_FLAGS) bench/telemetry.ts

bench-all:
	@for b in bench/*.ts; do echo "== $$b"; $(DENO) run $(DENO_FLAGS) $$b || exit 1; done

clean:
	rm -rf dist .data bench/out
