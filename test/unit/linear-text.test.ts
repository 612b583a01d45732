/**
 * The linear replacements of backtracking regexes (src/core/text.ts, src/core/encoding.ts
 * pemArmor) give the regexes' answers, and stay fast on the inputs that made the regexes
 * quadratic; `maxBytes` fields refuse longer values with a 400 naming the field.
 */
import { describe, expect, it } from "vitest";
import { pemArmor } from "../../src/core/encoding";
import { ApiError } from "../../src/core/errors";
import { defineFields, parseFields } from "../../src/core/fields";
import { hasPlaceholder, trimEndChars } from "../../src/core/text";

/** A wall-clock budget far below the quadratic cost (seconds) and generous for a loaded machine. */
const BUDGET_MS = 500;

function fast<T>(f: () => T): T {
  const started = Date.now();
  const v = f();
  expect(Date.now() - started).toBeLessThan(BUDGET_MS);
  return v;
}

/** A small deterministic generator, so a failure reproduces. */
function rng(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
}

function randomText(next: () => number, pieces: readonly string[], n: number): string {
  let s = "";
  for (let i = 0; i < n; i++) s += pieces[Math.floor(next() * pieces.length)];
  return s;
}

describe("pemArmor", () => {
  const regexArmor = (text: string) =>
    Array.from(text.matchAll(/-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/g), (m) => ({ label: m[1] ?? "", body: m[2] ?? "" }));

  it("finds what the regex finds", () => {
    const next = rng(7);
    const pieces = ["-----BEGIN ", "-----END ", "-----", "A", "B", "CERTIFICATE", " ", "\n", "MIIB", "-", "x", "PUBLIC KEY"];
    for (let i = 0; i < 3000; i++) {
      const text = randomText(next, pieces, 1 + Math.floor(next() * 30));
      expect(pemArmor(text), JSON.stringify(text)).toEqual(regexArmor(text));
    }
    const pem = "junk\n-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n";
    expect(pemArmor(pem)).toEqual(regexArmor(pem));
  });

  it("is linear on BEGIN lines that never end (the regex took seconds)", () => {
    const unclosed = "-----BEGIN A-----\n".repeat(50_000);
    expect(fast(() => pemArmor(unclosed))).toEqual([]);
    const labels = Array.from({ length: 20_000 }, (_, i) => `-----BEGIN L${i}-----\n`).join("");
    expect(fast(() => pemArmor(labels))).toEqual([]);
    const ends = "-----END A-----".repeat(50_000);
    expect(fast(() => pemArmor(`-----BEGIN A-----${ends}`))).toHaveLength(1);
  });
});

describe("hasPlaceholder", () => {
  const regex = (s: string) => /\{\{[^}]*\}\}/.test(s);

  it("answers as /\\{\\{[^}]*\\}\\}/ does", () => {
    const next = rng(11);
    for (let i = 0; i < 5000; i++) {
      const s = randomText(next, ["{", "}", "a", "/", "{{", "}}"], Math.floor(next() * 16));
      expect(hasPlaceholder(s), JSON.stringify(s)).toBe(regex(s));
    }
    expect(hasPlaceholder("https://x/{{issuer_id}}/ca")).toBe(true);
    expect(hasPlaceholder("https://x/{issuer_id}/ca")).toBe(false);
  });

  it("is linear on a long run of braces", () => {
    expect(fast(() => hasPlaceholder(`${"{".repeat(200_000)}x`))).toBe(false);
    expect(fast(() => hasPlaceholder(`${"{{}".repeat(100_000)}x`))).toBe(false);
  });
});

describe("trimEndChars", () => {
  it("trims as /[ \\t\\r\\n]+$/ does, in one scan", () => {
    expect(trimEndChars("a b \t\r\n ", " \t\r\n")).toBe("a b");
    expect(trimEndChars("   ", " ")).toBe("");
    expect(trimEndChars("abc", " ")).toBe("abc");
    expect(fast(() => trimEndChars(`${" ".repeat(200_000)}x`, " \t\r\n"))).toHaveLength(200_001);
  });
});

describe("fields with maxBytes", () => {
  const schema = defineFields({
    url: { type: "string", maxBytes: 16, description: "" },
    urls: { type: "comma-string-slice", maxBytes: 16, description: "" },
  });
  const errorOf = (raw: Record<string, unknown>): string => {
    try {
      parseFields(schema, raw);
      return "";
    } catch (e) {
      return e instanceof ApiError ? `${e.status} ${e.messages.join("; ")}` : String(e);
    }
  };

  it("refuses a longer value (bytes, not characters) with a 400 naming the field", () => {
    expect(errorOf({ url: "x".repeat(16), urls: ["y".repeat(16)] })).toBe("");
    expect(errorOf({ url: "x".repeat(17) })).toBe("400 url: longer than 16 bytes");
    expect(errorOf({ url: "é".repeat(9) })).toBe("400 url: longer than 16 bytes");
    expect(errorOf({ urls: ["ok", "z".repeat(17)] })).toBe("400 urls: entry longer than 16 bytes");
  });
});
