/**
 * The service texts and plans of `skulk service` (src/cli/service-units.ts): systemd reads the units without a
 * complaint (systemd-analyze verify), a plist parser reads the launchd agent, and each action plans what it must.
 */
import { describe, expect, it } from "vitest";
import {
  chooseKind,
  ETC_SYSTEM_UNIT,
  launchdPlist,
  PACKAGED_SYSTEM_UNIT,
  planService,
  type ServiceFacts,
  systemdUnit,
} from "../../src/cli/service-units.ts";
import { tempDir } from "../helpers/daemon.ts";

async function run(cmd: string, args: string[]) {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  const dec = new TextDecoder();
  return { code: out.code, text: dec.decode(out.stdout) + dec.decode(out.stderr) };
}

const has = (cmd: string) =>
  new Deno.Command("sh", { args: ["-c", `command -v ${cmd}`] }).outputSync().success;

const facts = (over: Partial<ServiceFacts>): ServiceFacts => ({
  kind: "user",
  exec: "/opt/skulk/bin/skulk",
  home: "/home/ann",
  user: "ann",
  uid: 1000,
  packaged: false,
  systemUserExists: true,
  ...over,
});

describe("systemd units", () => {
  it("the system unit runs as the skulk user in /var/lib/skulk, hardened, restarted on failure and on 75", () => {
    const unit = systemdUnit("system", "/usr/bin/skulk");
    for (
      const line of [
        "User=skulk",
        "StateDirectory=skulk",
        "WorkingDirectory=/var/lib/skulk",
        "Environment=SKULK_DATA_DIR=/var/lib/skulk",
        "Environment=SKULK_SUPERVISED=1",
        "ExecStart=/usr/bin/skulk run",
        "Restart=on-failure",
        "RestartForceExitStatus=75",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "WantedBy=multi-user.target",
      ]
    ) expect(unit.split("\n")).toContain(line);
    // The environment file comes after the defaults, so what the operator writes there wins.
    expect(unit.indexOf("EnvironmentFile=-/etc/skulk/skulk.env")).toBeGreaterThan(
      unit.indexOf("Environment=SKULK_DATA_DIR"),
    );
  });

  it("the user unit runs the given program with the user's env file and starts with the user manager", () => {
    const unit = systemdUnit("user", "/home/ann/.local/bin/skulk");
    expect(unit).toContain("ExecStart=/home/ann/.local/bin/skulk run\n");
    expect(unit).toContain("EnvironmentFile=-%h/.skulk/skulk.env\n");
    expect(unit).toContain("WantedBy=default.target\n");
    expect(unit).not.toContain("User=");
  });

  it.skipIf(!has("systemd-analyze"))("systemd-analyze verify accepts both units", async () => {
    const dir = tempDir("units-");
    for (const kind of ["system", "user"] as const) {
      const path = `${dir}/skulk.service`;
      // Any real executable: verify checks that ExecStart's program exists.
      Deno.writeTextFileSync(path, systemdUnit(kind, "/bin/true"));
      const r = await run("systemd-analyze", ["verify", path]);
      expect(r.code, r.text).toBe(0);
      expect(r.text.trim(), `${kind}: ${r.text}`).toBe("");
    }
  });
});

describe("launchd agent", () => {
  it.skipIf(!has("python3"))("is a plist that a parser reads back, paths escaped", async () => {
    const dir = tempDir("plist-");
    const path = `${dir}/agent.plist`;
    Deno.writeTextFileSync(path, launchdPlist("/Users/a&b/bin/skulk", "/Users/a&b"));
    const r = await run("python3", [
      "-c",
      "import json,plistlib,sys; print(json.dumps(plistlib.load(open(sys.argv[1],'rb'))))",
      path,
    ]);
    expect(r.code, r.text).toBe(0);
    expect(JSON.parse(r.text)).toEqual({
      Label: "dev.skulk.node",
      ProgramArguments: ["/Users/a&b/bin/skulk", "run"],
      EnvironmentVariables: { SKULK_SUPERVISED: "1" },
      WorkingDirectory: "/Users/a&b",
      RunAtLoad: true,
      KeepAlive: { SuccessfulExit: false },
      ThrottleInterval: 5,
      StandardOutPath: "/Users/a&b/Library/Logs/skulk.log",
      StandardErrorPath: "/Users/a&b/Library/Logs/skulk.log",
    });
  });
});

