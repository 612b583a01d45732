import { describe, expect, it } from "vitest";
import { ApiError } from "../../src/core/errors";
import {
  checkCas,
  deletionTimeFor,
  effectiveMaxVersions,
  isLive,
  listChildren,
  mergePatch,
  oldestAfterWrite,
  parseCas,
  patchCustomMetadata,
  requireVersions,
  subkeys,
  validateCustomMetadata,
  validateFolder,
  validateSecretPath,
} from "../../src/engines/kv/service";

const settings = (maxVersions = 0, deleteVersionAfter = 0) => ({ maxVersions, casRequired: false, deleteVersionAfter });

function errorOf(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (e) {
    if (e instanceof ApiError) return e;
    throw e;
  }
  throw new Error("expected an ApiError");
}

describe("mergePatch (RFC 7386)", () => {
  it("follows the RFC's examples", () => {
    const cases: Array<[unknown, unknown, unknown]> = [
      [{ a: "b" }, { a: "c" }, { a: "c" }],
      [{ a: "b" }, { b: "c" }, { a: "b", b: "c" }],
      [{ a: "b" }, { a: null }, {}],
      [{ a: "b", b: "c" }, { a: null }, { b: "c" }],
      [{ a: ["b"] }, { a: "c" }, { a: "c" }],
      [{ a: "c" }, { a: ["b"] }, { a: ["b"] }],
      [{ a: { b: "c" } }, { a: { b: "d", c: null } }, { a: { b: "d" } }],
      [{ a: [{ b: "c" }] }, { a: [1] }, { a: [1] }],
      [["a", "b"], ["c", "d"], ["c", "d"]],
      [{ a: "b" }, ["c"], ["c"]],
      [{ a: "foo" }, null, null],
      [{ a: "foo" }, "bar", "bar"],
      [{ e: null }, { a: 1 }, { e: null, a: 1 }],
      [[1, 2], { a: "b", c: null }, { a: "b" }],
      [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }],
    ];
    for (const [target, patch, result] of cases) expect(mergePatch(target, patch)).toEqual(result);
  });

  it("does not modify its inputs", () => {
    const target = { a: { b: "c" } };
    mergePatch(target, { a: { b: null } });
    expect(target).toEqual({ a: { b: "c" } });
  });
});

describe("subkeys", () => {
  const data = { a: "1", b: { c: "2", d: { e: "3" } }, f: [1, { g: 2 }], h: null, i: {} };
  it("replaces leaves and arrays with null", () => {
    expect(subkeys(data)).toEqual({ a: null, b: { c: null, d: { e: null } }, f: null, h: null, i: {} });
  });
  it("stops at the given depth", () => {
    expect(subkeys(data, 1)).toEqual({ a: null, b: null, f: null, h: null, i: null });
    expect(subkeys(data, 2)).toEqual({ a: null, b: { c: null, d: null }, f: null, h: null, i: {} });
  });
});

