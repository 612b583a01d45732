/**
 * Plain domain logic of the KV-v2 engine: no storage, no HTTP. Version rules (check-and-set,
 * pruning, delete_version_after), JSON merge patch, subkeys, input validation and the response
 * shapes. Kept free of I/O so unit tests can hit it directly.
 */
import { badRequest } from "../../core/errors";
import { formatGoDuration } from "../../core/duration";
import { trimEndChar } from "../../core/text";

/** Upstream's default when neither the mount config nor the key sets max_versions. */
export const DEFAULT_MAX_VERSIONS = 10;

/** Upstream's limits on custom_metadata (keys, key bytes, value bytes). */
const CUSTOM_METADATA_MAX_KEYS = 64;
const CUSTOM_METADATA_MAX_KEY_BYTES = 128;
const CUSTOM_METADATA_MAX_VALUE_BYTES = 512;
/** Secret paths end up in index keys and URLs; a generous bound keeps rows reasonable. */
const MAX_SECRET_PATH_BYTES = 1024;

export interface KvSettings {
  maxVersions: number;
  casRequired: boolean;
  /** Seconds; 0 means never. */
  deleteVersionAfter: number;
}

export const DEFAULT_SETTINGS: KvSettings = { maxVersions: 0, casRequired: false, deleteVersionAfter: 0 };

export interface KeyMetadata extends KvSettings {
  path: string;
  currentVersion: number;
  oldestVersion: number;
  customMetadata: Record<string, string>;
  /** Epoch milliseconds. */
  createdTime: number;
  updatedTime: number;
}

export interface VersionInfo {
  version: number;
  createdTime: number;
  /** Epoch milliseconds; may lie in the future when set by delete_version_after. */
  deletionTime: number | null;
  destroyed: boolean;
}

export type JsonObject = Record<string, unknown>;

export function isJsonObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

const byteLength = (s: string): number => new TextEncoder().encode(s).length;

/**
 * Checks a secret path (relative to data/, metadata/, …). The dispatcher already refuses `.`/`..`
 * and empty segments in the URL; this repeats the checks because the path also arrives through
 * other code paths (and a bad path must never reach storage).
 */
export function validateSecretPath(path: string | undefined, field = "path"): string {
  const p = trimEndChar(path ?? "", "/");
  if (p === "") throw badRequest(`${field}: a secret path is required`);
  if (p.startsWith("/")) throw badRequest(`${field}: must not start with "/"`);
  for (const seg of p.split("/")) {
    if (seg === "") throw badRequest(`${field}: empty path segments are not allowed`);
    if (seg === "." || seg === "..") throw badRequest(`${field}: "." and ".." segments are not allowed`);
  }
  // Control characters would make logs and listings ambiguous.
  if (/[\u0000-\u001f\u007f]/.test(p)) throw badRequest(`${field}: control characters are not allowed`);
  if (byteLength(p) > MAX_SECRET_PATH_BYTES) throw badRequest(`${field}: longer than ${MAX_SECRET_PATH_BYTES} bytes`);
  return p;
}

/** Checks a folder prefix for LIST: like a secret path, but may be empty (the mount root). */
export function validateFolder(path: string | undefined): string {
  const p = trimEndChar(path ?? "", "/");
  return p === "" ? "" : `${validateSecretPath(p)}/`;
}

/** The effective max_versions of a key: the key's own, else the mount's, else 10. */
export function effectiveMaxVersions(config: KvSettings, meta: Pick<KvSettings, "maxVersions"> | null): number {
  if (meta && meta.maxVersions > 0) return meta.maxVersions;
  if (config.maxVersions > 0) return config.maxVersions;
  return DEFAULT_MAX_VERSIONS;
}

/** The deletion time a new version gets: creation plus the smaller non-zero delete_version_after. */
export function deletionTimeFor(created: number, config: KvSettings, meta: Pick<KvSettings, "deleteVersionAfter"> | null): number | null {
  const candidates = [config.deleteVersionAfter, meta?.deleteVersionAfter ?? 0].filter((d) => d > 0);
  if (candidates.length === 0) return null;
  return created + Math.min(...candidates) * 1000;
}

