/** The Responses store's bounds: count, bytes and age each push out the oldest, never a newer one. */
import { describe, expect, it } from "vitest";
import { ResponseStore } from "../../src/serving/response-store.ts";

const turn = (text: string) => ({ items: [{ role: "user", content: text }] });
const bytesOf = (text: string) => JSON.stringify(turn(text).items).length;

describe("ResponseStore", () => {
  it("keeps at most maxEntries, pushing out the oldest", () => {
    const s = new ResponseStore({ maxEntries: 2, maxBytes: 1 << 20, ttlMs: 60_000 });
    s.put("resp_a", turn("a"));
    s.put("resp_b", turn("b"));
    s.put("resp_c", turn("c"));
    expect(s.get("resp_a")).toBeUndefined();
    expect(s.get("resp_b")).toEqual(turn("b"));
    expect(s.get("resp_c")).toEqual(turn("c"));
    expect(s.size).toBe(2);
  });

  it("keeps at most maxBytes of conversations, and refuses one larger than the bound alone", () => {
    const s = new ResponseStore({ maxEntries: 100, maxBytes: bytesOf("x".repeat(10)) * 2, ttlMs: 60_000 });
    s.put("resp_a", turn("x".repeat(10)));
    s.put("resp_b", turn("y".repeat(10)));
    s.put("resp_c", turn("z".repeat(10)));
    expect(s.get("resp_a")).toBeUndefined();
    expect(s.get("resp_c")).toBeDefined();
    expect(s.put("resp_big", turn("w".repeat(100)))).toBe(false);
    expect(s.get("resp_b")).toBeDefined();
  });

  it("forgets a response once its time is up", () => {
    let now = 1000;
    const s = new ResponseStore({ maxEntries: 10, maxBytes: 1 << 20, ttlMs: 500 }, () => now);
    s.put("resp_a", turn("a"));
    now = 1400;
    s.put("resp_b", turn("b"));
    expect(s.get("resp_a")).toBeDefined();
    now = 1500;
    expect(s.get("resp_a")).toBeUndefined();
    expect(s.get("resp_b")).toBeDefined();
    now = 1950;
    s.put("resp_c", turn("c"));
    expect(s.size).toBe(1);
  });

  it("replaces a response put again under the same id without counting it twice", () => {
    const s = new ResponseStore({ maxEntries: 2, maxBytes: 1 << 20, ttlMs: 60_000 });
    s.put("resp_a", turn("a"));
    s.put("resp_a", turn("a2"));
    s.put("resp_b", turn("b"));
    expect(s.get("resp_a")).toEqual(turn("a2"));
    expect(s.size).toBe(2);
  });
});
