/** The JSON body boundary: nesting past MAX_JSON_DEPTH is refused before parsing; brackets inside strings do not count. */
import { describe, expect, it } from "vitest";
import { JsonBodyError, MAX_JSON_DEPTH, parseJsonBody } from "../../src/api/errors.ts";

const nested = (n: number) => "[".repeat(n) + "]".repeat(n);

describe("parseJsonBody", () => {
  it("parses bodies up to the depth limit", () => {
    expect(parseJsonBody(nested(MAX_JSON_DEPTH))).toBeInstanceOf(Array);
    expect(parseJsonBody('{"a": {"b": [1, {"c": null}]}}')).toEqual({ a: { b: [1, { c: null }] } });
  });

  it("refuses nesting past the limit, arrays or objects, with a message naming it", () => {
    expect(() => parseJsonBody(nested(MAX_JSON_DEPTH + 1))).toThrow(JsonBodyError);
    expect(() => parseJsonBody('{"a":'.repeat(10_000) + "1" + "}".repeat(10_000))).toThrow(
      `nested deeper than ${MAX_JSON_DEPTH} levels`,
    );
  });

  it("does not count brackets inside strings, escaped quotes included", () => {
    const text = JSON.stringify({ s: "[".repeat(1000), t: '\\"[[[', u: ["{{{\\"] });
    expect(parseJsonBody(text)).toEqual(JSON.parse(text));
  });

  it("leaves malformed JSON to JSON.parse's SyntaxError", () => {
    expect(() => parseJsonBody("{")).toThrow(SyntaxError);
    expect(() => parseJsonBody('{"a":}')).toThrow(SyntaxError);
  });
});