describe("service plans", () => {
  it("chooses the kind from the flags, the OS and the user", () => {
    expect(chooseKind({}, "linux", 0)).toBe("system");
    expect(chooseKind({}, "linux", 1000)).toBe("user");
    expect(chooseKind({ user: true }, "linux", 0)).toBe("user");
    expect(chooseKind({ system: true }, "linux", 1000)).toBe("system");
    expect(chooseKind({}, "darwin", 501)).toBe("launchd");
    expect(chooseKind({ system: true }, "darwin", 0)).toEqual({ error: expect.stringMatching(/launchd/) });
    expect(chooseKind({ system: true, user: true }, "linux", 0)).toEqual({
      error: expect.stringMatching(/exclude/),
    });
    expect(chooseKind({}, "windows", 0)).toEqual({ error: expect.stringMatching(/windows/) });
  });

  it("a user install writes the unit, enables linger for start at boot, and enables it now", () => {
    const plan = planService("install", facts({}));
    expect(plan.writes).toEqual([{
      path: "/home/ann/.config/systemd/user/skulk.service",
      text: systemdUnit("user", "/opt/skulk/bin/skulk"),
      mode: 0o644,
    }]);
    expect(plan.commands).toEqual([
      ["loginctl", "enable-linger", "ann"],
      ["systemctl", "--user", "daemon-reload"],
      ["systemctl", "--user", "enable", "--now", "skulk.service"],
    ]);
  });

  it("a system install over the apt package only enables its unit; without the package it writes one", () => {
    const packaged = planService("install", facts({ kind: "system", packaged: true }));
    expect(packaged.writes).toEqual([]);
    expect(packaged.commands).toEqual([["systemctl", "daemon-reload"], [
      "systemctl",
      "enable",
      "--now",
      "skulk.service",
    ]]);
    const bare = planService("install", facts({ kind: "system", systemUserExists: false }));
    expect(bare.writes.map((w) => w.path)).toEqual([ETC_SYSTEM_UNIT]);
    expect(bare.commands[0]).toEqual(
      expect.arrayContaining(["useradd", "--system", "/var/lib/skulk", "skulk"]),
    );
  });

  it("uninstall removes only what install wrote: never the package's unit", () => {
    expect(planService("uninstall", facts({ kind: "system", packaged: true })).removes).toEqual([]);
    expect(planService("uninstall", facts({ kind: "system" })).removes).toEqual([ETC_SYSTEM_UNIT]);
    expect(planService("uninstall", facts({})).removes).toEqual([
      "/home/ann/.config/systemd/user/skulk.service",
    ]);
    expect(PACKAGED_SYSTEM_UNIT).toBe("/usr/lib/systemd/system/skulk.service");
  });

  it("start, stop, status and logs go to the right manager and scope", () => {
    expect(planService("stop", facts({})).commands).toEqual([[
      "systemctl",
      "--user",
      "stop",
      "skulk.service",
    ]]);
    expect(planService("start", facts({ kind: "system" })).commands).toEqual([[
      "systemctl",
      "start",
      "skulk.service",
    ]]);
    expect(planService("logs", facts({ kind: "system", follow: true })).commands).toEqual([
      ["journalctl", "--unit", "skulk.service", "--no-pager", "-n", "200", "--follow"],
    ]);
    expect(planService("logs", facts({})).commands[0]).toContain("--user-unit");
    const mac = facts({ kind: "launchd", home: "/Users/ann", uid: 501 });
    expect(planService("install", mac).commands).toEqual([
      ["launchctl", "bootstrap", "gui/501", "/Users/ann/Library/LaunchAgents/dev.skulk.node.plist"],
    ]);
    expect(planService("status", mac).commands).toEqual([["launchctl", "print", "gui/501/dev.skulk.node"]]);
    expect(planService("uninstall", mac).removes).toEqual([
      "/Users/ann/Library/LaunchAgents/dev.skulk.node.plist",
    ]);
  });
});
