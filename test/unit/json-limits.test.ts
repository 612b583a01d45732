/** src/core/json.ts: parsing with a nesting limit, without echoing the text. */
import { describe, expect, it } from "vitest";
import { parsePolicy } from "../../src/auth/policy-parser";
import { decodeJsonObject } from "../../src/core/request";
import { MAX_JSON_DEPTH, parseJsonLimited, textDepthExceeds, valueDepthExceeds } from "../../src/core/json";

const nested = (levels: number) => `${"[".repeat(levels)}${"]".repeat(levels)}`;

describe("JSON depth", () => {
  it("counts objects and arrays, not brackets inside strings", () => {
    expect(textDepthExceeds(nested(3), 3)).toBe(false);
    expect(textDepthExceeds(nested(4), 3)).toBe(true);
    expect(textDepthExceeds('{"a":{"b":[1]}}', 3)).toBe(false);
    expect(textDepthExceeds('{"a":{"b":[[1]]}}', 3)).toBe(true);
    expect(textDepthExceeds(JSON.stringify({ s: "[[[[[[{{{{", t: 'q"\\[[[' }), 1)).toBe(false);
  });

  it("walks parsed values without recursion, at any depth", () => {
    let deep: unknown = {};
    for (let i = 0; i < 200_000; i++) deep = { a: deep };
    expect(valueDepthExceeds(deep, MAX_JSON_DEPTH)).toBe(true);
    expect(valueDepthExceeds({ a: [{ b: 1 }] }, 3)).toBe(false);
    expect(valueDepthExceeds({ a: [{ b: {} }] }, 3)).toBe(true);
    expect(valueDepthExceeds("text", 0)).toBe(false);
  });

  it("parses, or says only what is wrong", () => {
    expect(parseJsonLimited('{"a":1}')).toEqual({ ok: true, value: { a: 1 } });
    expect(parseJsonLimited("SECRETMARKER9")).toEqual({ ok: false, reason: "malformed" });
    expect(parseJsonLimited(nested(MAX_JSON_DEPTH))).toMatchObject({ ok: true });
    expect(parseJsonLimited(nested(MAX_JSON_DEPTH + 1))).toEqual({ ok: false, reason: "too-deep" });
  });

  it("body decoding: 'malformed JSON body' and the depth limit", () => {
    const enc = (s: string) => new TextEncoder().encode(s);
    expect(() => decodeJsonObject(enc('{"k": SECRETMARKER9}'))).toThrow(/^malformed JSON body$/);
    expect(() => decodeJsonObject(enc(`{"a":${nested(MAX_JSON_DEPTH)}}`))).toThrow(`JSON body nested deeper than ${MAX_JSON_DEPTH} levels`);
    expect(decodeJsonObject(enc(`{"a":${nested(MAX_JSON_DEPTH - 1)}}`))).toHaveProperty("a");
  });
});

describe("policy nesting", () => {
  it("an HCL policy nested deeper than the limit is a parse error, not a stack overflow", () => {
    expect(() => parsePolicy(`path "a" { ${"x { ".repeat(50_000)}${"} ".repeat(50_000)} }`)).toThrow(`nested deeper than ${MAX_JSON_DEPTH} levels`);
    expect(() => parsePolicy(`path "a" { x = ${nested(50_000)} }`)).toThrow(`nested deeper than ${MAX_JSON_DEPTH} levels`);
    // Ordinary nesting is untouched.
    expect(parsePolicy('path "a/*" { capabilities = ["read"] }').rules).toEqual([{ path: "a/*", capabilities: ["read"] }]);
  });

  it("a JSON policy: malformed without echo, and bounded depth", () => {
    expect(() => parsePolicy('{"path": SECRETMARKER9}')).toThrow(/^malformed JSON$/);
    expect(() => parsePolicy(`{"path":{"a":{"capabilities":${nested(20_000)}}}}`)).toThrow(`JSON nested deeper than ${MAX_JSON_DEPTH} levels`);
  });
});
