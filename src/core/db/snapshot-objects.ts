/**
 * The object sections of a storage snapshot (format: ./snapshot-format.ts, version 2): every
 * object of an R2 bucket, written after the tables and restored with them. The caller names the
 * buckets (src/app/sys/snapshot-routes.ts passes the PKI's CERTS bucket of certificate bodies,
 * docs/architecture.md "Certificate bodies"); this layer names no engine and reads no engine's
 * table.
 *
 * The R2 calls go through ./snapshot-io.ts: batches of up to BATCH bodies, each batch one call
 * of the Worker's to a SnapshotIo Durable Object (or to the bucket directly when the deployment
 * has no SNAPSHOT_IO binding), so the Worker's subrequests grow with the batches, not the bodies.
 *
 * Saving: the bucket is listed with its cursor (LIST_LIMIT keys a call), each listed page cut
 * into lines of at most OBJECT_PAGE objects and OBJECT_PAGE_BYTES of bodies, each line read in
 * one call, the reads running ahead of the consumer (the next page listed while fewer than AHEAD
 * are in flight) and the lines yielded in key order: the Worker holds a few lines' bodies,
 * whatever the bucket's size. An object deleted between the listing and its read
 * (tidy) is left out. An object larger than MAX_OBJECT_BYTES fails the snapshot (a restore
 * stages each body as one D1 value, which holds at most 2 MB:
 * https://developers.cloudflare.com/d1/platform/limits/); certificate bodies are about 1 KB.
 *
 * Restoring, invariants:
 * - **Nothing is written to a bucket before the whole upload verified.** Bodies are staged in a
 *   D1 staging table (`lanyard_restore_<tag>__o_<section>`, dropped like the tables' staging
 *   ones, ./snapshot-restore.ts) while the MAC chain is computed; a refused restore never
 *   reaches a bucket.
 * - **Bodies go in before the rows.** Once verified, the staged bodies are read back (READ_BACK
 *   objects and OBJECT_PAGE_BYTES per D1 query) and put, a write call per OBJECT_PAGE of them,
 *   AHEAD calls in flight, and only then are the D1 tables swapped. A put that fails fails the
 *   restore before the swap (as does a swap that fails): D1 is as it was and the bucket has
 *   some of the snapshot's bodies. Those are harmless: a key is `<mount id>/<serial>`, serials
 *   are unique per mount, so a body put over an existing key is the same certificate's same
 *   bytes, and one without a row is never read (every read starts from a row) and is deleted
 *   with its mount. After the swap, every row of the snapshot has its body.
 * - **Objects the snapshot does not hold are left in the bucket**: bodies of certificates issued
 *   after the snapshot was taken, whose rows the restore removed. Never read, deleted with their
 *   mount; deleting them would mean listing the whole bucket against the snapshot's keys.
 */
import { ApiError } from "../errors";
import { base64ToBytesStrict, blobBytes } from "../encoding";
import { refused } from "./snapshot-format";
import { BATCH, type ListedPage, objectIo, type ObjectSection, type PutItem, type SnapshotItem } from "./snapshot-io";
import { quoteIdent } from "./snapshot-tables";

export type { ObjectSection, SnapshotItem } from "./snapshot-io";

/** Objects per line at most: one read or write call (about 680 KB of base64 for certificate bodies). */
export const OBJECT_PAGE = BATCH;
/** Bytes of bodies per line at most (a line is read whole: ./snapshot-lines.ts MAX_LINE_BYTES). */
export const OBJECT_PAGE_BYTES = 4 * 1024 * 1024;
/** One object at most: staged as one D1 value (2 MB a row), with room for its key. */
export const MAX_OBJECT_BYTES = 1024 * 1024;
/** R2 keys are at most 1024 bytes (https://developers.cloudflare.com/r2/reference/limits/). */
const MAX_KEY_BYTES = 1024;
/** Staged bodies read back per D1 query at most (with OBJECT_PAGE_BYTES): 4 write calls' worth. */
const READ_BACK = 4 * OBJECT_PAGE;
/** Read or write calls in flight at once, per snapshot or restore (each to another SnapshotIo object). */
export const AHEAD = 4;
/** D1 binds at most 100 parameters per statement (https://developers.cloudflare.com/d1/platform/limits/). */
const ROWS_PER_INSERT = 33;

