/**
 * HMAC of audit entries, as Vault's audit devices do (OpenBao internal/audit/hashstructure.go):
 * `hmac-sha256:` + lower-case hex of HMAC-SHA256(key = the device's salt as UTF-8 bytes,
 * message = the value), so each device hashes the same value differently and an operator finds a
 * known value with sys/audit-hash/:path.
 *
 * What is hashed (unless the device has `log_raw`): `client_token` everywhere, accessors when
 * `hmac_accessor` (the default), every string leaf of `request.data` and `response.data` (nested
 * maps and arrays too) except strings that parse as RFC3339 timestamps (Vault's exception), and
 * the secret part of request paths that carry one (below). Numbers are HMAC'd by their JSON
 * text: Vault decodes bodies with Go's `json.Number`, a string type that its hashstructure walk
 * hashes, so a KV value `{"pin": 471336}` never reaches a sink in the clear. A number's text here
 * is JavaScript's (`JSON.stringify`: `1e21`, `0.5`), the body having been parsed already.
 * Booleans and null stay; so do `path` otherwise, `metadata`, `display_name`, `policies`,
 * `remote_address` and `error`, as in Vault. Request data went through JSON on the way in and
 * handlers reply with plain values, so plain objects, arrays and primitives are what is met here.
 */
import { BoundedCache } from "../core/bounded-cache";
import { hmacKey, hmacSha256Hex, type HmacKey } from "./hmac-sha256";
import type { AuditAuth, AuditDevice, AuditEntry } from "./types";

const PREFIX = "hmac-sha256:";
const utf8 = new TextEncoder();

// Absorbed keys by salt, per isolate (./hmac-sha256.ts: synchronous, so an entry is hashed
// without a promise per value). A key is a pure function of its salt, so it never goes stale;
// bounded because devices come and go.
const keys = new BoundedCache<HmacKey>("audit.hmacKeys", 64);

function keyOf(salt: string): HmacKey {
  let k = keys.get(salt);
  if (!k) {
    k = hmacKey(utf8.encode(salt));
    keys.set(salt, k);
  }
  return k;
}

/**
 * HMACs of credentials (tokens, accessors) already computed, by salt and value: the same token
 * comes back in every entry of its requests (auth and request, request and response entries),
 * so at steady load these cost a map lookup instead of an HMAC per request. Per isolate, in memory
 * only (where the token itself already is: src/auth/token-store.ts caches it), bounded.
 */
const credentialMacs = new BoundedCache<string>("audit.credentialMacs", 2048);

function credentialMac(salt: string, value: string): string {
  const key = `${salt}\u0000${value}`;
  const hit = credentialMacs.get(key);
  if (hit !== undefined) return hit;
  const mac = hmacValue(salt, value);
  credentialMacs.set(key, mac);
  return mac;
}

/**
 * Hashed parts of an entry already computed for a device, by the part's object: the trail
 * builds a request's `request` and `auth` parts once and puts the same objects in its request
 * and response entries, so the response entry reuses what the request entry hashed.
 */
const hashedParts = new WeakMap<object, Map<string, unknown>>();

function once<T>(part: object, device: string, make: () => T): T {
  let m = hashedParts.get(part);
  if (!m) hashedParts.set(part, (m = new Map()));
  if (m.has(device)) return m.get(device) as T;
  const v = make();
  m.set(device, v);
  return v;
}

/** `hmac-sha256:<hex>` of one string with a device's salt (also sys/audit-hash). */
export function hmacValue(salt: string, value: string): string {
  return macWith(keyOf(salt), value);
}

const macWith = (key: HmacKey, value: string): string => PREFIX + hmacSha256Hex(key, utf8.encode(value));

// Go's time.Parse(time.RFC3339, s) accepts these (fractional seconds optional, Z or an offset).
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** Whether a string is left in the clear as Vault leaves timestamps (hashstructure.go). */
export function isTimestamp(s: string): boolean {
  return RFC3339.test(s) && !Number.isNaN(Date.parse(s));
}

/**
 * Every string and number leaf of a JSON value replaced by its HMAC, except timestamps. A value
 * is hashed as its JSON text reads (a number JSON cannot write is null, `toJSON` is honoured):
 * response data comes straight from the handler's reply, not back from the serialized answer.
 * Each distinct text is HMAC'd once per call (an issue's `issuing_ca` is its `ca_chain`'s first
 * item).
 */
export function hashData(salt: string, value: unknown): unknown {
  return hashLeaves(value, keyOf(salt), new Map());
}

function hashLeaves(value: unknown, key: HmacKey, macs: Map<string, string>): unknown {
  if (typeof value === "string") return isTimestamp(value) ? value : macOnce(value, key, macs);
  if (typeof value === "number") return Number.isFinite(value) ? macOnce(JSON.stringify(value), key, macs) : null;
  if (Array.isArray(value)) return value.map((v) => hashLeaves(v, key, macs));
  if (value !== null && typeof value === "object") {
    if (typeof (value as { toJSON?: unknown }).toJSON === "function") return hashLeaves((value as { toJSON(): unknown }).toJSON(), key, macs);
    // fromEntries, not assignment: a body's own "__proto__" key stays a key.
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, hashLeaves(v, key, macs)]));
  }
  return value;
}

