/**
 * espeak-ng, the voice that is always there: run once per request as a child process (a crash fails that
 * request only), bounded in time and in how many run at once. Speaks 16-bit mono PCM at 22050 Hz.
 */
import { shortLivedArgv } from "./lifeline.ts";
import type { EngineSettings } from "./settings.ts";

export const ESPEAK_SAMPLE_RATE = 22050;
const DEFAULT_WPM = 175;
const TIMEOUT_MS = 60_000;
const MAX_PARALLEL = 4;

export interface EspeakVoice {
  id: string;
  name: string;
  language: string;
  gender: string;
  /** Other language codes espeak-ng answers with this voice ("(en 2)" in its table), e.g. "en" for en-gb. */
  aliases: string[];
}

export function findEspeak(s: Pick<EngineSettings, "espeakBin" | "path">): string | null {
  const candidates = s.espeakBin
    ? [s.espeakBin]
    : s.path.split(":").filter(Boolean).map((d) => `${d}/espeak-ng`);
  for (const p of candidates) {
    try {
      if (Deno.statSync(p).isFile) return p;
    } catch { /* next */ }
  }
  return null;
}

/** OpenAI's speed (0.25-4, 1 = normal) as espeak-ng words per minute, within what espeak-ng accepts. */
export function wordsPerMinute(speed: number): number {
  return Math.max(80, Math.min(450, Math.round(DEFAULT_WPM * speed)));
}

/** Parses `espeak-ng --voices`: "Pty Language Age/Gender VoiceName File Other Languages". */
export function parseVoiceTable(text: string): EspeakVoice[] {
  const voices: EspeakVoice[] = [];
  for (const line of text.split("\n").slice(1)) {
    const m = line.trim().match(/^\d+\s+(\S+)\s+\S*\/(\S)\s+(\S+)/);
    if (!m) continue;
    const aliases = [...line.matchAll(/\((\S+) \d+\)/g)].map((a) => a[1]);
    voices.push({
      id: m[1],
      language: m[1],
      gender: m[2] === "F" ? "female" : m[2] === "M" ? "male" : "unknown",
      name: m[3].replaceAll("_", " "),
      aliases,
    });
  }
  return voices;
}

let voiceCache: Promise<EspeakVoice[]> | null = null;

export function espeakVoices(bin: string): Promise<EspeakVoice[]> {
  voiceCache ??= new Deno.Command(bin, { args: ["--voices"], stdout: "piped", stderr: "null" }).output()
    .then((o) => parseVoiceTable(new TextDecoder().decode(o.stdout)))
    .catch(() => (voiceCache = null, []));
  return voiceCache;
}

let running = 0;
const waiting: (() => void)[] = [];

async function slot(): Promise<() => void> {
  if (running >= MAX_PARALLEL) await new Promise<void>((r) => waiting.push(r));
  running++;
  return () => {
    running--;
    waiting.shift()?.();
  };
}

export class SynthesisFailed extends Error {}

/**
 * Speaks `text`; resolves to a stream of raw 16-bit PCM (the WAV header espeak-ng writes is dropped) as
 * espeak-ng produces it. The stream errors if espeak-ng fails or runs past the timeout.
 */
export async function espeakPcm(
  bin: string,
  o: { text: string; voice: string; speed: number; signal?: AbortSignal },
): Promise<ReadableStream<Uint8Array>> {
  const release = await slot();
  let child: Deno.ChildProcess;
  try {
    const [cmd, ...args] = shortLivedArgv([
      bin,
      "--stdout",
      "-v",
      o.voice,
      "-s",
      String(wordsPerMinute(o.speed)),
      "--stdin",
    ]);
    child = new Deno.Command(cmd, {
      args,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (e) {
    release();
    throw new SynthesisFailed(`espeak-ng could not start: ${(e as Error).message}`);
  }
  const kill = () => {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
  };
  const timer = setTimeout(kill, TIMEOUT_MS);
  o.signal?.addEventListener("abort", kill);
  const writer = child.stdin.getWriter();
  void writer.write(new TextEncoder().encode(o.text)).then(() => writer.close()).catch(() => {});
  const stderr = new Response(child.stderr).text();
  const reader = child.stdout.getReader();
  let header = 44;
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    o.signal?.removeEventListener("abort", kill);
    release();
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await reader.read();
      if (done) {
        const status = await child.status;
        finish();
        if (!status.success) {
          const why = (await stderr).trim() ||
            (status.signal ? `killed by ${status.signal}` : `exit code ${status.code}`);
          controller.error(new SynthesisFailed(`espeak-ng failed: ${why}`));
        } else controller.close();
        return;
      }
      let chunk = value;
      if (header > 0) {
        const drop = Math.min(header, chunk.length);
        header -= drop;
        chunk = chunk.subarray(drop);
      }
      if (chunk.length) controller.enqueue(chunk);
    },
    cancel() {
      kill();
      finish();
    },
  });
}
