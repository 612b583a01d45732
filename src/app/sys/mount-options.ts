/**
 * The mount settings of Vault's API that Lanyard does not act on, for sys/mounts and sys/auth
 * enable and tune (Vault's API docs, /sys/mounts and /sys/auth): each one is either accepted
 * silently at the value Vault's Go client (the CLI, Terraform's provider) always sends, answered
 * with a warning naming it when another value asks for something Lanyard does not do, or refused
 * with a 400 naming it when going on without it would be wrong. docs/security.md "Fields Lanyard
 * does not act on" lists them.
 *
 * Vault's Go client sends, on every enable, `local`, `seal_wrap`, `external_entropy_access` (false)
 * and `config` with `default_lease_ttl`, `max_lease_ttl` ("") and `force_no_cache` (false); on
 * every tune `default_lease_ttl`, `max_lease_ttl`, `force_no_cache` and `options` (null). Unknown
 * keys of an enable's `config` map are named in a warning, as the dispatcher names unknown
 * top-level fields.
 */
import { badRequest } from "../../core/errors";
import { coerceValue, defineFields, type FieldDef } from "../../core/fields";
import { MOUNT_ENGINES } from "../engines";

/** What a setting is checked against: the mount's kind and engine (or method) type. */
export interface MountTarget {
  kind: "secret" | "auth";
  type: string;
}

/**
 * The headers of Vault's ACME guide (`secrets tune -passthrough-request-headers=If-Modified-Since
 * -allowed-response-headers=Last-Modified,Location,Replay-Nonce,Link`) and the conditional-request
 * headers: Lanyard's routes read and send these themselves (docs/pki-acme.md), so listing them
 * changes nothing and deserves no warning. Any other header is not passed through.
 */
const HANDLED_REQUEST_HEADERS = new Set(["if-modified-since", "if-none-match"]);
const HANDLED_RESPONSE_HEADERS = new Set(["last-modified", "location", "replay-nonce", "link", "retry-after", "etag", "cache-control"]);

const any = (description: string): FieldDef => ({ type: "any", description });

/**
 * The mount-config keys a tune body may carry beyond the TTLs and the description (declared so
 * the dispatcher does not call them unrecognized; checked by checkMountConfig).
 */
export const tuneSettingFields = defineFields({
  force_no_cache: any("Accepted at false; true is answered with a warning (no per-mount cache bypass)."),
  audit_non_hmac_request_keys: any("Accepted empty; no key is exempted from audit hashing, so keys warn."),
  audit_non_hmac_response_keys: any("Accepted empty; no key is exempted from audit hashing, so keys warn."),
  listing_visibility: any('"" or "hidden"; "unauth" warns (mounts are never listed without a token).'),
  passthrough_request_headers: any("Vault's ACME guide's headers are accepted silently; others warn."),
  allowed_response_headers: any("Vault's ACME guide's headers are accepted silently; others warn."),
  options: any("Engine options: kv takes version \"2\"; other keys warn."),
  token_type: any("Auth mounts: default-service or service (batch tokens are not supported); refused on secrets mounts."),
  plugin_name: any("Refused unless empty or the mount's own type (engines are built in)."),
  plugin_version: any("Refused unless empty (engines are built in)."),
  user_lockout_config: any("Refused (no user lockout)."),
  allowed_managed_keys: any("Refused (no managed keys)."),
  delegated_auth_accessors: any("Refused (no delegated auth)."),
  identity_token_key: any("Refused (no plugin identity tokens)."),
});

/** The enable flags Vault's Go client always sends (false) and the plugin selectors. */
export const enableFlagFields = defineFields({
  local: { type: "bool", description: "Accepted at false; true warns (one cluster, no replication).", default: false },
  seal_wrap: { type: "bool", description: "Accepted at false; true warns (no seal wrapping).", default: false },
  external_entropy_access: { type: "bool", description: "Accepted at false; true warns (no external entropy).", default: false },
  plugin_name: { type: "string", description: "Refused unless empty or the type itself (engines are built in).", default: "" },
  plugin_version: { type: "string", description: "Refused unless empty (engines are built in).", default: "" },
});

type Flags = { local: boolean; seal_wrap: boolean; external_entropy_access: boolean; plugin_name: string; plugin_version: string };

/** Top-level enable flags: warnings for what is asked and not done, 400 for plugins. */
export function checkEnableFlags(f: Flags, type: string, warnings: string[]): void {
  if (f.local) warnings.push("local: Lanyard runs one cluster without replication; the mount reads back local=false and behaves like any other");
  if (f.seal_wrap) warnings.push("seal_wrap: seal wrapping is not offered; the mount's data is stored as every mount's is (docs/security.md)");
  if (f.external_entropy_access) warnings.push("external_entropy_access: there is no external entropy source; keys come from the runtime's crypto.getRandomValues");
  checkPlugin("plugin_name", f.plugin_name, type);
  checkPlugin("plugin_version", f.plugin_version, "");
}

/** A plugin selector: empty, or (for plugin_name, Vault's deprecated alias of `type`) the type itself. */
function checkPlugin(field: string, value: string, sameAs: string): void {
  const v = value.trim();
  if (v === "" || v === sameAs) return;
  throw badRequest(`${field}: plugins are not supported; Lanyard's engines and auth methods are built in`);
}

