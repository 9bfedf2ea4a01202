/**
 * A neural voice on disk as sherpa-onnx loads it: which files of a model directory make the Piper/VITS or
 * Kokoro model, where its espeak-ng data comes from, its sample rate and its voices (speaker ids).
 */
import { z } from "zod";
import type { ModelCard } from "../../models/card.ts";
import { OnnxFormatError, readOnnxMetadata } from "../../models/onnx/model.ts";
import { ProtoError } from "../../models/onnx/protobuf.ts";
import type { TtsModel } from "./protocol.ts";

/** One voice of a model: what the API calls it, and the speaker id sherpa-onnx takes. */
export interface NeuralVoice {
  id: string;
  sid: number;
  name: string;
  language: string;
}

export interface VoiceDir {
  model: TtsModel;
  sampleRate: number;
  voices: NeuralVoice[];
  defaultVoice: string;
}

/** Where espeak-ng keeps its data when a voice brings none (Debian/Ubuntu multiarch, other Linux, Homebrew). */
export const SYSTEM_ESPEAK_DATA = [
  "/usr/lib/x86_64-linux-gnu/espeak-ng-data",
  "/usr/lib/aarch64-linux-gnu/espeak-ng-data",
  "/usr/share/espeak-ng-data",
  "/usr/lib/espeak-ng-data",
  "/opt/homebrew/share/espeak-ng-data",
  "/usr/local/share/espeak-ng-data",
];

/** Piper's own config next to its model (`<model>.onnx.json`): only what names voices. */
const PiperConfigSchema = z.looseObject({
  dataset: z.string().optional(),
  language: z.looseObject({ code: z.string().optional() }).optional(),
  speaker_id_map: z.record(z.string(), z.number().int().nonnegative()).optional(),
});

const MetadataSchema = z.looseObject({
  sample_rate: z.coerce.number().int().positive(),
  n_speakers: z.coerce.number().int().nonnegative().default(1),
  language: z.string().optional(),
});

export class VoiceDirError extends Error {}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * The voice ids a model answers to, in speaker-id order: the card's (`audio.voice_catalog`, else
 * `audio.voices`; the n-th is speaker n), else Piper's speaker_id_map, else numbers, else one voice
 * named after the dataset. Pure.
 */
export function voiceTable(
  card: Pick<ModelCard, "audio">,
  speakers: number,
  piper: z.infer<typeof PiperConfigSchema> | null,
  language: string,
): NeuralVoice[] {
  const catalog = card.audio?.voice_catalog;
  if (catalog?.length) {
    return catalog.map((v, sid) => ({
      id: v.id,
      sid,
      name: v.name,
      language: v.preferred_languages?.[0] ?? language,
    }));
  }
  if (card.audio?.voices?.length) {
    return card.audio.voices.map((id, sid) => ({ id, sid, name: id, language }));
  }
  const map = Object.entries(piper?.speaker_id_map ?? {}).sort((a, b) => a[1] - b[1]);
  if (map.length > 1) return map.map(([id, sid]) => ({ id, sid, name: id.replaceAll("_", " "), language }));
  if (speakers > 1) {
    return Array.from({ length: speakers }, (_, sid) => ({
      id: String(sid),
      sid,
      name: `speaker ${sid}`,
      language,
    }));
  }
  const id = piper?.dataset ?? "default";
  return [{ id, sid: 0, name: id.replaceAll("_", " "), language }];
}

/**
 * Reads a model directory (the card's downloaded repo, or a local voice): the .onnx model and its
 * metadata, tokens.txt, voices.bin (Kokoro), espeak-ng-data/ or a lexicon. Throws VoiceDirError naming
 * what is missing. `espeakData` lists the system dirs to fall back on when the voice brings none.
 */
