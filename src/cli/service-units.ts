/**
 * The supervised-service texts (systemd system and user units, the launchd plist) and the plan of file
 * writes and commands behind `skulk service install|uninstall|start|stop|status|logs`, as pure functions.
 */

export type ServiceKind = "system" | "user" | "launchd";
export type ServiceAction = "install" | "uninstall" | "start" | "stop" | "status" | "logs";

/** The unit name under systemd and the launchd label. */
export const UNIT_NAME = "skulk.service";
export const LAUNCHD_LABEL = "dev.skulk.node";
/** The system service's account and state; the apt package's maintainer scripts use the same. */
export const SYSTEM_USER = "skulk";
export const SYSTEM_STATE_DIR = "/var/lib/skulk";
/** Where the apt package ships the system unit; a unit written by `service install` goes to /etc. */
export const PACKAGED_SYSTEM_UNIT = `/usr/lib/systemd/system/${UNIT_NAME}`;
export const ETC_SYSTEM_UNIT = `/etc/systemd/system/${UNIT_NAME}`;

/** What every supervisor is told about restarts: exit code 75 means "restart me" (`POST /admin/restart`). */
const RESTART_LINES = [
  "KillSignal=SIGTERM",
  "KillMode=mixed",
  "TimeoutStopSec=30",
  "Restart=on-failure",
  "RestartSec=5",
  "RestartForceExitStatus=75",
  "SuccessExitStatus=75",
  "LimitNOFILE=65536",
];

/** The systemd unit of `kind` running `exec run`. */
export function systemdUnit(kind: "system" | "user", exec: string): string {
  const unit = [
    "[Unit]",
    "Description=Skulk node",
    "After=network-online.target",
    "Wants=network-online.target",
    "",
    "[Service]",
    "Type=simple",
  ];
  if (kind === "system") {
    unit.push(
      `User=${SYSTEM_USER}`,
      `Group=${SYSTEM_USER}`,
      // Settings in the environment file override the ones below (systemd reads it last).
      "Environment=SKULK_SUPERVISED=1",
      `Environment=SKULK_DATA_DIR=${SYSTEM_STATE_DIR}`,
      "Environment=SKULK_CACHE_DIR=/var/cache/skulk",
      "EnvironmentFile=-/etc/skulk/skulk.env",
      "StateDirectory=skulk",
      "CacheDirectory=skulk",
      // ./skulk.yaml is read from here; Deno keeps its compile cache under $HOME (the same directory).
      `WorkingDirectory=${SYSTEM_STATE_DIR}`,
      `ExecStart=${exec} run`,
      ...RESTART_LINES,
      // The engines are plain child processes of the node: none needs a privilege, a write outside the
      // state and cache directories, a home directory or the host's /tmp. Devices stay visible for GPUs.
      "NoNewPrivileges=yes",
      "ProtectSystem=strict",
      "ProtectHome=yes",
      "PrivateTmp=yes",
      "ProtectKernelTunables=yes",
      "ProtectKernelModules=yes",
      "ProtectControlGroups=yes",
      "RestrictSUIDSGID=yes",
      "LockPersonality=yes",
      "",
      "[Install]",
      "WantedBy=multi-user.target",
    );
  } else {
    unit.push(
      "Environment=SKULK_SUPERVISED=1",
      "EnvironmentFile=-%h/.skulk/skulk.env",
      `ExecStart=${exec} run`,
      ...RESTART_LINES,
      "",
      "[Install]",
      "WantedBy=default.target",
    );
  }
  return unit.join("\n") + "\n";
}

