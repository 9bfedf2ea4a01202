/** The data plane's refusals leave as the same HTTP answers the speech routes gave when they threw ApiErrors. */
import { describe, expect, it } from "vitest";
import { ApiError, envelope, toApiError } from "../../src/api/errors.ts";
import { ServingError } from "../../src/serving/errors.ts";

const wire = (e: ApiError) => ({
  status: e.status,
  retryAfter: e.opts.retryAfter,
  ...envelope(e.status, e.message, e.opts),
});

describe("ServingError to HTTP", () => {
  it.each([
    [
      new ServingError("Invalid", "model m cannot transcribe audio", "model"),
      new ApiError(400, "model m cannot transcribe audio", { type: "invalid_request_error", param: "model" }),
    ],
    [
      new ServingError("Invalid", "the engine refused the audio: x"),
      new ApiError(400, "the engine refused the audio: x"),
    ],
    [
      new ServingError("NotPlaced", "No instance found for model m", "model"),
      new ApiError(404, "No instance found for model m", {
        type: "invalid_request_error",
        param: "model",
        code: "model_not_found",
      }),
    ],
    [
      new ServingError("NotReady", "model m cannot serve now: loading"),
      new ApiError(503, "model m cannot serve now: loading"),
    ],
    [
      new ServingError("Busy", "the transcription engine is busy"),
      new ApiError(503, "the transcription engine is busy"),
    ],
    [
      new ServingError("EngineFailed", "answered 500 with non-JSON"),
      new ApiError(502, "answered 500 with non-JSON"),
    ],
  ])("%s", (thrown, before) => {
    const mapped = toApiError(thrown);
    expect(mapped).not.toBeNull();
    expect(wire(mapped!)).toEqual(wire(before));
  });
});
