/**
 * A SecretID's `metadata`, parsed the way Vault's strutil.ParseArbitraryKeyValues does (approle
 * path_role.go handleRoleSecretIDCommon): Vault declares the field a string holding a JSON object
 * of strings (what hvac 0.11 sends: `json.dumps(metadata)`), optionally base64-encoded, or
 * `k1=v1,k2=v2`. Lanyard also takes a JSON object sent as such (strings, numbers and booleans,
 * kept as strings). The result becomes the login token's `meta`, beside `role_name`.
 * Pure: no storage, no request.
 */
import { badRequest } from "../../../core/errors";
import { base64ToBytesStrict } from "../../../core/encoding";

function fail(detail: string): never {
  throw badRequest(`failed to parse metadata: ${detail}`);
}

function fromObject(obj: Record<string, unknown>, scalarsOnly: boolean): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(obj)) {
    if (typeof v === "string") out[k] = v;
    else if (!scalarsOnly && (typeof v === "number" || typeof v === "boolean")) out[k] = String(v);
    else fail(`the value of "${k}" must be a string`);
  }
  return out;
}

/** `k1=v1,k2=v2` (strutil.ParseKeyValues): every pair has exactly one "=", key and value non-empty. */
function fromPairs(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of text.split(",")) {
    const parts = pair.split("=");
    if (parts.length !== 2) fail("expected a JSON object of strings or key=value pairs separated by commas");
    const key = (parts[0] ?? "").trim();
    const value = (parts[1] ?? "").trim();
    if (key === "" || value === "") fail(`invalid key=value pair "${key}=${value}"`);
    out[key] = value;
  }
  return out;
}

/** Go's base64.StdEncoding.DecodeString accepting the input, as UTF-8 text; null otherwise. */
function base64Text(text: string): string | null {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text) || text.length % 4 !== 0) return null;
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(base64ToBytesStrict(text));
  } catch {
    return null;
  }
}

function fromText(input: string): Record<string, string> {
  let text = input.trim();
  if (text === "") return {};
  text = base64Text(text) ?? text;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return fromPairs(text);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return fromPairs(text);
  return fromObject(parsed as Record<string, unknown>, true);
}

/** The metadata of a SecretID write: absent → {}, a string or an object → a map of strings. */
export function parseSecretIdMetadata(raw: unknown): Record<string, string> {
  let out: Record<string, string>;
  if (raw === undefined || raw === null) out = {};
  else if (typeof raw === "string") out = fromText(raw);
  else if (typeof raw === "object" && !Array.isArray(raw)) out = fromObject(raw as Record<string, unknown>, false);
  else fail("expected a JSON object, or a string holding one");
  // Vault: a key with an empty value is refused.
  for (const [k, v] of Object.entries(out)) if (k !== "" && v === "") fail(`invalid value for key "${k}"`);
  return out;
}
