/**
 * What it takes to launch a card's engine on this node (`prepareEngine`: binaries, model file, a supervised
 * process bound to a band port, or a per-request tool), and the speech backend tags this node advertises.
 */
import type { ModelCard } from "../models/card.ts";
import { findEngines } from "./discovery.ts";
import { findEspeak } from "./espeak.ts";
import { findSherpaOnnx, sherpaProcess } from "./sherpa/engine.ts";
import { readVoiceDir, type VoiceDir, VoiceDirError } from "./sherpa/voice-dir.ts";
import { llamaServerProcess } from "./llama-server.ts";
import {
  draftInOwnRepo,
  type DraftModel,
  type Speculation,
  SpeculationError,
  speculationFor,
} from "./speculation.ts";
import type { EngineProcess, ProcessRegistry } from "./process.ts";
import type { EngineSettings } from "./settings.ts";
import { findWhisperServer, whisperServerProcess } from "./whisper-server.ts";
import { type EngineKind, engineKindFor } from "./kind.ts";

export { type EngineKind, engineKindFor };

/** Backend tags for the speech engines this node has (`whisper_cpp`, `espeak_ng`, `sherpa_onnx`), advertised like llama.cpp's. */
export function speechBackendTags(s: EngineSettings): string[] {
  const tags: string[] = [];
  const whisper = findWhisperServer(s);
  if (whisper) tags.push("whisper_cpp", `whisper_cpp-${whisperBackend(whisper)}`);
  if (findEspeak(s)) tags.push("espeak_ng", "espeak_ng-cpu");
  if (findSherpaOnnx(s)) tags.push("sherpa_onnx", "sherpa_onnx-cpu");
  return tags;
}

/** The compute a whisper-server was built for, from the build.json scripts/build-whisper writes (cpu when unknown). */
function whisperBackend(bin: string): string {
  try {
    const info = JSON.parse(Deno.readTextFileSync(`${bin.replace(/\/[^/]+$/, "")}/../build.json`)) as {
      backend?: unknown;
    };
    return typeof info.backend === "string" ? info.backend : "cpu";
  } catch {
    return "cpu";
  }
}

export interface PreparedEngine {
  kind: EngineKind;
  /** Builds the supervised process on a port; null for an engine run once per request. */
  process: ((port: number, registry: ProcessRegistry) => EngineProcess) | null;
  /** The binary run per request (espeak-ng). */
  command: string | null;
  /** A neural voice's sample rate and voices (sherpa-onnx), known before it starts. */
  voice?: VoiceDir;
  /** The speculative decoding llama-server runs with, when any. */
  speculation?: Speculation;
}

/** How the worker finds a card's files on this node (or downloads them). */
export interface ModelFiles {
  /** The one model file llama-server and whisper-server load. */
  file: () => Promise<{ path: string } | { error: string }>;
  /** The directory of a model made of several files (a sherpa-onnx voice). */
  dir: () => Promise<{ path: string } | { error: string }>;
  /** A draft model from another repo (a companion of the card), found or downloaded like the model. */
  draft: (d: DraftModel) => Promise<{ path: string } | { error: string }>;
}

/** What a pool's driver adds to llama-server's command line. */
export interface LlamaExtras {
  /** host:port of each ggml-rpc-server donor. */
  rpc?: string[];
  /** llama-server's log verbosity (4 names every RPC device and its share in the load log). */
  verbosity?: number;
}

