import { Endpointer, rms } from "../../src/dashboard/app/endpoint.ts";
import { describe, expect, it } from "vitest";
import { ApiFailure } from "../../src/dashboard/app/api.ts";
import { speechKind } from "../../src/dashboard/app/format.ts";
import { micAdvice, notReady, speechAdvice } from "../../src/dashboard/app/voice-advice.ts";
import { resolveCapabilities } from "../../src/models/capabilities.ts";
import { Catalog } from "../../src/models/catalog.ts";
import { cardToWire } from "../../src/models/card.ts";

describe("the chat's voice", () => {
  it.each(
    [
      [{ tasks: ["TextToSpeech"] }, "tts"],
      [{ tasks: ["TextGeneration"], audio: { kind: "tts" } }, "tts"],
      [{ tasks: ["SpeechToText"] }, "stt"],
      [{ tasks: ["TextGeneration"], audio: { kind: "stt" } }, "stt"],
      [{ tasks: ["TextGeneration"] }, null],
      [{ tasks: ["TextEmbedding"] }, null],
      [undefined, null],
    ] as const,
  )("a card %j is a %s model", (card, want) => {
    expect(speechKind(card)).toBe(want);
  });

  it("reads every catalogue card as /models resolves its capabilities", () => {
    const cards = Catalog.bundled().all();
    expect(cards.some((c) => speechKind(cardToWire(c)) !== null)).toBe(true);
    for (const card of cards) {
      const caps = resolveCapabilities(card);
      const want = caps.supports_speech_synthesis ? "tts" : caps.supports_transcription ? "stt" : null;
      expect([card.model_id, speechKind(cardToWire(card))]).toEqual([card.model_id, want]);
    }
  });

  it.each([
    ["NotAllowedError", /refused the microphone.*Allow/],
    ["SecurityError", /refused the microphone/],
    ["NotFoundError", /No microphone was found/],
    ["NotReadableError", /busy or failed/],
    ["InsecureContext", /secure pages.*https/],
    ["AbortError", /could not start \(boom\)/],
  ])("a microphone %s is explained", (name, want) => {
    expect(micAdvice(name, "boom")).toMatch(want);
  });

  it.each([
    [0, "fetch failed", /did not answer \(fetch failed\)/],
    [404, "model not placed", /speech model m\/tts is not placed \(model not placed\).*model store/],
    [503, "busy", /not ready yet \(busy\)/],
    [500, "espeak-ng crashed", /m\/tts failed \(espeak-ng crashed\)/],
    [400, "input is empty", /refused \(input is empty\)/],
  ])("a speech request failing with %d is explained", (status, message, want) => {
    expect(speechAdvice("speech", "m/tts", new ApiFailure(status, message))).toMatch(want);
  });

  it("names the model that is not ready", () => {
    expect(notReady("transcription", "m/stt")).toMatch(/transcription model m\/stt is not ready/);
  });
});

describe("the end of an utterance", () => {
  const run = (samples: [number, number][]) => {
    const e = new Endpointer();
    return samples.map(([rms, t]) => e.push(rms, t));
  };
  const steady = (rms: number, from: number, to: number) =>
    Array.from({ length: (to - from) / 50 }, (_, i) => [rms, from + i * 50] as [number, number]);

  it("ends after speech and then 1.2 s of quiet", () => {
    const states = run([...steady(0.001, 0, 500), ...steady(0.1, 500, 1500), ...steady(0.001, 1500, 3000)]);
    expect(states.slice(0, 10).every((s) => s === "waiting")).toBe(true);
    expect(states).toContain("speaking");
    const end = states.indexOf("done");
    // Quiet began at 1500 ms; done at the first sample 1200 ms later.
    expect(steady(0.001, 0, 500).length + steady(0.1, 500, 1500).length + 24).toBe(end);
  });

  it("never ends on quiet alone, nor on a click shorter than speech", () => {
    expect(run(steady(0.001, 0, 5000))).not.toContain("done");
    expect(run([...steady(0.001, 0, 1000), [0.5, 1000], ...steady(0.001, 1050, 4000)])).not.toContain("done");
  });

  it("does not end in a pause between words (between the thresholds)", () => {
    const states = run([...steady(0.1, 0, 500), ...steady(0.012, 500, 3000), ...steady(0.1, 3000, 3500)]);
    expect(states).not.toContain("done");
  });

  it("measures loudness as RMS", () => {
    expect(rms(new Float32Array([0.5, -0.5, 0.5, -0.5]))).toBeCloseTo(0.5);
    expect(rms(new Float32Array(0))).toBe(0);
  });
});
