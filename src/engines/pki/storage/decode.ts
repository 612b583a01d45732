/**
 * Stored PKI objects read back through one decoder each, so a row written before a field existed
 * reads as if written with that field's default (../defaults.ts) rather than with the field
 * missing. A decoder starts from the defaults and overlays the stored values it knows, each
 * checked against its default's type; keys no longer known are dropped. A stored value of the
 * wrong type is corruption, not an old shape: it fails loudly (a 500) instead of being replaced
 * by a default that could widen what a role allows.
 */
import type { IssuerAia, pkiIssuers } from "../../../core/db/schema/pki";
import {
  ALL_USAGES,
  CONFIG_DEFAULTS,
  ISSUER_AIA_DEFAULTS,
  ISSUER_DEFAULTS,
  ROLE_DEFAULTS,
  type ConfigShapes,
  type PolicyInfo,
  type Role,
} from "../defaults";
import { validateKeySpec } from "../x509/keytypes";

type IssuerRow = typeof pkiIssuers.$inferSelect;
type Check = (v: unknown) => boolean;

/** A stored row that does not have the shape its table promises. */
export class StoredShapeError extends Error {}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const isStringList = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === "string");
const isPolicyInfo = (v: unknown): v is PolicyInfo =>
  isObject(v) && typeof v.oid === "string" && (v.notice === undefined || typeof v.notice === "string") && (v.cps === undefined || typeof v.cps === "string");

/** The check a stored value must pass: the JS type of the field's default. */
function sameTypeAs(def: unknown): Check {
  if (typeof def === "boolean") return (v) => typeof v === "boolean";
  if (typeof def === "number") return (v) => typeof v === "number" && Number.isFinite(v);
  if (typeof def === "string") return (v) => typeof v === "string";
  if (Array.isArray(def)) return isStringList;
  // Every default of a decoded shape is one of the above; anything else is a programming error.
  throw new Error(`no stored-value check for a default of type ${typeof def}`);
}

/**
 * Defaults overlaid with the stored values of the same keys: absent keys keep their default,
 * unknown keys are dropped, a wrong type throws. `checks` replaces the type-of-default check for
 * fields whose default does not show their type (an empty list of objects).
 */
function overlay<T extends object>(what: string, defaults: Readonly<T>, stored: unknown, checks: Partial<Record<keyof T, Check>> = {}): T {
  if (!isObject(stored)) throw new StoredShapeError(`${what}: the stored value is not a JSON object`);
  const out = structuredClone(defaults) as T;
  for (const key of Object.keys(defaults) as (keyof T & string)[]) {
    const v = stored[key];
    if (v === undefined) continue; // written before the field existed
    if (!(checks[key] ?? sameTypeAs(defaults[key]))(v)) throw new StoredShapeError(`${what}: the stored field ${key} has the wrong type`);
    out[key] = v as T[keyof T & string];
  }
  return out;
}

const roleChecks: Partial<Record<keyof Role, Check>> = {
  policy_identifiers: (v) => Array.isArray(v) && v.every((x) => typeof x === "string" || isPolicyInfo(x)),
};

/** A pki_roles.data value as a Role, fields added after it was written at their defaults. */
export function decodeRole(json: unknown): Role {
  const role = overlay("stored role", ROLE_DEFAULTS, json, roleChecks);
  const stored = json as Record<string, unknown>;
  if (stored.key_bits === undefined || stored.signature_bits === undefined) {
    // ROLE_DEFAULTS holds the sizes resolved for rsa; a role of another key type lacking them
    // gets what buildRole resolves for its own type (ec: its curve size and no hash size).
    try {
      const spec = validateKeySpec(role.key_type, stored.key_bits === undefined ? 0 : role.key_bits, stored.signature_bits === undefined ? 0 : role.signature_bits);
      role.key_bits = spec.keyBits;
      role.signature_bits = spec.signatureBits;
    } catch {
      throw new StoredShapeError(`stored role: key_type ${role.key_type} with the stored key sizes is not valid`);
    }
  }
  return role;
}

/**
 * A pki_issuers row with its defaulted columns filled and its JSON columns checked. The columns
 * without a default (identity, certificate, key link, times) are NOT NULL in the schema and pass
 * as they are. A null in a defaulted NOT NULL column is what a column added later with
 * `ALTER TABLE … ADD` leaves in old rows, so it reads as the default.
 */
export function decodeIssuer(row: IssuerRow): IssuerRow {
  const what = `stored issuer ${row.id}`;
  const text = (v: unknown, def: string, field: string): string => {
    if (v === null || v === undefined) return def;
    if (typeof v !== "string") throw new StoredShapeError(`${what}: the stored field ${field} has the wrong type`);
    return v;
  };
  const list = (v: unknown, def: readonly string[], field: string): string[] => {
    if (v === null || v === undefined) return [...def];
    if (!isStringList(v)) throw new StoredShapeError(`${what}: the stored field ${field} has the wrong type`);
    return v;
  };
  const manualChain: unknown = row.manualChain;
  const aia: unknown = row.aia;
  const revoked: unknown = row.revoked;
  return {
    ...row,
    // The computed chain always starts with the issuer itself (ca/issuers.ts buildChain).
    caChain: list(row.caChain, [row.id], "caChain"),
    manualChain: manualChain === null || manualChain === undefined ? ISSUER_DEFAULTS.manualChain : list(manualChain, [], "manualChain"),
    leafNotAfterBehavior: text(row.leafNotAfterBehavior, ISSUER_DEFAULTS.leafNotAfterBehavior, "leafNotAfterBehavior"),
    usage: list(row.usage, ALL_USAGES, "usage"),
    revocationSignatureAlgorithm: text(row.revocationSignatureAlgorithm, ISSUER_DEFAULTS.revocationSignatureAlgorithm, "revocationSignatureAlgorithm"),
    aia: aia === null || aia === undefined ? ISSUER_DEFAULTS.aia : overlay<IssuerAia>(`${what} aia`, ISSUER_AIA_DEFAULTS, aia),
    revoked: revoked === null || revoked === undefined ? ISSUER_DEFAULTS.revoked : Boolean(revoked),
  };
}

/**
 * A pki_config value (or none) over its entry's defaults. Configuration keeps keys beyond its
 * declared shape (config/crl stores the cluster flags next to CrlConfig), so this overlays
 * without dropping, as every reader of configuration always has.
 */
export function decodeConfig<K extends keyof ConfigShapes>(name: K, stored: unknown): ConfigShapes[K] {
  const base = structuredClone(CONFIG_DEFAULTS[name]);
  return isObject(stored) ? { ...base, ...(stored as Partial<ConfigShapes[K]>) } : base;
}

/** All configuration entries of a mount from its pki_config rows; names not known are ignored. */
export function decodeAllConfig(rows: readonly { name: string; value: unknown }[]): ConfigShapes {
  const out: ConfigShapes = structuredClone(CONFIG_DEFAULTS);
  for (const r of rows) {
    if (r.name in out && isObject(r.value)) Object.assign(out[r.name as keyof ConfigShapes], r.value);
  }
  return out;
}
