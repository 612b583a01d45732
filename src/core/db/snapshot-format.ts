/**
 * The storage snapshot's format (docs/operations.md "Snapshots"): what `GET sys/storage/raft/snapshot`
 * writes and `POST sys/storage/raft/snapshot` reads. Vault's snapshot is its Raft store as a gzip
 * tar (https://developer.hashicorp.com/vault/api-docs/system/storage/raft); Lanyard's is its D1
 * database and the objects of the R2 buckets the service keeps beside it (the certificate bodies
 * of the CERTS bucket, docs/architecture.md "Certificate bodies") as gzip'd lines of JSON, one
 * line at a time in memory on either side. Version 2:
 *
 *   header   {"format":"lanyard-snapshot","version":2,"schema":…,"deployment":…,"key_id":…,"key_check":…,"created_at":…}
 *   table    {"table":"<name>","columns":["<column>",…]}        once per table, then its pages:
 *   page     {"rows":[[value,…],…]}                              up to a page of rows
 *   objects  {"objects":"<section>"}                             after the tables, once per bucket, then its pages:
 *   items    {"items":[["<key>","<base64 body>","<content type>"|null],…]}   up to a page of objects
 *   trailer  {"end":true,"tables":N,"rows":M,"objects":K,"mac":"<hex>"}
 *
 * A section is named by the caller (src/app/sys/snapshot-routes.ts: "CERTS"); this layer knows
 * only that it is an R2 bucket (./snapshot-objects.ts). Version 1, written before certificate
 * bodies moved to R2, is version 2 without object sections and without the trailer's `objects`;
 * it is still read, and restoring it leaves the buckets as they are.
 *
 * Values are as D1 stores them: null, numbers, text, and BLOBs tagged `{"b":"<base64>"}` so their
 * bytes come back exactly. Sealed columns are copied sealed: nothing here opens a value.
 *
 * Integrity: every line before the trailer is chained into an HMAC-SHA-256,
 * mac_i = HMAC(k, mac_{i-1} ‖ line_i), whose last value the trailer carries. k is derived from the
 * seal key by HKDF-SHA-256 (RFC 5869), so only a deployment holding that seal key (as SEAL_KEY or
 * in SEAL_KEYS_PREVIOUS) can check, or forge, a snapshot. The header names the key by its id (as
 * sealed values do, src/core/db/seal.ts) and carries `key_check`, an HMAC of a fixed text: a
 * snapshot whose key is not configured here is told apart ("foreign") from one whose bytes
 * changed ("corrupt": the chain does not verify) or stop early ("truncated": no trailer). Object
 * lines are chained like rows, so a changed body or a dropped page is refused the same way; the
 * version is in the header, which is chained too, so a version-2 snapshot cannot be passed off as
 * a version-1 one without its bodies.
 */
import { base64ToBytes, base64ToBytesStrict, blobBytes, bytesToBase64, bytesToHex, concatBytes, timingSafeEqual } from "../encoding";
import { badRequest } from "../errors";
import { currentKeyId, type SealKeys } from "./seal";

export const SNAPSHOT_FORMAT = "lanyard-snapshot";
/** The version written. */
export const SNAPSHOT_VERSION = 2;
/** The versions read: 1 (no object sections) and 2. */
const READABLE_VERSIONS: readonly unknown[] = [1, 2];

export interface SnapshotHeader {
  format: typeof SNAPSHOT_FORMAT;
  version: number;
  /** The newest migration applied to the database it was taken from (d1_migrations). */
  schema: string;
  /** The source deployment's identity (src/core/db/snapshot-tables.ts). */
  deployment: string;
  key_id: string;
  key_check: string;
  created_at: number;
}

export interface SnapshotTrailer {
  end: true;
  tables: number;
  rows: number;
  /** Version 2: the objects of every section. */
  objects?: number;
  mac: string;
}

/** A stored value as it travels: BLOBs tagged, everything else as D1 returns it. */
export type SnapshotValue = null | number | string | { b: string };

const encoder = new TextEncoder();
/** UTF-8 bytes (TextEncoder's result always owns a plain ArrayBuffer). */
export const utf8 = (text: string): Uint8Array<ArrayBuffer> => encoder.encode(text) as Uint8Array<ArrayBuffer>;
const HKDF_SALT = utf8("lanyard storage snapshot");
const HKDF_INFO = utf8("snapshot-mac v1");
const CHAIN_START = utf8("lanyard-snapshot:v1");
const KEY_CHECK_TEXT = utf8("lanyard-snapshot key check");

export const refused = (what: string) => badRequest(`snapshot refused: ${what}; nothing was changed`);