function xmlEscape(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** The launchd agent for the user `home` belongs to: runs at login, restarted unless it exits cleanly. */
export function launchdPlist(exec: string, home: string): string {
  const s = (v: string) => `<string>${xmlEscape(v)}</string>`;
  return [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">`,
    `<plist version="1.0">`,
    `<dict>`,
    `  <key>Label</key>${s(LAUNCHD_LABEL)}`,
    `  <key>ProgramArguments</key><array>${s(exec)}${s("run")}</array>`,
    `  <key>EnvironmentVariables</key><dict><key>SKULK_SUPERVISED</key>${s("1")}</dict>`,
    `  <key>WorkingDirectory</key>${s(home)}`,
    `  <key>RunAtLoad</key><true/>`,
    // Exit code 75 (restart requested) is not a successful exit, so launchd starts the node again.
    `  <key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>`,
    `  <key>ThrottleInterval</key><integer>5</integer>`,
    `  <key>StandardOutPath</key>${s(logPath(home))}`,
    `  <key>StandardErrorPath</key>${s(logPath(home))}`,
    `</dict>`,
    `</plist>`,
  ].join("\n") + "\n";
}

export function logPath(home: string): string {
  return `${home}/Library/Logs/skulk.log`;
}

/** Where each kind's definition lives. */
export function servicePath(kind: ServiceKind, home: string, packaged: boolean): string {
  if (kind === "system") return packaged ? PACKAGED_SYSTEM_UNIT : ETC_SYSTEM_UNIT;
  if (kind === "user") return `${home}/.config/systemd/user/${UNIT_NAME}`;
  return `${home}/Library/LaunchAgents/${LAUNCHD_LABEL}.plist`;
}

/** What the shell knows about the machine when it plans. */
export interface ServiceFacts {
  kind: ServiceKind;
  /** The program the service runs (`/usr/bin/skulk`, or this executable). */
  exec: string;
  home: string;
  /** The login name, for linger and the launchd domain. */
  user: string;
  uid: number;
  /** The apt package's system unit is installed (then install only enables it, uninstall only disables). */
  packaged: boolean;
  /** The `skulk` system account exists. */
  systemUserExists: boolean;
  /** `logs --follow`. */
  follow?: boolean;
}

export interface ServicePlan {
  writes: { path: string; text: string; mode: number }[];
  mkdirs: string[];
  removes: string[];
  /** Run in order; the first that fails stops the plan. */
  commands: string[][];
}

/** `kind` for a command line: an explicit --system/--user, else launchd on macOS, else system for root. */
export function chooseKind(
  flags: { system?: boolean; user?: boolean },
  os: string,
  uid: number,
): ServiceKind | { error: string } {
  if (flags.system && flags.user) return { error: "--system and --user exclude each other" };
  if (os === "darwin") {
    return flags.system
      ? { error: "--system is for systemd (Linux); macOS uses a launchd agent" }
      : "launchd";
  }
  if (os !== "linux") return { error: `no service manager support on ${os}` };
  if (flags.system) return "system";
  if (flags.user) return "user";
  return uid === 0 ? "system" : "user";
}

/** The file writes and commands that carry out `action` for the service described by `f`. */
export function planService(action: ServiceAction, f: ServiceFacts): ServicePlan {
  const plan: ServicePlan = { writes: [], mkdirs: [], removes: [], commands: [] };
  const path = servicePath(f.kind, f.home, f.packaged);
  if (f.kind === "launchd") {
    const domain = `gui/${f.uid}`;
    const target = `${domain}/${LAUNCHD_LABEL}`;
    switch (action) {
      case "install":
        plan.mkdirs.push(`${f.home}/Library/LaunchAgents`, `${f.home}/Library/Logs`);
        plan.writes.push({ path, text: launchdPlist(f.exec, f.home), mode: 0o644 });
        plan.commands.push(["launchctl", "bootstrap", domain, path]);
        break;
      case "uninstall":
        plan.commands.push(["launchctl", "bootout", target]);
        plan.removes.push(path);
        break;
      case "start":
        plan.commands.push(["launchctl", "kickstart", target]);
        break;
      case "stop":
        plan.commands.push(["launchctl", "kill", "SIGTERM", target]);
        break;
      case "status":
        plan.commands.push(["launchctl", "print", target]);
        break;
      case "logs":
        plan.commands.push(["tail", ...(f.follow ? ["-f"] : []), "-n", "200", logPath(f.home)]);
        break;
    }
    return plan;
  }
  const ctl = f.kind === "user" ? ["systemctl", "--user"] : ["systemctl"];
  switch (action) {
    case "install":
      if (f.kind === "system") {
        if (!f.systemUserExists) {
          plan.commands.push([
            "useradd",
            "--system",
            "--user-group",
            "--home-dir",
            SYSTEM_STATE_DIR,
            "--shell",
            "/usr/sbin/nologin",
            SYSTEM_USER,
          ]);
        }
        if (!f.packaged) {
          plan.writes.push({ path, text: systemdUnit("system", f.exec), mode: 0o644 });
        }
      } else {
        plan.mkdirs.push(`${f.home}/.config/systemd/user`, `${f.home}/.skulk`);
        plan.writes.push({ path, text: systemdUnit("user", f.exec), mode: 0o644 });
        // Without linger a user's services stop at logout and do not start at boot.
        plan.commands.push(["loginctl", "enable-linger", f.user]);
      }
      plan.commands.push([...ctl, "daemon-reload"], [...ctl, "enable", "--now", UNIT_NAME]);
      break;
    case "uninstall":
      plan.commands.push([...ctl, "disable", "--now", UNIT_NAME]);
      // The package's unit belongs to dpkg: `apt remove skulk` takes it away.
      if (!(f.kind === "system" && f.packaged)) plan.removes.push(path);
      plan.commands.push([...ctl, "daemon-reload"]);
      break;
    case "start":
    case "stop":
      plan.commands.push([...ctl, action, UNIT_NAME]);
      break;
    case "status":
      plan.commands.push([...ctl, "status", "--no-pager", UNIT_NAME]);
      break;
    case "logs":
      plan.commands.push([
        "journalctl",
        ...(f.kind === "user" ? ["--user-unit", UNIT_NAME] : ["--unit", UNIT_NAME]),
        "--no-pager",
        "-n",
        "200",
        ...(f.follow ? ["--follow"] : []),
      ]);
      break;
  }
  return plan;
}
