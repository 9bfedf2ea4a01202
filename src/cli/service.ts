/**
 * `skulk service install|uninstall|start|stop|status|logs|unit`: runs this node under systemd (system or
 * user unit) or launchd, carrying out the plans of service-units.ts; the only module here that touches them.
 */
import type { Command } from "commander";
import { selfProgram } from "../node/self.ts";
import { CliError } from "./common.ts";
import {
  chooseKind,
  launchdPlist,
  PACKAGED_SYSTEM_UNIT,
  planService,
  type ServiceAction,
  type ServiceKind,
  SYSTEM_USER,
  systemdUnit,
} from "./service-units.ts";

/** The program a service should run: this executable, or the apt package's launcher of this program. */
function defaultExec(): string {
  const argv = selfProgram();
  if (argv.length === 1) return argv[0];
  // The package runs <prefix>/lib/skulk/app/src/main.ts through its launcher <prefix>/bin/skulk.
  const packaged = Deno.mainModule.match(/^file:\/\/(.*)\/lib\/skulk\/app\/src\/main\.ts$/);
  if (packaged && exists(`${packaged[1]}/bin/skulk`)) return `${packaged[1]}/bin/skulk`;
  throw new CliError(
    "skulk runs from source here (deno run): give the program the service should start with --exec",
    2,
  );
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

function systemUserExists(): boolean {
  try {
    return Deno.readTextFileSync("/etc/passwd").split("\n").some((l) => l.startsWith(`${SYSTEM_USER}:`));
  } catch {
    return false;
  }
}

function kindOf(flags: { system?: boolean; user?: boolean }): ServiceKind {
  const kind = chooseKind(flags, Deno.build.os, Deno.uid() ?? -1);
  if (typeof kind === "object") throw new CliError(kind.error, 2);
  return kind;
}

async function carryOut(
  action: ServiceAction,
  flags: { system?: boolean; user?: boolean; exec?: string; follow?: boolean },
): Promise<void> {
  const kind = kindOf(flags);
  const home = Deno.env.get("HOME");
  if (!home && kind !== "system") throw new CliError("HOME is not set: a user service lives under it", 2);
  const packaged = kind === "system" && exists(PACKAGED_SYSTEM_UNIT);
  const exec = action === "install" && !packaged ? (flags.exec ?? defaultExec()) : (flags.exec ?? "");
  const plan = planService(action, {
    kind,
    exec,
    home: home ?? "/",
    user: Deno.env.get("USER") ?? Deno.env.get("LOGNAME") ?? String(Deno.uid()),
    uid: Deno.uid() ?? 0,
    packaged,
    systemUserExists: systemUserExists(),
    follow: flags.follow,
  });
  for (const dir of plan.mkdirs) Deno.mkdirSync(dir, { recursive: true });
  for (const w of plan.writes) {
    Deno.writeTextFileSync(w.path, w.text, { mode: w.mode });
    console.log(`wrote ${w.path}`);
  }
  for (const argv of plan.commands) {
    let status: Deno.CommandStatus;
    try {
      status = await new Deno.Command(argv[0], { args: argv.slice(1), stdin: "inherit" }).spawn().status;
    } catch (e) {
      throw new CliError(`${argv[0]}: ${(e as Error).message.split("\n")[0]}`);
    }
    // status of a stopped unit exits 3, which is an answer rather than a failure.
    if (!status.success && !(action === "status" && status.code === 3)) {
      throw new CliError(`\`${argv.join(" ")}\` failed (exit ${status.code})`, status.code || 1);
    }
  }
  for (const path of plan.removes) {
    try {
      Deno.removeSync(path);
      console.log(`removed ${path}`);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
  }
}

export function registerService(program: Command): void {
  const service = program.command("service").description(
    "run this node as a supervised service: systemd (system or user unit) on Linux, launchd on macOS",
  );
  const scope = (c: Command) =>
    c.option("--system", "the system unit (skulk user, /var/lib/skulk; default when root)")
      .option("--user", "your user unit (default when not root; install enables linger for start at boot)");
  scope(service.command("install"))
    .description("write (unless the apt package did) and enable the service, and start it now")
    .option("--exec <path>", "the skulk program the service runs (default: this executable)")
    .action((flags) => carryOut("install", flags));
  scope(service.command("uninstall")).description(
    "stop and disable the service and remove what install wrote",
  )
    .action((flags) => carryOut("uninstall", flags));
  const what = {
    start: "start the service",
    stop: "stop the service",
    status: "whether the service runs, and since when",
  };
  for (const action of ["start", "stop", "status"] as const) {
    scope(service.command(action)).description(what[action]).action((flags) => carryOut(action, flags));
  }
  scope(service.command("logs")).description("the service's recent log lines")
    .option("-f, --follow", "keep printing new lines")
    .action((flags) => carryOut("logs", flags));
  service.command("unit")
    .description("print a service definition (what install writes; the apt package ships the same)")
    .requiredOption("--kind <kind>", "system, user or launchd")
    .option("--exec <path>", "the skulk program it runs", "/usr/bin/skulk")
    .option("--home <dir>", "the home directory (launchd)", Deno.env.get("HOME") ?? "/")
    .action((flags: { kind: string; exec: string; home: string }) => {
      if (flags.kind === "system" || flags.kind === "user") {
        console.log(systemdUnit(flags.kind, flags.exec).trimEnd());
      } else if (flags.kind === "launchd") console.log(launchdPlist(flags.exec, flags.home).trimEnd());
      else throw new CliError(`--kind must be system, user or launchd (got '${flags.kind}')`, 2);
    });
}
