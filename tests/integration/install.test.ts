/**
 * The installers: install.sh puts a working skulk on PATH only when its SHA-256 matches the published one
 * (served here over real HTTP on loopback), writes the service through `skulk service install`, and
 * uninstalls; scripts/build-deb packs the program, the units and the maintainer scripts. The "binary" here is
 * a launcher of the real program from source, since compiling needs Deno's denort runtime, which this network
 * lacks (tests/integration/package.test.ts installs the real packages into a fresh Debian root).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { systemdUnit } from "../../src/cli/service-units.ts";
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

async function sha256(path: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", Deno.readFileSync(path));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

const TARGET = Deno.build.arch === "x86_64" ? "x86_64-unknown-linux-gnu" : "aarch64-unknown-linux-gnu";
const systemd = (() => {
  try {
    return Deno.statSync("/run/systemd/system").isDirectory;
  } catch {
    return false;
  }
})();

/** A release server on loopback: what it serves for the binary and its .sha256 is set per test. */
let served: Record<string, Uint8Array<ArrayBuffer> | string> = {};
let server: Deno.HttpServer<Deno.NetAddr>;
let base = "";
beforeAll(() => {
  server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    const body = served[new URL(req.url).pathname];
    return body === undefined ? new Response("not found", { status: 404 }) : new Response(body);
  });
  base = `http://127.0.0.1:${server.addr.port}/releases`;
});
afterAll(() => server.shutdown());

function home() {
  const h = tempDir("home-");
  return {
    home: h,
    env: { HOME: h, XDG_CONFIG_HOME: `${h}/.config`, PATH: "/usr/bin:/bin", SKULK_RELEASE_BASE: base },
  };
}

