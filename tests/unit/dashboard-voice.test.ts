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