/**
 * The oldest version to keep after writing `newVersion` (upstream's AddVersion): once the key
 * holds max_versions versions, everything below newVersion - max + 1 goes.
 */
export function oldestAfterWrite(newVersion: number, oldestVersion: number, maxVersions: number): number {
  if (newVersion - oldestVersion >= maxVersions) return newVersion - maxVersions + 1;
  return oldestVersion;
}

/** Reads `options.cas` (weakly decoded like upstream); undefined when absent. */
export function parseCas(options: JsonObject | undefined): number | undefined {
  if (!options || !("cas" in options) || options.cas === null || options.cas === undefined) return undefined;
  const raw = options.cas;
  const n = typeof raw === "number" ? raw : typeof raw === "string" && /^\s*\d+\s*$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(n) || n < 0) throw badRequest("options.cas: error parsing check-and-set parameter");
  return n;
}

/** Upstream's check-and-set rule: a given cas must equal the current version; required if configured. */
export function checkCas(cas: number | undefined, currentVersion: number, casRequired: boolean): void {
  if (cas !== undefined) {
    if (cas !== currentVersion) throw badRequest(CAS_MISMATCH);
  } else if (casRequired) {
    throw badRequest("check-and-set parameter required for this call");
  }
}

export const CAS_MISMATCH = "check-and-set parameter did not match the current version";

/** Whether a version reads as deleted at `now` (soft-deleted, or past its delete_version_after). */
export function isDeleted(v: Pick<VersionInfo, "deletionTime">, now: number): boolean {
  return v.deletionTime !== null && v.deletionTime <= now;
}

/** Whether a version still has readable data at `now`. */
export function isLive(v: Pick<VersionInfo, "deletionTime" | "destroyed">, now: number): boolean {
  return !v.destroyed && !isDeleted(v, now);
}

const iso = (ms: number | null): string => (ms === null ? "" : new Date(ms).toISOString());

/** Upstream answers null rather than {} for a key without custom metadata. */
const customView = (c: Record<string, string>): Record<string, string> | null => (Object.keys(c).length > 0 ? c : null);

/** The per-version metadata returned by data writes and reads. */
export function versionView(v: VersionInfo, custom: Record<string, string>): JsonObject {
  return {
    created_time: iso(v.createdTime),
    custom_metadata: customView(custom),
    deletion_time: iso(v.deletionTime),
    destroyed: v.destroyed,
    version: v.version,
  };
}

/** The metadata/ read answer. */
export function metadataView(meta: KeyMetadata, versions: VersionInfo[]): JsonObject {
  const out: Record<string, JsonObject> = {};
  for (const v of versions) {
    out[String(v.version)] = { created_time: iso(v.createdTime), deletion_time: iso(v.deletionTime), destroyed: v.destroyed };
  }
  return {
    cas_required: meta.casRequired,
    created_time: iso(meta.createdTime),
    current_version: meta.currentVersion,
    custom_metadata: customView(meta.customMetadata),
    delete_version_after: formatGoDuration(meta.deleteVersionAfter),
    max_versions: meta.maxVersions,
    oldest_version: meta.oldestVersion,
    updated_time: iso(meta.updatedTime),
    versions: out,
  };
}

export function configView(c: KvSettings): JsonObject {
  return { cas_required: c.casRequired, delete_version_after: formatGoDuration(c.deleteVersionAfter), max_versions: c.maxVersions };
}

/**
 * Validates custom_metadata. With `allowNull` (metadata PATCH) a null value means "remove this
 * key", as a merge patch does. Messages name the key, never a value.
 */
