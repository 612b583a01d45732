/**
 * The object sections of a storage snapshot (format: ./snapshot-format.ts, version 2): every
 * object of an R2 bucket, written after the tables and restored with them. The caller names the
 * buckets (src/app/sys/snapshot-routes.ts passes the PKI's CERTS bucket of certificate bodies,
 * docs/architecture.md "Certificate bodies"); this layer names no engine and reads no engine's
 * table.
 *
 * Saving: the bucket is listed with its cursor (LIST_LIMIT keys a call), each listed page cut
 * into lines of at most OBJECT_PAGE objects and OBJECT_PAGE_BYTES of bodies, the bodies of a
 * line read GET_CONCURRENCY at a time: the Worker holds one line's bodies, whatever the bucket's
 * size. An object deleted between the listing and its read (tidy) is left out. An object larger
 * than MAX_OBJECT_BYTES fails the snapshot (a restore stages each body as one D1 value, which
 * holds at most 2 MB: https://developers.cloudflare.com/d1/platform/limits/); certificate bodies
 * are about 1 KB.
 *
 * Restoring, invariants:
 * - **Nothing is written to a bucket before the whole upload verified.** Bodies are staged in a
 *   D1 staging table (`lanyard_restore_<tag>__o_<section>`, dropped like the tables' staging
 *   ones, ./snapshot-restore.ts) while the MAC chain is computed; a refused restore never
 *   reaches a bucket.
 * - **Bodies go in before the rows.** Once verified, the staged bodies are put (PUT_CONCURRENCY
 *   at a time) and only then are the D1 tables swapped. A put that fails fails the restore before
 *   the swap (as does a swap that fails): D1 is as it was and the bucket has some of the
 *   snapshot's bodies. Those are
 *   harmless: a key is `<mount id>/<serial>`, serials are unique per mount, so a body put over an
 *   existing key is the same certificate's same bytes, and one without a row is never read (every
 *   read starts from a row) and is deleted with its mount. After the swap, every row of the
 *   snapshot has its body.
 * - **Objects the snapshot does not hold are left in the bucket**: bodies of certificates issued
 *   after the snapshot was taken, whose rows the restore removed. Never read, deleted with their
 *   mount; deleting them would mean listing the whole bucket against the snapshot's keys.
 */
import { ApiError } from "../errors";
import { base64ToBytesStrict, bytesToBase64 } from "../encoding";
import { refused } from "./snapshot-format";
import { quoteIdent } from "./snapshot-tables";

/** A bucket whose objects a snapshot carries, under the section name the snapshot gives it. */
export interface ObjectSection {
  name: string;
  bucket: R2Bucket;
}

/** Keys per list call (R2 returns at most 1000: https://developers.cloudflare.com/r2/api/workers/workers-api-reference/#r2listoptions). */
export const LIST_LIMIT = 1000;
/** Objects per line at most (about 270 KB of base64 for certificate bodies). */
export const OBJECT_PAGE = 200;
/** Bytes of bodies per line at most (a line is read whole: ./snapshot-lines.ts MAX_LINE_BYTES). */
export const OBJECT_PAGE_BYTES = 4 * 1024 * 1024;
/** One object at most: staged as one D1 value (2 MB a row), with room for its key. */
export const MAX_OBJECT_BYTES = 1024 * 1024;
/** R2 keys are at most 1024 bytes (https://developers.cloudflare.com/r2/reference/limits/). */
const MAX_KEY_BYTES = 1024;
/** Reads and writes of bodies in flight at once, per restore or snapshot. */
export const GET_CONCURRENCY = 16;
export const PUT_CONCURRENCY = 16;
/** Staged bodies read back per D1 query before they are put. */
const PUT_PAGE = 100;
/** D1 binds at most 100 parameters per statement (https://developers.cloudflare.com/d1/platform/limits/). */
const ROWS_PER_INSERT = 33;

/** One object as it travels: key, base64 body, content type. */
export type SnapshotItem = [string, string, string | null];

