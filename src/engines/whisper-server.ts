/**
 * whisper.cpp's whisper-server as a supervised engine: found through SKULK_WHISPER_SERVER_BIN, PATH or the
 * build cache (scripts/build-whisper); bound to 127.0.0.1 on a band port; ready when GET / answers.
 */
import { isExecutable, onPath } from "./discovery.ts";
import type { EngineSettings } from "./settings.ts";
import { answersOk, EngineProcess, type ProcessRegistry } from "./process.ts";

export interface WhisperServerOptions {
  bin: string;
  model: string;
  port: number;
  threads?: number;
  readyDeadlineMs?: number;
}

export function whisperServerArgs(o: WhisperServerOptions): string[] {
  const args = ["-m", o.model, "--host", "127.0.0.1", "--port", String(o.port)];
  if (o.threads) args.push("-t", String(o.threads));
  return args;
}

/** The whisper-server binary this node runs, or null. */
export function findWhisperServer(
  s: Pick<EngineSettings, "whisperServerBin" | "cacheDir" | "path">,
): string | null {
  if (s.whisperServerBin) return isExecutable(s.whisperServerBin) ? s.whisperServerBin : null;
  const onThePath = onPath("whisper-server", s.path);
  if (onThePath) return onThePath;
  const engines = `${s.cacheDir}/engines`;
  try {
    const found = [...Deno.readDirSync(engines)]
      .filter((e) => e.isDirectory && e.name.startsWith("whisper.cpp-"))
      .map((e) => `${engines}/${e.name}/bin/whisper-server`)
      .filter(isExecutable)
      .sort();
    return found.at(-1) ?? null;
  } catch {
    return null;
  }
}

export function whisperServerProcess(o: WhisperServerOptions, registry?: ProcessRegistry): EngineProcess {
  const base = `http://127.0.0.1:${o.port}`;
  return new EngineProcess({
    kind: "whisper-server",
    bin: o.bin,
    args: whisperServerArgs(o),
    // The server loads the model before it listens, so any answer on / means it serves.
    probe: () => answersOk(`${base}/`),
    readyDeadlineMs: o.readyDeadlineMs ?? 120_000,
    // whisper-server holds one request at a time; a long transcription must not look like a wedged engine.
    livenessIntervalMs: 5000,
    livenessFailures: 12,
  }, registry);
}