function coerce(field: string, def: FieldDef, v: unknown): unknown {
  try {
    return coerceValue(def, v);
  } catch (e) {
    throw badRequest(`${field}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

const list = (field: string, v: unknown): string[] => coerce(field, { type: "comma-string-slice", description: "" }, v) as string[];
const text = (field: string, v: unknown): string => (coerce(field, { type: "string", description: "" }, v) as string).trim();

/** "", [], {} and false ask for nothing (Vault's Go client sends zero values). */
function isEmptyValue(v: unknown): boolean {
  if (v === "" || v === false) return true;
  if (Array.isArray(v)) return v.length === 0;
  if (typeof v === "object" && v !== null) return Object.keys(v).length === 0;
  return false;
}

/** Headers outside `handled`, as given (for the warning). */
function unhandledHeaders(field: string, v: unknown, handled: Set<string>): string[] {
  return list(field, v).filter((h) => !handled.has(h.toLowerCase()));
}

/**
 * Checks one mount-config key; returns a warning or null, throws a 400 naming it. `field` is the
 * name the client sees (`config.x` inside an enable's config map).
 */
function checkSetting(key: string, field: string, v: unknown, target: MountTarget): string | null {
  switch (key) {
    case "force_no_cache":
      return coerce(field, { type: "bool", description: "" }, v) === true ? `${field}: there is no per-mount cache bypass; the mount's reads use the same short-lived caches as every other` : null;
    case "audit_non_hmac_request_keys":
    case "audit_non_hmac_response_keys":
      return list(field, v).length > 0 ? `${field}: audit devices hash values by the same rules on every mount; no key is exempted` : null;
    case "listing_visibility": {
      const s = text(field, v);
      if (s === "" || s === "hidden") return null;
      if (s === "unauth") return `${field}: mounts are never listed to callers without a token; the mount stays hidden from them`;
      throw badRequest(`${field}: must be "hidden", "unauth" or empty, got "${s.slice(0, 32)}"`);
    }
    case "passthrough_request_headers": {
      const extra = unhandledHeaders(field, v, HANDLED_REQUEST_HEADERS);
      return extra.length > 0 ? `${field}: request headers are not passed through to engines; ignored: ${extra.join(", ")}` : null;
    }
    case "allowed_response_headers": {
      const extra = unhandledHeaders(field, v, HANDLED_RESPONSE_HEADERS);
      return extra.length > 0 ? `${field}: engines set their own response headers; ignored: ${extra.join(", ")}` : null;
    }
    case "token_type":
      return checkTokenType(field, text(field, v), target);
    case "plugin_name":
      checkPlugin(field, text(field, v), target.type);
      return null;
    case "plugin_version":
      checkPlugin(field, text(field, v), "");
      return null;
    case "user_lockout_config":
    case "allowed_managed_keys":
    case "delegated_auth_accessors":
    case "identity_token_key":
      if (!isEmptyValue(v)) throw badRequest(`${field}: not supported by Lanyard`);
      return null;
    default:
      return `${field}: not a setting Lanyard knows; ignored`;
  }
}

/** Lanyard issues service tokens only (docs/security.md); secrets mounts issue none. */
function checkTokenType(field: string, t: string, target: MountTarget): null {
  if (target.kind === "secret") {
    if (t === "") return null;
    throw badRequest(`${field}: only auth mounts have a token type`);
  }
  if (["", "default-service", "service"].includes(t)) return null;
  throw badRequest(`${field}: Lanyard issues service tokens only (default-service, service)`);
}

/**
 * Checks mount-config keys (an enable's `config` map with prefix "config.", or a tune body's
 * settings with prefix ""), skipping those the route acts on itself (`handled`). Pushes a warning
 * for each key that changes nothing; throws a 400 naming a key that cannot be honoured.
 */
export function checkMountConfig(raw: Record<string, unknown>, target: MountTarget, prefix: string, handled: readonly string[], warnings: string[]): void {
  for (const [key, v] of Object.entries(raw)) {
    if (v === undefined || v === null || handled.includes(key)) continue;
    if (key === "options") {
      checkEngineOptions(`${prefix}options`, coerce(`${prefix}options`, { type: "map", description: "" }, v) as Record<string, unknown>, target, warnings);
      continue;
    }
    const warning = checkSetting(key, `${prefix}${key}`, v, target);
    if (warning) warnings.push(warning);
  }
}

/** The tune body's settings (the declared keys the client sent), for checkMountConfig. */
export function tuneSettings(body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(tuneSettingFields)) if (key in body) out[key] = body[key];
  return out;
}

/**
 * Engine options: the keys a secrets engine acts on are its own to check (its `checkOption`, in
 * the engine registry: kv takes `version`, only "2"); every other key of any engine or auth
 * method is named in a warning.
 */
export function checkEngineOptions(field: string, options: Record<string, unknown>, target: MountTarget, warnings: string[]): void {
  const checkOption = target.kind === "secret" ? MOUNT_ENGINES[target.type]?.engine.mounts?.checkOption : undefined;
  for (const [k, v] of Object.entries(options)) {
    if (v === undefined || v === null) continue;
    if (checkOption?.(k, v, `${field}.${k}`)) continue;
    warnings.push(`${field}.${k}: not an option of the ${target.type} ${target.kind === "auth" ? "auth method" : "engine"}; ignored`);
  }
}
