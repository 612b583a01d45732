import { describe, expect, it } from "vitest";
import { ApiError } from "../../src/core/errors";
import { coerceValue, defineFields, parseFields, unknownFieldsWarning } from "../../src/core/fields";

describe("coerceValue (Vault weak decoding)", () => {
  it.each([
    [true, true],
    ["true", true],
    ["t", true],
    ["1", true],
    [1, true],
    ["false", false],
    ["0", false],
    [0, false],
  ])("bool from %j", (input, want) => {
    expect(coerceValue({ type: "bool", description: "" }, input)).toBe(want);
  });

  it("refuses a bool it cannot read", () => {
    expect(() => coerceValue({ type: "bool", description: "" }, "maybe")).toThrow();
  });

  it("reads ints from numbers and numeric strings only", () => {
    const def = { type: "int", description: "" } as const;
    expect(coerceValue(def, 42)).toBe(42);
    expect(coerceValue(def, "42")).toBe(42);
    expect(() => coerceValue(def, "4.2")).toThrow();
    expect(() => coerceValue(def, 4.2)).toThrow();
    expect(() => coerceValue(def, "x")).toThrow();
  });

  it("splits comma strings and trims elements", () => {
    const def = { type: "comma-string-slice", description: "" } as const;
    expect(coerceValue(def, "a, b ,c")).toEqual(["a", "b", "c"]);
    expect(coerceValue(def, ["a ", " b"])).toEqual(["a", "b"]);
    expect(coerceValue(def, "")).toEqual([]);
  });

  it("keeps commas inside string-slice elements", () => {
    expect(coerceValue({ type: "string-slice", description: "" }, "a,b")).toEqual(["a,b"]);
  });

  it("reads durations", () => {
    const def = { type: "duration", description: "" } as const;
    expect(coerceValue(def, "72h")).toBe(259200);
    expect(coerceValue(def, "30d")).toBe(2592000);
    expect(coerceValue(def, 3600)).toBe(3600);
  });

  it("stringifies numbers and bools for strings, refuses objects", () => {
    const def = { type: "string", description: "" } as const;
    expect(coerceValue(def, 12)).toBe("12");
    expect(coerceValue(def, false)).toBe("false");
    expect(() => coerceValue(def, { a: 1 })).toThrow();
  });

  it("checks allowed values", () => {
    expect(() => coerceValue({ type: "string", description: "", allowed: ["a", "b"] }, "c")).toThrow('"a", "b"');
  });

  it("requires objects for maps and strings inside string maps", () => {
    expect(() => coerceValue({ type: "map", description: "" }, [1])).toThrow();
    expect(coerceValue({ type: "string-map", description: "" }, { a: 1 })).toEqual({ a: "1" });
  });
});

describe("parseFields", () => {
  const fields = defineFields({
    name: { type: "string", description: "", required: true },
    ttl: { type: "duration", description: "", default: 0 },
    tags: { type: "comma-string-slice", description: "" },
  });

  it("applies defaults, records what was sent and lists unknown keys sorted", () => {
    const p = parseFields(fields, { name: "x", zz: 1, aa: 2 });
    expect(p.values).toEqual({ name: "x", ttl: 0, tags: undefined });
    expect(p.has("name")).toBe(true);
    expect(p.has("ttl")).toBe(false);
    expect(p.unknown).toEqual(["aa", "zz"]);
    expect(unknownFieldsWarning(p.unknown)).toBe("Endpoint ignored these unrecognized parameters: [aa zz]");
  });

  it("lets path captures win over body keys", () => {
    const p = parseFields(fields, { name: "from-body" }, { name: "from-path" });
    expect(p.values.name).toBe("from-path");
  });

  it("answers 400 naming the field", () => {
    try {
      parseFields(fields, { name: "x", ttl: "forever" });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(ApiError);
      expect((e as ApiError).status).toBe(400);
      expect((e as ApiError).messages[0]).toContain('field "ttl"');
    }
    expect(() => parseFields(fields, {})).toThrow('field "name"');
  });
});
