/**
 * Request fields, declared once per endpoint as data (name → type, default, description) and
 * coerced the Vault way ("weak decoding", OpenBao sdk/framework/field_data.go). The declarations are plain
 * objects so that documentation (and one day an OpenAPI document) can be generated from them.
 */
import { parseDurationSeconds } from "./duration";
import { badRequest, fieldError } from "./errors";
import { utf8Length } from "./text";

export type FieldType =
  | "string"
  | "bool"
  | "int"
  | "duration"
  | "comma-string-slice"
  | "string-slice"
  | "int-slice"
  | "map"
  | "string-map"
  | "any";

export interface FieldDef {
  type: FieldType;
  description: string;
  default?: unknown;
  required?: boolean;
  /** Allowed values for a string field. */
  allowed?: readonly string[];
  /**
   * Longest UTF-8 length of a string field, or of each entry of a list field: a longer value is a
   * 400 naming the field (e.g. URLs: src/core/limits.ts MAX_URL_BYTES).
   */
  maxBytes?: number;
}

export type FieldSchema = Record<string, FieldDef>;

/** The TypeScript type a declared field coerces to. */
export type FieldValue<D extends FieldDef> = D["type"] extends "string"
  ? string
  : D["type"] extends "bool"
    ? boolean
    : D["type"] extends "int" | "duration"
      ? number
      : D["type"] extends "comma-string-slice" | "string-slice"
        ? string[]
        : D["type"] extends "int-slice"
          ? number[]
          : D["type"] extends "string-map"
            ? Record<string, string>
            : D["type"] extends "map"
              ? Record<string, unknown>
              : unknown;

/** Coerced values: a field has its value, its default, or is undefined when it has neither. */
export type FieldValues<F extends FieldSchema> = {
  [K in keyof F]: F[K] extends { default: unknown } | { required: true }
    ? FieldValue<F[K]>
    : FieldValue<F[K]> | undefined;
};

/** Declares an endpoint's fields, keeping the literal types for inference. */
export function defineFields<const F extends FieldSchema>(fields: F): F {
  return fields;
}

function coerceBool(v: unknown): boolean {
  if (typeof v === "boolean") return v;
  if (typeof v === "number") return v !== 0;
  if (typeof v === "string") {
    const s = v.trim().toLowerCase();
    if (["true", "t", "1"].includes(s)) return true;
    if (["false", "f", "0", ""].includes(s)) return false;
  }
  throw new Error(`cannot parse '${typeof v === "string" ? v : typeof v}' as bool`);
}

function coerceInt(v: unknown): number {
  // Beyond 2^53 a JS number no longer holds the integer the client wrote (99999999999999999999
  // would become 1e20), so such values are refused rather than silently changed; upstream's
  // int64 conversion refuses out-of-range values too.
  if (typeof v === "number" && Number.isSafeInteger(v)) return v;
  if (typeof v === "string" && /^\s*-?\d+\s*$/.test(v) && Number.isSafeInteger(Number(v.trim()))) return Number(v.trim());
  if (typeof v === "boolean") return v ? 1 : 0;
  throw new Error(`cannot parse '${typeof v === "string" || typeof v === "number" ? String(v) : typeof v}' as int`);
}

function coerceString(v: unknown): string {
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  throw new Error(`expected a string, got ${Array.isArray(v) ? "array" : typeof v}`);
}

