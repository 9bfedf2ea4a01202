/**
 * The application layer's domain errors: what a use case answers when it does not do what was asked.
 * They carry no HTTP status (src/api/errors.ts maps them) and travel between nodes as data (`toWire`).
 */
import { z } from "zod";
import { NoMaster, NoQuorum } from "../cluster/commit.ts";
import { UntrustedInputError } from "../security/ids.ts";

export { NoMaster, NoQuorum };

export type DomainKind =
  | "NotPlaced"
  | "NotReady"
  | "Pending"
  | "Conflict"
  | "Refused"
  | "Invalid"
  | "NotFound"
  | "Busy";

/** A use case's refusal; `param` names the request field it concerns, when one does. */
export class DomainError extends Error {
  constructor(readonly kind: DomainKind, message: string, readonly param: string | null = null) {
    super(message);
    this.name = kind;
  }
}

/** The model has no instance to act on. */
export class NotPlaced extends DomainError {
  constructor(message: string) {
    super("NotPlaced", message);
  }
}
/** Not yet: the cluster has not told enough (telemetry still arriving) or this node has not applied it yet. */
export class NotReady extends DomainError {
  constructor(message: string) {
    super("NotReady", message);
  }
}
/** The planner lacks telemetry to decide yet (a node's memory not reported): the asking node retries. */
export class Pending extends DomainError {
  constructor(message: string) {
    super("Pending", message);
  }
}
/** The request contradicts what exists (a bundled card's id). */
export class Conflict extends DomainError {
  constructor(message: string, param: string | null = null) {
    super("Conflict", message, param);
  }
}
/** The planner (or the master) said no, with its numbers: the placement does not fit now. */
export class Refused extends DomainError {
  constructor(message: string, param: string | null = "model_id") {
    super("Refused", message, param);
  }
}
/** The request names something impossible or malformed. */
export class Invalid extends DomainError {
  constructor(message: string, param: string | null = null) {
    super("Invalid", message, param);
  }
}
/** The request names something that does not exist. */
export class NotFound extends DomainError {
  constructor(message: string) {
    super("NotFound", message);
  }
}
/** The master's command queue is full: retry shortly. */
export class Busy extends DomainError {
  constructor(message: string) {
    super("Busy", message);
  }
}

/** A domain error as it crosses from the master to the node that was asked. */
export const WireErrorSchema = z.object({
  kind: z.enum([
    "NotPlaced",
    "NotReady",
    "Pending",
    "Conflict",
    "Refused",
    "Invalid",
    "NotFound",
    "Busy",
    "NoMaster",
    "NoQuorum",
  ]),
  message: z.string().max(4096),
  param: z.string().max(256).nullable(),
  code: z.string().max(64).nullable(),
});
export type WireError = z.infer<typeof WireErrorSchema>;

/** The wire form of a domain error; null for anything else (a bug, which stays a 500 on the master). */
export function toWire(e: unknown): WireError | null {
  if (e instanceof DomainError) return { kind: e.kind, message: e.message, param: e.param, code: null };
  if (e instanceof UntrustedInputError) {
    return { kind: "Invalid", message: e.message, param: e.field, code: null };
  }
  if (e instanceof NoMaster) return { kind: "NoMaster", message: e.message, param: null, code: e.code };
  if (e instanceof NoQuorum) return { kind: "NoQuorum", message: e.message, param: null, code: null };
  return null;
}

/** The domain error a wire form stands for, to be thrown on the node that was asked (mapped by `kind`). */
export function fromWire(w: WireError): Error {
  if (w.kind === "NoMaster") {
    return new NoMaster(w.message, w.code === "master_changed" ? "master_changed" : "no_master");
  }
  if (w.kind === "NoQuorum") return new NoQuorum(w.message);
  return new DomainError(w.kind, w.message, w.param);
}