export function validateCustomMetadata(raw: unknown, allowNull = false): Record<string, string | null> {
  if (!isJsonObject(raw)) throw badRequest("custom_metadata: expected a JSON object of strings");
  const out: Record<string, string | null> = {};
  const keys = Object.keys(raw);
  if (keys.length > CUSTOM_METADATA_MAX_KEYS) {
    throw badRequest(`custom_metadata: at most ${CUSTOM_METADATA_MAX_KEYS} keys are allowed, got ${keys.length}`);
  }
  for (const k of keys) {
    const v = raw[k];
    if (k === "") throw badRequest("custom_metadata: keys must not be empty");
    if (byteLength(k) > CUSTOM_METADATA_MAX_KEY_BYTES) {
      throw badRequest(`custom_metadata: key "${k.slice(0, 32)}…" is longer than ${CUSTOM_METADATA_MAX_KEY_BYTES} bytes`);
    }
    if (v === null && allowNull) {
      out[k] = null;
      continue;
    }
    if (typeof v !== "string") throw badRequest(`custom_metadata: the value of "${k}" must be a string`);
    if (byteLength(v) > CUSTOM_METADATA_MAX_VALUE_BYTES) {
      throw badRequest(`custom_metadata: the value of "${k}" is longer than ${CUSTOM_METADATA_MAX_VALUE_BYTES} bytes`);
    }
    out[k] = v;
  }
  return out;
}

/** Applies a custom_metadata patch: null removes a key, anything else sets it. */
export function patchCustomMetadata(current: Record<string, string>, patch: Record<string, string | null>): Record<string, string> {
  const out = { ...current };
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = v;
  }
  if (Object.keys(out).length > CUSTOM_METADATA_MAX_KEYS) {
    throw badRequest(`custom_metadata: at most ${CUSTOM_METADATA_MAX_KEYS} keys are allowed`);
  }
  return out;
}

/** RFC 7386 JSON merge patch: objects merge recursively, null removes, anything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isJsonObject(patch)) return patch;
  const out: JsonObject = isJsonObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/**
 * The key structure of a secret without its values: leaves (and arrays) become null. `depth` 0
 * means unlimited; depth 1 shows only the top-level keys.
 */
export function subkeys(data: JsonObject, depth = 0): JsonObject {
  const walk = (obj: JsonObject, level: number): JsonObject => {
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(obj)) {
      out[k] = isJsonObject(v) && (depth === 0 || level < depth) ? walk(v, level + 1) : null;
    }
    return out;
  };
  return walk(data, 1);
}

/** The immediate children of `prefix` among `paths`: leaves as "name", folders as "name/". */
export function listChildren(paths: string[], prefix: string): string[] {
  const keys = new Set<string>();
  for (const p of paths) {
    if (!p.startsWith(prefix)) continue;
    const rest = p.slice(prefix.length);
    const slash = rest.indexOf("/");
    keys.add(slash === -1 ? rest : rest.slice(0, slash + 1));
  }
  keys.delete("");
  return [...keys].sort();
}

/**
 * Most version numbers one delete/undelete/destroy may name. Storage splits the
 * list into statements of at most VERSIONS_PER_STATEMENT (D1 binds at most 100 parameters per
 * statement) inside one batch; this bound keeps that batch, and the request's work, finite.
 */
export const MAX_VERSIONS_PER_REQUEST = 1000;

/** Checks the `versions` list of delete/undelete/destroy. */
export function requireVersions(versions: number[] | undefined): number[] {
  if (!versions || versions.length === 0) throw badRequest("versions: no version number provided");
  if (versions.length > MAX_VERSIONS_PER_REQUEST) {
    throw badRequest(`versions: at most ${MAX_VERSIONS_PER_REQUEST} version numbers per request, got ${versions.length}`);
  }
  for (const v of versions) if (v < 1) throw badRequest(`versions: invalid version number ${v}`);
  return [...new Set(versions)].sort((a, b) => a - b);
}

/** Checks a settings value that must not be negative (max_versions). */
export function requireNonNegative(field: string, n: number): number {
  if (n < 0) throw badRequest(`${field}: must not be negative`);
  return n;
}