/** `fn` over `items`, at most `limit` at once, results in order; after a failure no new call starts. */
async function pooled<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  const worker = async () => {
    for (let i = next++; i < items.length && !failed; i = next++) {
      try {
        out[i] = await fn(items[i] as T);
      } catch (e) {
        failed = true;
        throw e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** A listed page cut into lines: OBJECT_PAGE objects, OBJECT_PAGE_BYTES of bodies at most. */
function linesOfListing(objects: readonly R2Object[]): R2Object[][] {
  const lines: R2Object[][] = [];
  let line: R2Object[] = [];
  let bytes = 0;
  for (const o of objects) {
    if (o.size > MAX_OBJECT_BYTES) throw new Error(`snapshot: object ${o.key.slice(0, 128)} is ${o.size} bytes, over the ${MAX_OBJECT_BYTES} a snapshot carries`);
    if (line.length > 0 && (line.length >= OBJECT_PAGE || bytes + o.size > OBJECT_PAGE_BYTES)) {
      lines.push(line);
      line = [];
      bytes = 0;
    }
    line.push(o);
    bytes += o.size;
  }
  if (line.length > 0) lines.push(line);
  return lines;
}

/** The bucket's objects, a line's worth at a time, in key order. */
export async function* objectPages(bucket: R2Bucket): AsyncGenerator<SnapshotItem[]> {
  let cursor: string | undefined;
  do {
    const listed = await bucket.list({ limit: LIST_LIMIT, ...(cursor === undefined ? {} : { cursor }) });
    for (const line of linesOfListing(listed.objects)) {
      const items = await pooled(line, GET_CONCURRENCY, async (o): Promise<SnapshotItem | null> => {
        const body = await bucket.get(o.key);
        return body ? [o.key, bytesToBase64(new Uint8Array(await body.arrayBuffer())), body.httpMetadata?.contentType ?? null] : null;
      });
      const present = items.filter((i): i is SnapshotItem => i !== null);
      if (present.length > 0) yield present;
    }
    cursor = listed.truncated ? listed.cursor : undefined;
  } while (cursor !== undefined);
}

/** A section being restored: its bucket and the D1 table its bodies are staged in. */
export interface StagedObjects {
  section: ObjectSection;
  staging: string;
}

/** The staging table of a section named in the upload (`tag` is the restore's staging prefix). */
export async function startObjects(d1: D1Database, sections: ReadonlyMap<string, ObjectSection>, staged: ReadonlyMap<string, StagedObjects>, name: unknown, tag: string): Promise<StagedObjects> {
  const section = typeof name === "string" ? sections.get(name) : undefined;
  if (typeof name !== "string" || !section) throw refused(`the snapshot has an object section this deployment does not (${String(name).slice(0, 64)})`);
  if (staged.has(name)) throw refused(`the snapshot is corrupt (object section ${name} twice)`);
  const staging = quoteIdent(`${tag}_o_${name}`).slice(1, -1);
  await d1.prepare(`CREATE TABLE ${quoteIdent(staging)} (k TEXT, v BLOB, t TEXT)`).run();
  return { section, staging };
}

/** One object of an items line, checked (a malformed one is corruption). */
function itemOf(v: unknown): [string, Uint8Array<ArrayBuffer>, string | null] {
  if (!Array.isArray(v) || v.length !== 3) throw refused("the snapshot is corrupt (an object is not [key, body, content type])");
  const [key, body, type] = v as unknown[];
  if (typeof key !== "string" || key === "" || new TextEncoder().encode(key).byteLength > MAX_KEY_BYTES) throw refused("the snapshot is corrupt (an object key)");
  if (typeof body !== "string" || (type !== null && typeof type !== "string")) throw refused(`the snapshot is corrupt (object ${key.slice(0, 128)})`);
  try {
    return [key, base64ToBytesStrict(body), type];
  } catch {
    throw refused(`the snapshot is corrupt (the body of object ${key.slice(0, 128)} is not base64)`);
  }
}

/** One items line into its section's staging table (one D1 batch); returns how many objects. */
export async function stageObjects(d1: D1Database, s: StagedObjects, items: unknown[]): Promise<number> {
  const values = items.map(itemOf);
  const stmts: D1PreparedStatement[] = [];
  for (let i = 0; i < values.length; i += ROWS_PER_INSERT) {
    const slice = values.slice(i, i + ROWS_PER_INSERT);
    stmts.push(d1.prepare(`INSERT INTO ${quoteIdent(s.staging)} (k, v, t) VALUES ${slice.map(() => "(?, ?, ?)").join(", ")}`).bind(...slice.flat()));
  }
  if (stmts.length > 0) await d1.batch(stmts);
  return values.length;
}

/** A BLOB as D1 returns it (ArrayBuffer, or an array of bytes), as bytes. */
function blobBytes(v: unknown): Uint8Array {
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  if (Array.isArray(v)) return Uint8Array.from(v as number[]);
  return new Uint8Array(0);
}

/**
 * Puts a verified section's staged bodies into its bucket, PUT_PAGE read from D1 at a time,
 * PUT_CONCURRENCY puts in flight. A failed put is a 503 naming what the restore left.
 */
export async function putStaged(d1: D1Database, s: StagedObjects): Promise<void> {
  const stmt = d1.prepare(`SELECT rowid, k, v, t FROM ${quoteIdent(s.staging)} WHERE rowid > ?1 ORDER BY rowid LIMIT ?2`);
  let after = 0;
  for (;;) {
    const rows = await stmt.bind(after, PUT_PAGE).raw<[number, string, unknown, string | null]>();
    if (rows.length === 0) return;
    after = Number(rows[rows.length - 1]?.[0]);
    try {
      await pooled(rows, PUT_CONCURRENCY, ([, key, body, type]) => s.section.bucket.put(key, blobBytes(body), type === null ? {} : { httpMetadata: { contentType: type } }));
    } catch (e) {
      const why = e instanceof Error ? e.message.slice(0, 200) : String(e);
      throw new ApiError(503, `snapshot restore failed: writing the bodies of ${s.section.name} to its bucket (${why}); the database was not changed (the bucket may hold some of the snapshot's bodies, which no row reads); restore again`);
    }
    if (rows.length < PUT_PAGE) return;
  }
}