describe("version rules", () => {
  it("checks cas against the current version", () => {
    expect(() => checkCas(undefined, 3, false)).not.toThrow();
    expect(() => checkCas(3, 3, true)).not.toThrow();
    expect(() => checkCas(0, 0, true)).not.toThrow();
    expect(errorOf(() => checkCas(2, 3, false)).messages).toEqual(["check-and-set parameter did not match the current version"]);
    expect(errorOf(() => checkCas(undefined, 3, true)).messages).toEqual(["check-and-set parameter required for this call"]);
  });

  it("parses cas weakly and refuses garbage", () => {
    expect(parseCas(undefined)).toBeUndefined();
    expect(parseCas({})).toBeUndefined();
    expect(parseCas({ cas: null })).toBeUndefined();
    expect(parseCas({ cas: 2 })).toBe(2);
    expect(parseCas({ cas: "4" })).toBe(4);
    expect(errorOf(() => parseCas({ cas: "x" })).status).toBe(400);
    expect(errorOf(() => parseCas({ cas: 1.5 })).status).toBe(400);
    expect(errorOf(() => parseCas({ cas: -1 })).status).toBe(400);
  });

  it("picks max_versions: key, then mount, then 10", () => {
    expect(effectiveMaxVersions(settings(), null)).toBe(10);
    expect(effectiveMaxVersions(settings(4), null)).toBe(4);
    expect(effectiveMaxVersions(settings(4), { maxVersions: 2 })).toBe(2);
    expect(effectiveMaxVersions(settings(4), { maxVersions: 0 })).toBe(4);
  });

  it("moves oldest_version once the key is full", () => {
    expect(oldestAfterWrite(1, 0, 10)).toBe(0);
    expect(oldestAfterWrite(9, 0, 10)).toBe(0);
    expect(oldestAfterWrite(10, 0, 10)).toBe(1);
    expect(oldestAfterWrite(11, 1, 10)).toBe(2);
    expect(oldestAfterWrite(4, 1, 2)).toBe(3);
  });

  it("computes the deletion time from the smaller non-zero delete_version_after", () => {
    expect(deletionTimeFor(1000, settings(), null)).toBeNull();
    expect(deletionTimeFor(1000, settings(0, 60), null)).toBe(61_000);
    expect(deletionTimeFor(1000, settings(0, 60), { deleteVersionAfter: 30 })).toBe(31_000);
    expect(deletionTimeFor(1000, settings(0, 0), { deleteVersionAfter: 30 })).toBe(31_000);
  });

  it("treats a version as live until its deletion time passes", () => {
    expect(isLive({ deletionTime: null, destroyed: false }, 5)).toBe(true);
    expect(isLive({ deletionTime: 10, destroyed: false }, 5)).toBe(true);
    expect(isLive({ deletionTime: 5, destroyed: false }, 5)).toBe(false);
    expect(isLive({ deletionTime: null, destroyed: true }, 5)).toBe(false);
  });

  it("requires a non-empty list of positive versions", () => {
    expect(requireVersions([3, 1, 3])).toEqual([1, 3]);
    expect(errorOf(() => requireVersions([])).messages[0]).toContain("versions");
    expect(errorOf(() => requireVersions(undefined)).messages[0]).toContain("versions");
    expect(errorOf(() => requireVersions([0])).messages[0]).toContain("versions");
  });
});

describe("paths and listing", () => {
  it("validates secret paths and names the field", () => {
    expect(validateSecretPath("a/b")).toBe("a/b");
    expect(validateSecretPath("a/b/")).toBe("a/b");
    for (const bad of ["", undefined, "/a", "a//b", "a/../b", "./a", "a\u0000b", "x".repeat(1025)]) {
      expect(errorOf(() => validateSecretPath(bad)).messages[0]).toMatch(/^path: /);
    }
    expect(validateFolder("")).toBe("");
    expect(validateFolder("a/b/")).toBe("a/b/");
  });

  it("lists direct children with folders as name/", () => {
    const paths = ["a", "b/c", "b/d/e", "b/f", "bb"];
    expect(listChildren(paths, "")).toEqual(["a", "b/", "bb"]);
    expect(listChildren(paths, "b/")).toEqual(["c", "d/", "f"]);
    expect(listChildren(paths, "x/")).toEqual([]);
  });
});

describe("custom metadata", () => {
  it("accepts strings and, for patches, nulls", () => {
    expect(validateCustomMetadata({ a: "1" })).toEqual({ a: "1" });
    expect(validateCustomMetadata({ a: null }, true)).toEqual({ a: null });
    expect(errorOf(() => validateCustomMetadata({ a: null })).messages[0]).toContain("custom_metadata");
    expect(errorOf(() => validateCustomMetadata({ a: 1 })).messages[0]).toContain("custom_metadata");
    expect(errorOf(() => validateCustomMetadata({ "": "x" })).messages[0]).toContain("custom_metadata");
  });

  it("patches: null removes, values set", () => {
    expect(patchCustomMetadata({ a: "1", b: "2" }, { a: null, c: "3" })).toEqual({ b: "2", c: "3" });
  });
});