export function readVoiceDir(
  dir: string,
  card: Pick<ModelCard, "model_id" | "audio" | "family">,
  espeakData: string[] = SYSTEM_ESPEAK_DATA,
): VoiceDir {
  let names: string[];
  try {
    names = [...Deno.readDirSync(dir)].map((e) => e.name);
  } catch (e) {
    throw new VoiceDirError(
      `${card.model_id}: its model directory ${dir} cannot be read (${(e as Error).message})`,
    );
  }
  const onnx = names.filter((n) => n.endsWith(".onnx")).sort();
  // Kokoro's and sherpa-onnx's exports call the model model.onnx; Piper's are named after the voice.
  const modelName = onnx.includes("model.onnx") ? "model.onnx" : onnx.length === 1 ? onnx[0] : null;
  if (!modelName) {
    throw new VoiceDirError(
      onnx.length
        ? `${card.model_id}: ${dir} holds several ONNX files (${onnx.join(", ")}) and none is model.onnx`
        : `${card.model_id}: ${dir} holds no .onnx model`,
    );
  }
  const model = `${dir}/${modelName}`;
  const tokens = `${dir}/tokens.txt`;
  if (!names.includes("tokens.txt")) {
    throw new VoiceDirError(
      `${card.model_id}: ${dir} has no tokens.txt (sherpa-onnx needs the model's token table)`,
    );
  }
  let meta: z.infer<typeof MetadataSchema>;
  try {
    const parsed = MetadataSchema.safeParse(readOnnxMetadata(model));
    if (!parsed.success) {
      throw new VoiceDirError(
        `${card.model_id}: ${modelName} carries no sample_rate metadata; it is not a sherpa-onnx export ` +
          `(Piper voices need sherpa-onnx's metadata added: use the sherpa-onnx builds of the voice)`,
      );
    }
    meta = parsed.data;
  } catch (e) {
    if (e instanceof OnnxFormatError || e instanceof ProtoError) {
      throw new VoiceDirError(`${card.model_id}: ${modelName} is not a readable ONNX file (${e.message})`);
    }
    throw e;
  }
  let piper: z.infer<typeof PiperConfigSchema> | null = null;
  if (names.includes(`${modelName}.json`)) {
    try {
      piper = PiperConfigSchema.parse(JSON.parse(Deno.readTextFileSync(`${dir}/${modelName}.json`)));
    } catch (e) {
      throw new VoiceDirError(
        `${card.model_id}: ${modelName}.json is not a Piper config (${(e as Error).message})`,
      );
    }
  }
  const ownData = names.includes("espeak-ng-data") ? `${dir}/espeak-ng-data` : undefined;
  const dataDir = ownData ?? espeakData.find((d) => exists(`${d}/phontab`));
  const language = piper?.language?.code ?? meta.language ?? "";
  const voices = voiceTable(card, meta.n_speakers, piper, language);
  const defaultVoice = card.audio?.default_voice ?? voices[0].id;
  if (!voices.some((v) => v.id === defaultVoice)) {
    throw new VoiceDirError(`${card.model_id}: its default voice ${defaultVoice} is not one of its voices`);
  }
  const lexicons = names.filter((n) => /^lexicon.*\.txt$/.test(n)).sort().map((n) => `${dir}/${n}`);
  if (names.includes("voices.bin") || card.family.toLowerCase() === "kokoro") {
    if (!names.includes("voices.bin")) {
      throw new VoiceDirError(`${card.model_id}: Kokoro needs voices.bin in ${dir}`);
    }
    if (!dataDir) {
      throw new VoiceDirError(
        `${card.model_id}: Kokoro needs espeak-ng data: the model brings no espeak-ng-data/ and none is installed ` +
          `(install the Debian package espeak-ng-data)`,
      );
    }
    return {
      model: {
        kind: "kokoro",
        model,
        voices: `${dir}/voices.bin`,
        tokens,
        dataDir,
        lexicon: lexicons.length ? lexicons.join(",") : undefined,
      },
      sampleRate: meta.sample_rate,
      voices,
      defaultVoice,
    };
  }
  if (!dataDir && !lexicons.length) {
    throw new VoiceDirError(
      `${card.model_id}: the voice brings neither espeak-ng-data/ nor a lexicon, and no espeak-ng data is ` +
        `installed (install the Debian package espeak-ng-data)`,
    );
  }
  return {
    model: { kind: "vits", model, tokens, ...(dataDir ? { dataDir } : { lexicon: lexicons.join(",") }) },
    sampleRate: meta.sample_rate,
    voices,
    defaultVoice,
  };
}
