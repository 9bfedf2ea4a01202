/**
 * A runner as this node runs it: its phase, engine and where it serves. Types only, so that the serving code
 * and the node context name a runner without importing the worker plane.
 */
import type { EngineKind } from "../engines/dispatch.ts";
import type { EngineProcess } from "../engines/process.ts";
import type { VoiceDir } from "../engines/sherpa/voice-dir.ts";
import type { Speculation } from "../engines/speculation.ts";
import type { ModelCard } from "../models/card.ts";
import type { LocalPhase } from "./plan.ts";

export interface LocalRunner {
  runnerId: string;
  instanceId: string;
  modelId: string;
  phase: LocalPhase;
  /** What this node runs for the instance: its own llama-server, a pool's driver, or a pool's donor. */
  role: "single" | "driver" | "donor";
  /** http://127.0.0.1:<port> of the engine, once it serves (null for a donor: it serves the driver only). */
  baseUrl: string | null;
  contextTokens: number;
  engine: EngineProcess | null;
  /** Why the runner failed, with the engine's log tail. */
  failure: string | null;
  /** Aborted when the runner is stopped: cancels its download or start. */
  abort: AbortController;
  /** Which engine serves it, once chosen. */
  engineKind?: EngineKind;
  /** The binary an engine run once per request uses (espeak-ng); such a runner has no baseUrl. */
  command?: string | null;
  /** The placed card (its audio section drives the speech routes). */
  card?: ModelCard;
  /** A neural voice's sample rate and voices (sherpa-onnx runners). */
  voice?: VoiceDir;
  /** The speculative decoding its llama-server runs with, when any. */
  speculation?: Speculation;
}
