/**
 * The data plane's refusals: why a request could not be served by an engine here. They carry no HTTP
 * status; src/api/errors.ts maps each kind to one.
 */

export type ServingKind =
  /** The request asks what the model or its engine cannot do (the engine refusing the input included). */
  | "Invalid"
  /** No instance of the model is placed. */
  | "NotPlaced"
  /** Placed but not serving now: loading, failed, its engine gone or not answering. */
  | "NotReady"
  /** The engine's queue is full: retry shortly. */
  | "Busy"
  /** Every slot of the instance runs and its admission queue is full: retry after a moment (a 429). */
  | "Overloaded"
  /** The engine answered, but not with something usable. */
  | "EngineFailed";

export class ServingError extends Error {
  /** `param` names the request field at fault, when one is. */
  constructor(readonly kind: ServingKind, message: string, readonly param: string | null = null) {
    super(message);
    this.name = kind;
  }
}
