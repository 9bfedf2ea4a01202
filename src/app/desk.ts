/**
 * The master's command desk: decides commands one at a time (a bounded serial queue), so each plans
 * against the state every earlier command left; healing runs its decisions through the same queue.
 */
import { logger } from "../log/mod.ts";
import type { Command, CommandRequest, CommandResult, Desk, Outcome } from "./commands.ts";
import { Busy, NoMaster, toWire } from "./errors.ts";
import { decideCreate, decideDelete, decidePlace, placementCard } from "./instances.ts";
import { decideAddCard, decideDeleteCard } from "./models.ts";
import type { DecidePorts } from "./ports.ts";
import type { FlightPort } from "../diagnostics/recorder.ts";

const log = logger("commands");

/** Commands waiting at most; past it a command is refused at once (retryable) rather than left to hang. */
export const COMMAND_QUEUE_LIMIT = 64;

function decide(p: DecidePorts, c: Command): Promise<CommandResult> {
  switch (c.kind) {
    case "place":
      return decidePlace(p, c.request);
    case "create_instance":
      return decideCreate(p, c.instance, c.placement);
    case "delete_instance":
      return decideDelete(p, c.instance_id);
    case "add_card":
      return decideAddCard(p, c.model_card);
    case "delete_card":
      return decideDeleteCard(p, c.model_id);
  }
}

export class CommandDesk implements Desk {
  #tail: Promise<unknown> = Promise.resolve();
  #waiting = 0;

  constructor(private readonly ports: DecidePorts, private readonly flight?: FlightPort) {}

  /** Commands queued or being decided now. */
  get depth(): number {
    return this.#waiting;
  }

  /** Runs `f` after everything queued before it, alone (healing's decisions use it too; not bounded). */
  async serial<T>(f: () => Promise<T>): Promise<T> {
    this.#waiting++;
    try {
      return await this.#inTurn(f);
    } finally {
      this.#waiting--;
    }
  }

  #inTurn<T>(f: () => Promise<T>): Promise<T> {
    const run = this.#tail.then(f);
    this.#tail = run.catch(() => undefined);
    return run;
  }

  /**
   * Decides a command on this node, which must be the master; rejects with a domain error. `expiresAt`
   * (a forwarded command): past it the asking node has answered its client, so nothing may be indexed.
   */
  async run(command: Command, expiresAt?: number): Promise<CommandResult> {
    if (this.#waiting >= COMMAND_QUEUE_LIMIT) {
      throw new Busy(
        `the master has ${this.#waiting} commands waiting (at most ${COMMAND_QUEUE_LIMIT}); retry`,
      );
    }
    this.#waiting++;
    try {
      // A card whose size is open is resolved from the hub (up to 10 s) before the command takes its turn,
      // so one slow hub does not hold every other command; in turn, the recorded facts are read back.
      if (command.kind === "place") await placementCard(this.ports, command.request.model_id);
      return await this.#noted(command, this.#inTurn(() => this.#decideInTurn(command, expiresAt)));
    } finally {
      this.#waiting--;
    }
  }

  /** Placement decisions (placed, or refused with the reason) go to the flight recorder. */
  async #noted(command: Command, decision: Promise<CommandResult>): Promise<CommandResult> {
    if (!this.flight || (command.kind !== "place" && command.kind !== "create_instance")) return decision;
    const modelId = command.kind === "place"
      ? command.request.model_id
      : Object.values(command.instance)[0].shardAssignments.modelId;
    try {
      const result = await decision;
      this.flight.note({
        source: "placement",
        event: "placed",
        detail: `${
          command.kind === "place" ? "placed" : "created"
        } instance ${result.instance_id} of ${modelId}`,
        instanceId: result.instance_id,
        modelId,
        attrs: { command: command.kind, idx: result.idx },
      });
      return result;
    } catch (e) {
      this.flight.note({
        source: "placement",
        event: "refused",
        detail: (e as Error).message,
        modelId,
        attrs: { command: command.kind, error: (e as Error).name },
      });
      throw e;
    }
  }

  #decideInTurn(command: Command, expiresAt: number | undefined): Promise<CommandResult> {
    // Checked at its turn: a master that stepped down while the command waited must not decide it.
    if (!this.ports.isMaster()) {
      throw new NoMaster(
        "this node stopped being the master while the command waited; retry",
        "master_changed",
      );
    }
    if (expiresAt === undefined) return decide(this.ports, command);
    const expired = () =>
      new NoMaster(
        `the command reached the master ${Math.round((Date.now() - expiresAt) / 1000)} s after the asking ` +
          "node gave up on it; it was not applied, retry",
        "master_changed",
      );
    if (Date.now() > expiresAt) throw expired();
    // Checked again right before indexing: planning may have taken a while.
    return decide({
      ...this.ports,
      index: (event) => (Date.now() > expiresAt ? Promise.reject(expired()) : this.ports.index(event)),
    }, command);
  }

  /** The peer route's answer: the result, or the refusal as data (a bug stays an exception: a 500). */
  async outcome(request: CommandRequest): Promise<Outcome> {
    const { command } = request;
    try {
      return { ok: true, result: await this.run(command, request.expires_at) };
    } catch (e) {
      const error = toWire(e);
      if (!error) {
        log.error("command {kind} failed: {error}", { kind: command.kind, error: (e as Error).message });
        throw e;
      }
      return { ok: false, error };
    }
  }
}