function coerceStringSlice(v: unknown, splitCommas: boolean): string[] {
  if (Array.isArray(v)) return v.map((x) => coerceString(x).trim()).filter((x) => x !== "" || !splitCommas);
  if (typeof v === "string") {
    if (v.trim() === "") return [];
    return splitCommas ? v.split(",").map((x) => x.trim()).filter((x) => x !== "") : [v];
  }
  if (typeof v === "number" || typeof v === "boolean") return [String(v)];
  throw new Error(`expected a list of strings, got ${typeof v}`);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Converts one raw value to a field's declared type; throws a plain Error describing why not. */
export function coerceValue(def: FieldDef, v: unknown): unknown {
  switch (def.type) {
    case "string": {
      const s = coerceString(v);
      if (def.allowed && !def.allowed.includes(s)) {
        throw new Error(`must be one of ${def.allowed.map((a) => `"${a}"`).join(", ")}`);
      }
      return s;
    }
    case "bool":
      return coerceBool(v);
    case "int":
      return coerceInt(v);
    case "duration":
      return parseDurationSeconds(v);
    case "comma-string-slice":
      return coerceStringSlice(v, true);
    case "string-slice":
      return coerceStringSlice(v, false);
    case "int-slice": {
      if (Array.isArray(v)) return v.map(coerceInt);
      if (typeof v === "string") return v.split(",").filter((x) => x.trim() !== "").map(coerceInt);
      return [coerceInt(v)];
    }
    case "map":
      if (isPlainObject(v)) return v;
      throw new Error("expected a JSON object");
    case "string-map": {
      if (!isPlainObject(v)) throw new Error("expected a JSON object of strings");
      const out: Record<string, string> = {};
      for (const [k, x] of Object.entries(v)) out[k] = coerceString(x);
      return out;
    }
    case "any":
      return v;
  }
}

const longerThan = (s: string, max: number): boolean => s.length > max || utf8Length(s) > max;

/** A coerced value against its field's `maxBytes`: a string, or each string of a list. */
function checkMaxBytes(name: string, max: number, v: unknown): void {
  if (typeof v === "string" && longerThan(v, max)) throw badRequest(`${name}: longer than ${max} bytes`);
  if (Array.isArray(v) && v.some((x) => typeof x === "string" && longerThan(x, max))) throw badRequest(`${name}: entry longer than ${max} bytes`);
}

export interface ParsedFields<F extends FieldSchema> {
  values: FieldValues<F>;
  /** Whether the client sent this field (an update leaves absent fields alone). */
  has(name: keyof F & string): boolean;
  /** Names the client sent that the endpoint does not declare, sorted. */
  unknown: string[];
  /** Body keys whose value the path's capture of the same name replaced, sorted. */
  replaced: string[];
}

/**
 * Coerces raw request data against a schema. `captures` (path parameters) win over body keys of
 * the same name, as upstream does. Nulls count as "not sent" so that clients may send defaults
 * explicitly.
 */
export function parseFields<F extends FieldSchema>(
  schema: F,
  raw: Record<string, unknown>,
  captures: Record<string, string> = {},
  /** Required fields are enforced on writes only; reads and deletes take what the query gives. */
  enforceRequired = true,
): ParsedFields<F> {
  const values: Record<string, unknown> = {};
  const present = new Set<string>();
  for (const [name, def] of Object.entries(schema)) {
    const fromPath = captures[name];
    const v = fromPath !== undefined ? fromPath : raw[name];
    if (v === undefined || v === null) {
      if (def.required && enforceRequired) throw fieldError(name, "missing required field");
      values[name] = def.default;
      continue;
    }
    try {
      values[name] = coerceValue(def, v);
    } catch (e) {
      throw fieldError(name, e instanceof Error ? e.message : String(e));
    }
    if (def.maxBytes !== undefined) checkMaxBytes(name, def.maxBytes, values[name]);
    present.add(name);
  }
  const unknown = Object.keys(raw)
    .filter((k) => !(k in schema) && !(k in captures))
    .sort();
  // Upstream counts a body key as replaced whenever it is non-null, even if equal to the path's.
  // Only declared fields count: a route that takes arbitrary data (a secret's own keys) may hold
  // a key that merely shares the capture's name.
  const replaced = Object.keys(captures)
    .filter((k) => k in schema && raw[k] !== undefined && raw[k] !== null)
    .sort();
  return { values: values as FieldValues<F>, has: (n) => present.has(n), unknown, replaced };
}

/** The warning upstream gives for body keys an endpoint does not know (docs/http-conventions.md). */
export function unknownFieldsWarning(names: string[]): string {
  return `Endpoint ignored these unrecognized parameters: [${names.join(" ")}]`;
}

/**
 * The warning upstream gives when a body key collides with a path capture (OpenBao sdk/framework/field_data.go:
 * "the path wins and a warning says so"); the text is the SDK framework's.
 */
export function replacedFieldsWarning(names: string[]): string {
  return `Endpoint replaced the value of these parameters with the values captured from the endpoint's path: [${names.join(" ")}]`;
}
