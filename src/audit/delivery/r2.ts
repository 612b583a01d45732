/**
 * The `r2` audit sink (docs/audit.md): each delivered batch of a device becomes one
 * NDJSON object in the bucket bound as AUDIT_BUCKET, named as Cloudflare Logpush names the
 * objects it writes to R2 (`{DATE}/{start}_{end}_{random}.log.gz`):
 *
 *   <prefix><YYYYMMDD>/<start>_<end>_<id>.log[.gz]
 *
 * - `prefix`: the device option (default "audit/", from the core's store);
 * - `YYYYMMDD`: the UTC date of the batch's first entry; `start` / `end`: the UTC times of its
 *   first and last entries as `YYYYMMDDTHHMMSSZ` (Logpush's form), so a day's objects list in
 *   time order under one folder;
 * - `id`: 16 hex digits of SHA-256 over the batch's entry ids. Where Logpush writes a random
 *   string, this is a content name: a batch re-sent after a failed attempt overwrites its own
 *   object instead of adding a copy (the entries keep their stable `id`s for any other duplicate);
 * - `.gz` and `Content-Encoding: gzip` when the device option `compress` is true.
 *
 * The object's Content-Type is application/x-ndjson; its custom metadata names the device path
 * and the entry count. A failed put throws AuditDeliveryError (the consumer retries).
 */
import { bytesToHex } from "../../core/encoding";
import type { AuditDeliveryTarget } from "../types";
import { NDJSON_CONTENT_TYPE, encodeBody } from "./ndjson";
import { AuditDeliveryError } from "./errors";

export const DEFAULT_R2_PREFIX = "audit/";

/** What an object's name is made of: each entry's id and time (ms since the epoch). */
export interface KeyedEntry {
  id: string;
  time: number;
}

/** `YYYYMMDDTHHMMSSZ` (UTC) of a time; an unreadable time reads as `fallback`. */
function compactTime(ms: number | undefined, fallback: Date): string {
  const d = ms === undefined || !Number.isFinite(ms) ? fallback : new Date(ms);
  return d.toISOString().replace(/[-:]/g, "").replace(/\.\d{3}Z$/, "Z");
}

/** The object key of a batch (exported for the tests and docs/audit.md's example). */
export async function objectKey(prefix: string, entries: readonly KeyedEntry[], compress: boolean, now = new Date()): Promise<string> {
  const start = compactTime(entries[0]?.time, now);
  const end = compactTime(entries[entries.length - 1]?.time, now);
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(entries.map((e) => e.id).join("\n")));
  const id = bytesToHex(new Uint8Array(digest)).slice(0, 16);
  return `${prefix}${start.slice(0, 8)}/${start}_${end}_${id}.log${compress ? ".gz" : ""}`;
}

/** Writes the batch (its entries' NDJSON text) as one object; resolves with its key. */
export async function putNdjson(bucket: R2Bucket | undefined, target: AuditDeliveryTarget, entries: readonly KeyedEntry[], ndjson: string): Promise<string> {
  if (!bucket) throw new AuditDeliveryError("the AUDIT_BUCKET binding is missing");
  const compress = target.compress === true;
  const key = await objectKey(target.prefix ?? DEFAULT_R2_PREFIX, entries, compress);
  const body = await encodeBody(ndjson, compress);
  try {
    await bucket.put(key, body, {
      httpMetadata: { contentType: NDJSON_CONTENT_TYPE, ...(compress ? { contentEncoding: "gzip" } : {}) },
      customMetadata: { device: target.path, entries: String(entries.length) },
    });
  } catch (e) {
    throw new AuditDeliveryError(`R2 put failed: ${e instanceof Error ? e.message : "unknown error"}`);
  }
  return key;
}
