/**
 * Takes a storage snapshot (format: ./snapshot-format.ts) as a gzip'd ReadableStream that reads
 * one page of rows from D1 per pull, so the Worker never holds more than a page whatever the
 * database's size; the client's reading paces the D1 reads.
 *
 * A page is up to PAGE_ROWS rows, fewer for tables with wide rows (at most about PAGE_CHARS of
 * values per page, from the widest row measured when the snapshot starts), read in rowid order
 * up to the largest rowid seen at the start. What that means under concurrent writes
 * (docs/operations.md "Snapshots"): each page is read as it stands when it is read; rows inserted
 * after the snapshot started are left out (the rowid bound, which also guarantees the snapshot
 * ends); a row changed or deleted during the snapshot is taken as its page found it. It is not a
 * point-in-time copy across tables: for that, D1 Time Travel.
 *
 * After the tables, the objects of each bucket the caller passes (./snapshot-objects.ts), listed
 * when the tables are done: a certificate whose row was read is in the bucket by then (issuance
 * answers only once its row and its body are both stored), and a body stored after the listing
 * passed its key is left out, like a row inserted after its table's bound.
 */
import type { SealKeys } from "./seal";
import { type ObjectSection, objectPages } from "./snapshot-objects";
import { encodeValue, keyCheck, MacChain, macKeyOf, SNAPSHOT_FORMAT, SNAPSHOT_VERSION, type SnapshotHeader, type SnapshotTrailer, utf8 } from "./snapshot-format";
import { deploymentId, quoteIdent, snapshotTables, type TableInfo } from "./snapshot-tables";

/** Rows per page at most (~500: a handful of D1 round trips per thousand rows). */
export const PAGE_ROWS = 500;
/** Characters of values per page at most (D1 answers at most 50 MB per query; a row holds at most 2 MB). */
export const PAGE_CHARS = 4 * 1024 * 1024;

interface TablePlan extends TableInfo {
  /** The largest rowid when the snapshot started: rows above it were inserted after. */
  top: number;
  pageRows: number;
}

const lineOf = (v: unknown): Uint8Array<ArrayBuffer> => utf8(`${JSON.stringify(v)}\n`);

/** The tables to copy, each with its rowid bound and page size (one D1 batch). */
async function plan(d1: D1Database, tables: TableInfo[]): Promise<TablePlan[]> {
  if (tables.length === 0) return [];
  const stats = await d1.batch<{ top: number | null; widest: number | null }>(
    tables.map((t) => {
      const width = t.columns.map((c) => `ifnull(length(${quoteIdent(c)}), 0)`).join(" + ") || "0";
      return d1.prepare(`SELECT max(rowid) AS top, max(${width}) AS widest FROM ${quoteIdent(t.name)}`);
    }),
  );
  return tables.map((t, i) => {
    const s = stats[i]?.results[0];
    const widest = Math.max(1, s?.widest ?? 1);
    return { ...t, top: s?.top ?? 0, pageRows: Math.max(1, Math.min(PAGE_ROWS, Math.floor(PAGE_CHARS / widest))) };
  });
}

/** One table's pages, each an array of rows (values encoded), in rowid order. */
async function* pagesOf(d1: D1Database, t: TablePlan): AsyncGenerator<unknown[][]> {
  const cols = t.columns.map(quoteIdent).join(", ");
  const stmt = d1.prepare(`SELECT rowid, ${cols} FROM ${quoteIdent(t.name)} WHERE rowid > ?1 AND rowid <= ?2 ORDER BY rowid LIMIT ?3`);
  let after = Number.MIN_SAFE_INTEGER;
  for (;;) {
    const rows = await stmt.bind(after, t.top, t.pageRows).raw<unknown[]>();
    if (rows.length === 0) return;
    after = Number(rows[rows.length - 1]?.[0]);
    yield rows.map((r) => r.slice(1).map(encodeValue));
    if (rows.length < t.pageRows) return;
  }
}

/** Every line of the snapshot, the MAC chained over all but the trailer. */
async function* linesOf(d1: D1Database, keys: SealKeys, header: Omit<SnapshotHeader, "key_id" | "key_check">, plans: TablePlan[], sections: readonly ObjectSection[]): AsyncGenerator<Uint8Array<ArrayBuffer>> {
  const { id, key } = await macKeyOf(keys.current);
  const chain = new MacChain(key);
  const emit = async (v: unknown) => {
    const line = lineOf(v);
    await chain.add(line.subarray(0, line.length - 1));
    return line;
  };
  yield await emit({ ...header, key_id: id, key_check: await keyCheck(key) });
  let rows = 0;
  for (const t of plans) {
    yield await emit({ table: t.name, columns: t.columns });
    for await (const page of pagesOf(d1, t)) {
      rows += page.length;
      yield await emit({ rows: page });
    }
  }
  let objects = 0;
  for (const s of sections) {
    yield await emit({ objects: s.name });
    for await (const items of objectPages(s)) {
      objects += items.length;
      yield await emit({ items });
    }
  }
  const trailer: SnapshotTrailer = { end: true, tables: plans.length, rows, objects, mac: await chain.hex() };
  yield lineOf(trailer);
}

/**
 * The snapshot as a gzip stream. The tables, schema version and identity are read before it is
 * returned, so a database that cannot be snapshotted fails the request instead of the stream.
 * `sections`: the buckets whose objects it carries, after the tables.
 */
export async function snapshotStream(d1: D1Database, keys: SealKeys, sections: readonly ObjectSection[] = [], now = Date.now()): Promise<ReadableStream<Uint8Array>> {
  const [{ schema, tables }, deployment] = await Promise.all([snapshotTables(d1), deploymentId(d1)]);
  const plans = await plan(d1, tables);
  const lines = linesOf(d1, keys, { format: SNAPSHOT_FORMAT, version: SNAPSHOT_VERSION, schema, deployment, created_at: now }, plans, sections);
  const plain = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await lines.next();
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
    async cancel() {
      await lines.return(undefined);
    },
  }, { highWaterMark: 0 });
  return plain.pipeThrough(new CompressionStream("gzip"));
}