function macOnce(text: string, key: HmacKey, macs: Map<string, string>): string {
  let mac = macs.get(text);
  if (mac === undefined) {
    mac = macWith(key, text);
    macs.set(text, mac);
  }
  return mac;
}

/**
 * Vault's path-parameter forms of the token endpoints carry a token or accessor in the path
 * (`auth/token/lookup/<token>`, `…/revoke-accessor/<accessor>`). Lanyard serves only the body
 * forms, so such a request is a 404, but its entry must not show the value: the part after the
 * endpoint is HMAC'd. The caller's own token, wherever it appears in a path, is HMAC'd too.
 */
const TOKEN_IN_PATH = /^(auth\/token\/(?:lookup|lookup-self|revoke|revoke-self|revoke-orphan|renew|renew-self|lookup-accessor|revoke-accessor|renew-accessor)\/)(.+)$/;

/** The secrets a request path carries (see above), each to be replaced by its HMAC. */
function secretsInPath(path: string, clientToken: string | undefined): string[] {
  const out: string[] = [];
  if (clientToken && clientToken.length >= 8 && path.includes(clientToken)) out.push(clientToken);
  const m = TOKEN_IN_PATH.exec(path);
  if (m?.[2] && m[2] !== clientToken) out.push(m[2]);
  return out;
}

/** `text` with every one of `secrets` replaced by its HMAC (longest first, so none is left half-replaced). */
function replaceSecrets(salt: string, text: string, secrets: string[]): string {
  let out = text;
  for (const s of [...secrets].sort((a, b) => b.length - a.length)) if (out.includes(s)) out = out.split(s).join(hmacValue(salt, s));
  return out;
}

/**
 * Response data HMAC'd as request data is, except a raw answer's `http_status_code`: a status the
 * server set (Vault's `logical.HTTPStatusCode`, a Go int its walk leaves alone), not caller data.
 */
function hashResponseData(salt: string, data: Record<string, unknown>): Record<string, unknown> {
  const out = hashData(salt, data) as Record<string, unknown>;
  if ("http_raw_body" in data && typeof data.http_status_code === "number") out.http_status_code = data.http_status_code;
  return out;
}

function hashAuth(salt: string, auth: AuditAuth, hmacAccessor: boolean): AuditAuth {
  const out: AuditAuth = { ...auth };
  if (auth.client_token) out.client_token = credentialMac(salt, auth.client_token);
  if (auth.accessor && hmacAccessor) out.accessor = credentialMac(salt, auth.accessor);
  return out;
}

/**
 * The entry as a device writes it. `log_raw` devices get it unchanged, except that the caller's
 * token never appears in a path in the clear even then (a path is not a field Vault hashes, and
 * a token there is always a client mistake).
 */
export function hashEntry(device: Pick<AuditDevice, "salt" | "logRaw" | "hmacAccessor">, entry: AuditEntry): AuditEntry {
  const { salt, hmacAccessor } = device;
  // The memo of hashed parts is per device settings (the salt names the device).
  const who = `${salt}\u0000${device.logRaw ? 1 : 0}${hmacAccessor ? 1 : 0}`;
  const rawToken = entry.auth?.client_token ?? entry.request.client_token;
  // A secret in the path is hidden wherever the path is echoed: the path and the error text.
  const inPath = secretsInPath(entry.request.path, rawToken);
  const path = inPath.length > 0 ? replaceSecrets(salt, entry.request.path, inPath) : entry.request.path;
  const error = entry.error !== undefined && inPath.length > 0 ? replaceSecrets(salt, entry.error, inPath) : entry.error;
  const original = entry.request;
  // One object per request and device settings, raw or hashed, so that its request and response
  // entries share it (enqueue.ts serializes it once).
  const request = once(original, `${who}\u0000${path}`, () => {
    const r = { ...original, path };
    if (device.logRaw) return r;
    if (r.client_token) r.client_token = credentialMac(salt, r.client_token);
    if (r.client_token_accessor && hmacAccessor) r.client_token_accessor = credentialMac(salt, r.client_token_accessor);
    if (r.data) r.data = hashData(salt, r.data) as Record<string, unknown>;
    return r;
  });
  const out: AuditEntry = { ...entry, request };
  if (error !== undefined) out.error = error;
  if (device.logRaw) return out;
  const auth = entry.auth;
  if (auth) out.auth = once(auth, who, () => hashAuth(salt, auth, hmacAccessor));
  if (entry.response) {
    const response = { ...entry.response };
    if (response.auth) response.auth = hashAuth(salt, response.auth, hmacAccessor);
    if (response.data) response.data = hashResponseData(salt, response.data);
    out.response = response;
  }
  return out;
}
