/**
 * Neural voices on disk (src/engines/sherpa/voice-dir.ts): which files make the sherpa-onnx model, where
 * espeak-ng data comes from, voice names and speaker ids, and the reasons a directory is refused.
 */
import { afterAll, describe, expect, it } from "vitest";
import { readVoiceDir, VoiceDirError, voiceTable } from "../../src/engines/sherpa/voice-dir.ts";
import { ttsConfig } from "../../src/engines/sherpa/host.ts";
import { nativePackage } from "../../src/engines/sherpa/engine.ts";
import { encodeOnnx } from "../../src/dev/onnx/encode.ts";
import { tinyPiper, writeTinyPiper } from "../../src/dev/piper/tiny.ts";
import { tempDir } from "../helpers/daemon.ts";

const root = tempDir("sherpa-voice-");
afterAll(() => Deno.removeSync(root, { recursive: true }));
const card = (over: Record<string, unknown> = {}) => ({
  model_id: "t/voice",
  family: "piper",
  audio: undefined,
  ...over,
});

async function voice(name: string, speakers = 1): Promise<string> {
  const dir = `${root}/${name}`;
  await writeTinyPiper(dir, { speakers });
  return dir;
}

describe("voice tables", () => {
  it.each([
    ["a card's voices, in speaker order", { audio: { kind: "tts", voices: ["a", "b"] } }, 2, null, [
      ["a", 0],
      ["b", 1],
    ]],
    [
      "a card's catalogue before its plain list",
      {
        audio: {
          kind: "tts",
          voices: ["x"],
          voice_catalog: [{ id: "v", name: "Vee", preferred_languages: ["fr"] }],
        },
      },
      1,
      null,
      [["v", 0]],
    ],
    ["Piper's speaker_id_map", {}, 3, { speaker_id_map: { b: 1, a: 0, c: 2 } }, [["a", 0], ["b", 1], [
      "c",
      2,
    ]]],
    ["numbers for unnamed speakers", {}, 2, null, [["0", 0], ["1", 1]]],
    ["the dataset for one speaker", {}, 1, { dataset: "amy" }, [["amy", 0]]],
    ["default without a name", {}, 1, null, [["default", 0]]],
  ])("%s", (_, c, speakers, piper, expected) => {
    const table = voiceTable(c as Parameters<typeof voiceTable>[0], speakers, piper, "en");
    expect(table.map((v) => [v.id, v.sid])).toEqual(expected);
  });
});

