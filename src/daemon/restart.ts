/**
 * Restarting the daemon from the API. Under a supervisor (node.supervised, SKULK_SUPERVISED=1: systemd, launchd) the node
 * stops cleanly and exits 75 so the supervisor starts it again; otherwise it stops cleanly and re-executes
 * its own command line detached. Either way it comes back on the same data dir, so with the same node id.
 */
import { ownCommand } from "../node/self.ts";
import type { RunningNode } from "./node.ts";

/** The exit code a supervisor treats as "start me again" (EX_TEMPFAIL, as upstream uses). */
export const RESTART_EXIT_CODE = 75;

export function restartHook(node: RunningNode, supervised: boolean) {
  let pending = false;
  return {
    /** Starts a restart shortly (so the HTTP answer leaves first); false when one is already pending. */
    request: (): boolean => {
      if (pending) return false;
      pending = true;
      setTimeout(() => void node.shutdown("restart requested through the API"), 300);
      return true;
    },
    /** After the node stopped: the exit code, having re-executed the daemon when no supervisor will. */
    afterStop: (): number => {
      if (!pending) return 0;
      if (supervised) return RESTART_EXIT_CODE;
      const [cmd, ...args] = ownCommand(Deno.execPath(), Deno.mainModule, Deno.args);
      const child = new Deno.Command(cmd, {
        args,
        stdin: "null",
        stdout: "inherit",
        stderr: "inherit",
        detached: true,
      }).spawn();
      child.unref();
      return 0;
    },
  };
}