/** The HMAC key of one seal key (HKDF-SHA-256 of the key's 32 raw bytes) and the key's id. */
export async function macKeyOf(sealKeyText: string): Promise<{ id: string; key: CryptoKey }> {
  const raw = base64ToBytes(sealKeyText.trim());
  const ikm = await crypto.subtle.importKey("raw", raw, "HKDF", false, ["deriveKey"]);
  const key = await crypto.subtle.deriveKey(
    { name: "HKDF", hash: "SHA-256", salt: HKDF_SALT, info: HKDF_INFO },
    ikm,
    { name: "HMAC", hash: "SHA-256", length: 256 },
    false,
    ["sign"],
  );
  return { id: await currentKeyId({ current: sealKeyText }), key };
}

/** Every configured seal key: SEAL_KEY first, then SEAL_KEYS_PREVIOUS. */
export function configuredKeyTexts(keys: SealKeys): string[] {
  return [keys.current, ...(keys.previous ?? "").split(",")].map((k) => k.trim()).filter((k) => k !== "");
}

async function hmac(key: CryptoKey, data: Uint8Array<ArrayBuffer>): Promise<Uint8Array<ArrayBuffer>> {
  return new Uint8Array(await crypto.subtle.sign("HMAC", key, data));
}

export async function keyCheck(key: CryptoKey): Promise<string> {
  return bytesToHex(await hmac(key, KEY_CHECK_TEXT));
}

/** The running MAC over the lines before the trailer. */
export class MacChain {
  private value: Uint8Array<ArrayBuffer> | null = null;
  constructor(private readonly key: CryptoKey) {}

  async add(line: Uint8Array<ArrayBuffer>): Promise<void> {
    this.value ??= await hmac(this.key, CHAIN_START);
    this.value = await hmac(this.key, concatBytes([this.value, line]));
  }

  async hex(): Promise<string> {
    this.value ??= await hmac(this.key, CHAIN_START);
    return bytesToHex(this.value);
  }

  async matches(mac: string): Promise<boolean> {
    return timingSafeEqual(await this.hex(), mac.toLowerCase());
  }
}

/** A value read from D1 as it is written to the snapshot (BLOBs arrive as ArrayBuffer or an array of bytes). */
export function encodeValue(v: unknown): SnapshotValue {
  if (v === null || v === undefined) return null;
  if (typeof v === "number" || typeof v === "string") return v;
  if (typeof v === "bigint") return Number(v);
  const bytes = blobBytes(v);
  if (bytes) return { b: bytesToBase64(bytes) };
  throw new Error(`snapshot: a stored value of type ${typeof v} has no encoding`);
}

/** A snapshot value as it is bound into D1 (a BLOB as bytes); a malformed one is corruption. */
export function decodeValue(v: unknown): null | number | string | Uint8Array<ArrayBuffer> {
  if (v === null || typeof v === "number" || typeof v === "string") return v;
  if (typeof v === "object" && !Array.isArray(v) && typeof (v as { b?: unknown }).b === "string" && Object.keys(v).length === 1) {
    try {
      return base64ToBytesStrict((v as { b: string }).b);
    } catch {
      throw refused("the snapshot is corrupt (a BLOB value is not base64)");
    }
  }
  throw refused("the snapshot is corrupt (a value of an unknown kind)");
}

/** The header line, checked for its shape (400 when it is not a Lanyard snapshot header). */
export function parseHeader(line: unknown): SnapshotHeader {
  const h = line as Partial<SnapshotHeader> | null;
  if (typeof h !== "object" || h === null || h.format !== SNAPSHOT_FORMAT) throw refused("the body is not a Lanyard storage snapshot (no snapshot header)");
  if (!READABLE_VERSIONS.includes(h.version)) throw refused(`snapshot format version ${String(h.version)} is not supported (this deployment reads versions ${READABLE_VERSIONS.join(" and ")})`);
  for (const k of ["schema", "deployment", "key_id", "key_check"] as const) {
    if (typeof h[k] !== "string") throw refused(`the snapshot header is corrupt (${k})`);
  }
  return h as SnapshotHeader;
}

/** The configured key that made the snapshot, or a 400 saying the snapshot is foreign. */
export async function keyForHeader(keys: SealKeys, header: SnapshotHeader): Promise<CryptoKey> {
  for (const text of configuredKeyTexts(keys)) {
    const { id, key } = await macKeyOf(text);
    if (id !== header.key_id) continue;
    if (timingSafeEqual(await keyCheck(key), header.key_check.toLowerCase())) return key;
  }
  throw refused(`the snapshot was taken with a seal key this deployment does not have (key id ${header.key_id.slice(0, 16)}; neither SEAL_KEY nor SEAL_KEYS_PREVIOUS); restore it where that key is configured`);
}