/** A listed page cut into lines: OBJECT_PAGE objects, OBJECT_PAGE_BYTES of bodies at most. */
function linesOfListing(objects: ListedPage["objects"]): string[][] {
  const lines: string[][] = [];
  let line: string[] = [];
  let bytes = 0;
  for (const { key, size } of objects) {
    if (size > MAX_OBJECT_BYTES) throw new Error(`snapshot: object ${key.slice(0, 128)} is ${size} bytes, over the ${MAX_OBJECT_BYTES} a snapshot carries`);
    if (line.length > 0 && (line.length >= OBJECT_PAGE || bytes + size > OBJECT_PAGE_BYTES)) {
      lines.push(line);
      line = [];
      bytes = 0;
    }
    line.push(key);
    bytes += size;
  }
  if (line.length > 0) lines.push(line);
  return lines;
}

/**
 * The section's objects, a line's worth at a time, in key order. Reads run ahead of the
 * consumer: while fewer than AHEAD are in flight the next page is listed and its lines' reads
 * started (so at most AHEAD + a page's lines, about 5 lines of bodies, are held at once).
 */
export async function* objectPages(section: ObjectSection): AsyncGenerator<SnapshotItem[]> {
  const io = objectIo(section);
  const pending: Promise<(SnapshotItem | null)[]>[] = [];
  let cursor: string | null = null;
  let listed = false;
  for (;;) {
    while ((!listed || cursor !== null) && pending.length < AHEAD) {
      const page: ListedPage = await io.list(cursor);
      listed = true;
      cursor = page.cursor;
      for (const keys of linesOfListing(page.objects)) {
        const read = io.read(keys);
        read.catch(() => undefined); // awaited below, or dropped with the generator: never unhandled
        pending.push(read);
      }
    }
    const next = pending.shift();
    if (next === undefined) return;
    const present = (await next).filter((i): i is SnapshotItem => i !== null);
    if (present.length > 0) yield present;
  }
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

/**
 * Puts a verified section's staged bodies into its bucket: a page read from D1 per query
 * (READ_BACK objects, OBJECT_PAGE_BYTES of bodies, more only by the one object that crosses it),
 * cut into write calls of up to OBJECT_PAGE objects, AHEAD calls in flight while the next page
 * is read. A failed write is a 503 naming what the restore left.
 */
export async function putStaged(d1: D1Database, s: StagedObjects): Promise<void> {
  const io = objectIo(s.section);
  const stmt = d1.prepare(
    `SELECT r, k, v, t FROM (SELECT rowid AS r, k, v, t, length(v) AS n, sum(length(v)) OVER (ORDER BY rowid) AS run FROM ${quoteIdent(s.staging)} WHERE rowid > ?1 ORDER BY rowid LIMIT ?2) WHERE run - n < ?3 ORDER BY r`,
  );
  const inFlight = new Set<Promise<void>>();
  let failure: unknown = null;
  const send = (items: PutItem[]) => {
    const call: Promise<void> = io.write(items).then(
      () => void inFlight.delete(call),
      (e: unknown) => {
        failure ??= e;
        inFlight.delete(call);
      },
    );
    inFlight.add(call);
  };
  let after = 0;
  for (;;) {
    const rows = failure === null ? await stmt.bind(after, READ_BACK, OBJECT_PAGE_BYTES).raw<[number, string, unknown, string | null]>() : [];
    if (rows.length === 0) break;
    after = Number(rows[rows.length - 1]?.[0]);
    for (let i = 0; i < rows.length && failure === null; i += OBJECT_PAGE) {
      while (inFlight.size >= AHEAD) await Promise.race(inFlight);
      send(rows.slice(i, i + OBJECT_PAGE).map(([, key, body, type]): PutItem => [key, blobBytes(body) ?? new Uint8Array(0), type]));
    }
  }
  await Promise.all(inFlight);
  if (failure !== null) {
    const why = failure instanceof Error ? failure.message.slice(0, 200) : String(failure);
    throw new ApiError(503, `snapshot restore failed: writing the bodies of ${s.section.name} to its bucket (${why}); the database was not changed (the bucket may hold some of the snapshot's bodies, which no row reads); restore again`);
  }
}