describe("voice directories", () => {
  it("reads a Piper voice: model, tokens, espeak-ng data, sample rate and speakers", async () => {
    const dir = await voice("piper", 2);
    const espeak = `${root}/espeak`;
    Deno.mkdirSync(espeak);
    Deno.writeTextFileSync(`${espeak}/phontab`, "");
    const v = readVoiceDir(dir, card(), ["/nonexistent", espeak]);
    expect(v.model).toEqual({
      kind: "vits",
      model: `${dir}/model.onnx`,
      tokens: `${dir}/tokens.txt`,
      dataDir: espeak,
    });
    expect(v.sampleRate).toBe(22050);
    expect(v.voices.map((x) => x.id)).toEqual(["speaker_0", "speaker_1"]);
    expect(v.defaultVoice).toBe("speaker_0");
  });

  it("prefers the espeak-ng data a voice brings, and falls back to a lexicon without any", async () => {
    const own = await voice("own-data");
    Deno.mkdirSync(`${own}/espeak-ng-data`);
    expect(readVoiceDir(own, card(), []).model).toMatchObject({ dataDir: `${own}/espeak-ng-data` });
    const lex = await voice("lexicon");
    Deno.writeTextFileSync(`${lex}/lexicon.txt`, "hello h e l o\n");
    expect(readVoiceDir(lex, card(), []).model).toMatchObject({ lexicon: `${lex}/lexicon.txt` });
    const nothing = await voice("nothing");
    expect(() => readVoiceDir(nothing, card(), [])).toThrow(
      /neither espeak-ng-data\/ nor a lexicon/,
    );
  });

  it("reads a Kokoro layout: voices.bin and the card's voice names", () => {
    const dir = `${root}/kokoro`;
    Deno.mkdirSync(`${dir}/espeak-ng-data`, { recursive: true });
    const m = tinyPiper({ speakers: 3, sampleRate: 24000 });
    Deno.writeFileSync(
      `${dir}/model.onnx`,
      encodeOnnx({ ...m, metadata: { ...m.metadata, model_type: "kokoro" } }),
    );
    Deno.writeTextFileSync(`${dir}/tokens.txt`, "_ 0\n");
    Deno.writeFileSync(`${dir}/voices.bin`, new Uint8Array(8));
    const v = readVoiceDir(
      dir,
      card({ family: "kokoro", audio: { kind: "tts", voices: ["af", "am", "bf"] } }),
      [],
    );
    expect(v.model).toEqual({
      kind: "kokoro",
      model: `${dir}/model.onnx`,
      voices: `${dir}/voices.bin`,
      tokens: `${dir}/tokens.txt`,
      dataDir: `${dir}/espeak-ng-data`,
      lexicon: undefined,
    });
    expect(v.sampleRate).toBe(24000);
    expect(v.voices.map((x) => [x.id, x.sid])).toEqual([["af", 0], ["am", 1], ["bf", 2]]);
    expect(ttsConfig(v.model, 2)).toMatchObject({
      model: { kokoro: { model: `${dir}/model.onnx`, voices: `${dir}/voices.bin` }, numThreads: 2 },
      maxNumSentences: 1,
    });
  });

  it.each([
    ["no model", (d: string) => Deno.removeSync(`${d}/model.onnx`), /holds no \.onnx model/],
    ["no tokens.txt", (d: string) => Deno.removeSync(`${d}/tokens.txt`), /has no tokens\.txt/],
    [
      "two models, neither model.onnx",
      (d: string) => {
        Deno.renameSync(`${d}/model.onnx`, `${d}/a.onnx`);
        Deno.copyFileSync(`${d}/a.onnx`, `${d}/b.onnx`);
      },
      /several ONNX files \(a\.onnx, b\.onnx\)/,
    ],
    [
      "an ONNX file without sherpa-onnx's metadata",
      (d: string) => Deno.writeFileSync(`${d}/model.onnx`, encodeOnnx({ ...tinyPiper(), metadata: {} })),
      /no sample_rate metadata; it is not a sherpa-onnx export/,
    ],
    [
      "a file that is not ONNX",
      (d: string) => Deno.writeTextFileSync(`${d}/model.onnx`, "text, not a model"),
      /is not a readable ONNX file/,
    ],
    [
      "a default voice it does not have",
      (d: string) => Deno.writeTextFileSync(`${d}/keep`, d),
      /default voice nobody is not one of its voices/,
      { audio: { kind: "tts", default_voice: "nobody" } },
    ],
  ] as [string, (d: string) => void, RegExp, Record<string, unknown>?][])(
    "refuses a directory with %s",
    async (name, breakIt, message, over = {}) => {
      const dir = await voice(`broken-${name.replaceAll(" ", "-")}`);
      Deno.mkdirSync(`${dir}/espeak-ng-data`);
      breakIt(dir);
      expect(() => readVoiceDir(dir, card(over), [])).toThrow(VoiceDirError);
      expect(() => readVoiceDir(dir, card(over), [])).toThrow(message);
    },
  );

  it("names this platform's native package as npm does", () => {
    expect(nativePackage("linux", "x86_64")).toBe("sherpa-onnx-linux-x64");
    expect(nativePackage("darwin", "aarch64")).toBe("sherpa-onnx-darwin-arm64");
    expect(nativePackage("windows", "x86_64")).toBe("sherpa-onnx-win-x64");
    expect(nativePackage("freebsd", "x86_64")).toBeNull();
  });
});