describe("install.sh", () => {
  it("downloads, checks the published SHA-256, installs a runnable skulk", async () => {
    const bin = launcher();
    const path = `/releases/latest/download/skulk-${TARGET}`;
    served = {
      [path]: Deno.readFileSync(bin),
      [`${path}.sha256`]: `${await sha256(bin)}  skulk-${TARGET}\n`,
    };
    const { home: h, env } = home();
    const r = await run("sh", [`${ROOT}install.sh`, "--prefix", `${h}/prefix`], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`SHA-256 verified: ${await sha256(bin)}`);
    expect(r.stdout).toMatch(/installed skulk \d+\.\d+\.\d+/);
    const v = await run(`${h}/prefix/bin/skulk`, ["version", "--json"]);
    expect(JSON.parse(v.stdout).version).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it("refuses a download whose SHA-256 differs from the published one, or has none published", async () => {
    const bin = launcher();
    const path = `/releases/latest/download/skulk-${TARGET}`;
    const tampered = new TextEncoder().encode(Deno.readTextFileSync(bin) + "# tampered\n");
    served = { [path]: tampered, [`${path}.sha256`]: `${await sha256(bin)}  skulk-${TARGET}\n` };
    const { home: h, env } = home();
    const bad = await run("sh", [`${ROOT}install.sh`, "--prefix", `${h}/prefix`], env);
    expect(bad.code).toBe(3);
    expect(bad.stderr).toMatch(
      /SHA-256 mismatch: expected [0-9a-f]{64}, got [0-9a-f]{64}; refusing to install/,
    );
    expect(() => Deno.statSync(`${h}/prefix/bin/skulk`)).toThrow(Deno.errors.NotFound);

    served = { [path]: Deno.readFileSync(bin) };
    const unpublished = await run("sh", [`${ROOT}install.sh`, "--prefix", `${h}/prefix`], env);
    expect(unpublished.code).toBe(1);
    expect(unpublished.stderr).toMatch(/\.sha256, so the binary cannot be checked; refusing/);
    expect(() => Deno.statSync(`${h}/prefix/bin/skulk`)).toThrow(Deno.errors.NotFound);
  });

  it("checks --from FILE against --sha256", async () => {
    const bin = launcher();
    const { home: h, env } = home();
    const wrong = await run("sh", [
      `${ROOT}install.sh`,
      "--from",
      bin,
      "--sha256",
      "0".repeat(64),
      "--prefix",
      h,
    ], env);
    expect(wrong.code).toBe(3);
    expect(wrong.stderr).toMatch(/SHA-256 mismatch/);
    const right = await run("sh", [
      `${ROOT}install.sh`,
      "--from",
      bin,
      "--sha256",
      await sha256(bin),
      "--prefix",
      h,
    ], env);
    expect(right.code, right.stderr).toBe(0);
  });

  it.skipIf(systemd)(
    "--service writes the user unit of skulk service; --uninstall removes it and the binary",
    async () => {
      const { home: h, env } = home();
      const prefix = `${h}/prefix`;
      const r = await run(
        "sh",
        [
          `${ROOT}install.sh`,
          "--from",
          launcher(),
          "--prefix",
          prefix,
          "--service",
          "--user",
        ],
        env,
      );
      // No systemd runs here, so enabling fails after the unit is written, and the installer says so.
      expect(r.code, r.stderr).toBe(4);
      expect(r.stdout).toContain(`wrote ${h}/.config/systemd/user/skulk.service`);
      expect(r.stderr).toMatch(/the service could not be started here/);
      const unit = Deno.readTextFileSync(`${h}/.config/systemd/user/skulk.service`);
      expect(unit).toBe(systemdUnit("user", `${prefix}/bin/skulk`));

      const u = await run("sh", [`${ROOT}install.sh`, "--uninstall", "--prefix", prefix], env);
      expect(u.code, u.stderr).toBe(0);
      expect(() => Deno.statSync(`${prefix}/bin/skulk`)).toThrow(Deno.errors.NotFound);
      expect(() => Deno.statSync(`${h}/.config/systemd/user/skulk.service`)).toThrow(Deno.errors.NotFound);
    },
  );

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
  it("packs the binary, both units, the env file and the maintainer scripts; depends on no compiler", async () => {
    const out = tempDir("deb-");
    const r = await run(`${ROOT}scripts/build-deb`, [
      "skulk",
      "--binary",
      launcher(),
      "--out",
      out,
      "--compress",
      "gzip",
    ]);
    expect(r.code, r.stderr).toBe(0);
    const deb = r.stdout.trim();
    expect(deb).toMatch(/skulk_\d+\.\d+\.\d+_amd64\.deb$/);
    const info = (await run("dpkg-deb", ["-f", deb])).stdout;
    expect(info).toMatch(/^Package: skulk\nVersion: \d+\.\d+\.\d+\nArchitecture: amd64/);
    expect(info).toMatch(/^Recommends: skulk-llama-cpu \| skulk-llama-engine$/m);
    const depends = info.match(/^Depends: (.*)$/m)?.[1] ?? "";
    expect(depends).toContain("adduser");
    expect(depends).not.toMatch(/cmake|g\+\+|clang|gcc|npm|git/);
    const files = (await run("dpkg-deb", ["-c", deb])).stdout;
    expect(files).toMatch(/-rwxr-xr-x root\/root .* \.\/usr\/bin\/skulk/);
    expect(files).toContain("./usr/lib/systemd/system/skulk.service");
    expect(files).toContain("./usr/lib/systemd/user/skulk.service");
    expect(files).toContain("./etc/skulk/skulk.env");
    const control = tempDir("control-");
    expect((await run("dpkg-deb", ["-e", deb, control])).code).toBe(0);
    expect(Deno.readTextFileSync(`${control}/conffiles`).trim()).toBe("/etc/skulk/skulk.env");
    for (const script of ["postinst", "prerm", "postrm"]) {
      expect(Deno.statSync(`${control}/${script}`).mode! & 0o111).not.toBe(0);
    }
    // The service is not started on install: postinst only reloads systemd.
    const postinst = Deno.readTextFileSync(`${control}/postinst`).split("\n").filter((l) => !/^\s*#/.test(l));
    expect(postinst.join("\n")).toContain("adduser --system");
    expect(postinst.join("\n")).not.toMatch(/systemctl (start|enable|restart)|deb-systemd-invoke/);
  });

  const cache = Deno.env.get("SKULK_CACHE_DIR") ?? `${Deno.env.get("HOME")}/.cache/skulk`;
  const cpuBuild = (() => {
    try {
      return [...Deno.readDirSync(`${cache}/engines`)].some((e) => /^llama\.cpp-.*-cpu$/.test(e.name));
    } catch {
      return false;
    }
  })();

  it.skipIf(!cpuBuild)(
    "packs the cached CPU engine build as skulk-llama-cpu under /usr/lib/skulk/engines",
    async () => {
      const out = tempDir("deb-");
      const r = await run(`${ROOT}scripts/build-deb`, [
        "engine",
        "--backend",
        "cpu",
        "--out",
        out,
        "--compress",
        "gzip",
      ]);
      expect(r.code, r.stderr).toBe(0);
      const deb = r.stdout.trim();
      expect(deb).toMatch(/skulk-llama-cpu_\d+\.\d+\.\d+\+llama[0-9a-f]{12}_amd64\.deb$/);
      const info = (await run("dpkg-deb", ["-f", deb])).stdout;
      expect(info).toMatch(/^Provides: skulk-llama-engine$/m);
      expect(info).toMatch(/^Depends: .*libgomp1/m);
      const files = (await run("dpkg-deb", ["-c", deb])).stdout;
      for (const f of ["bin/llama-server", "bin/ggml-rpc-server", "build.json"]) {
        expect(files).toContain(`./usr/lib/skulk/engines/llama.cpp-cpu/${f}`);
      }
    },
  );

  it.skipIf(!new Deno.Command("sh", { args: ["-c", "! command -v glslc"] }).outputSync().success)(
    "refuses an accelerator's engine package clearly where its toolkit is missing",
    async () => {
      const r = await run(`${ROOT}scripts/build-deb`, [
        "engine",
        "--backend",
        "vulkan",
        "--out",
        tempDir("deb-"),
      ], {
        PATH: "/usr/bin:/bin",
        HOME: tempDir("home-"),
      });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain("no vulkan build of llama.cpp, and its toolkit (glslc) is not installed");
    },
  );
});