/** Prepares the card's engine from this node's engine settings; `files` finds (or downloads) what it loads. */
export async function prepareEngine(
  card: ModelCard,
  contextTokens: number,
  files: ModelFiles,
  settings: EngineSettings,
  llama: LlamaExtras = {},
): Promise<PreparedEngine | { error: string }> {
  const chosen = engineKindFor(card);
  if ("error" in chosen) return chosen;
  switch (chosen.kind) {
    case "espeak-ng": {
      const bin = findEspeak(settings);
      if (!bin) {
        return {
          error:
            "espeak-ng was not found on this node: install the Debian package espeak-ng (scripts/test-deps) or set SKULK_ESPEAK_BIN",
        };
      }
      return { kind: "espeak-ng", process: null, command: bin };
    }
    case "sherpa-onnx": {
      if (!findSherpaOnnx(settings)) {
        return {
          error:
            "sherpa-onnx was not found on this node: the npm package sherpa-onnx-node installed no native build for this platform",
        };
      }
      const dir = await files.dir();
      if ("error" in dir) return dir;
      let voice: VoiceDir;
      try {
        voice = readVoiceDir(dir.path, card);
      } catch (e) {
        if (e instanceof VoiceDirError) return { error: e.message };
        throw e;
      }
      const threads = settings.sherpaThreads;
      return {
        kind: "sherpa-onnx",
        command: null,
        voice,
        process: (port, registry) => sherpaProcess({ port, config: { tts: voice.model, threads } }, registry),
      };
    }
    case "whisper-server": {
      const bin = findWhisperServer(settings);
      if (!bin) {
        return {
          error:
            "whisper-server was not found on this node: set SKULK_WHISPER_SERVER_BIN or run scripts/build-whisper",
        };
      }
      const file = await files.file();
      if ("error" in file) return file;
      return {
        kind: "whisper-server",
        command: null,
        process: (port, registry) => whisperServerProcess({ bin, model: file.path, port }, registry),
      };
    }
    case "llama-server": {
      const engines = await findEngines(settings);
      if (!engines.llamaServer) {
        return {
          error:
            "llama-server was not found on this node: install the skulk-llama-cpu package, set SKULK_LLAMA_SERVER_BIN or run `skulk engine build`",
        };
      }
      let speculation: Speculation | null;
      try {
        speculation = speculationFor(card, { ngram: settings.speculationNgram, pooled: !!llama.rpc?.length });
      } catch (e) {
        if (e instanceof SpeculationError) return { error: e.message };
        throw e;
      }
      const file = await files.file();
      if ("error" in file) return file;
      const bin = engines.llamaServer;
      let draftPath: string | null = null;
      if (speculation?.draft) {
        // A drafter in the model's own repo came down with it (hub.ts filesForCard); another repo's is a companion.
        const draft = draftInOwnRepo(card, speculation)
          ? { path: `${file.path.replace(/\/[^/]+$/, "")}/${speculation.draft.file}` }
          : await files.draft(speculation.draft);
        if ("error" in draft) return { error: `the draft model for speculative decoding: ${draft.error}` };
        draftPath = draft.path;
      }
      const mmproj = !card.mmproj_file
        ? undefined
        : card.mmproj_file.startsWith("/")
        ? card.mmproj_file
        : `${file.path.replace(/\/[^/]+$/, "")}/${card.mmproj_file}`;
      // llama-server quotes a bad file's first bytes in its log, whose tail a failed runner reports:
      // only a GGUF file ever reaches it.
      for (const path of [file.path, mmproj, draftPath ?? undefined]) {
        if (path !== undefined && !(await isGguf(path))) {
          return { error: `${path} is not a GGUF file; llama-server was not started` };
        }
      }
      return {
        kind: "llama-server",
        command: null,
        speculation: speculation ?? undefined,
        process: (port, registry) =>
          llamaServerProcess({
            bin,
            model: file.path,
            port,
            contextTokens,
            embedding: card.tasks.includes("TextEmbedding"),
            mmproj,
            rpc: llama.rpc,
            verbosity: llama.verbosity,
            threads: settings.llamaThreads ?? undefined,
            speculation: speculation ? { spec: speculation, draftPath } : undefined,
            parallel: settings.llamaParallel,
          }, registry),
      };
    }
  }
}

/** True when the file starts with the GGUF magic; read as 4 bytes so nothing else of it is looked at. */
async function isGguf(path: string): Promise<boolean> {
  try {
    using f = await Deno.open(path, { read: true });
    const head = new Uint8Array(4);
    return (await f.read(head)) === 4 && new TextDecoder().decode(head) === "GGUF";
  } catch {
    return false;
  }
}
