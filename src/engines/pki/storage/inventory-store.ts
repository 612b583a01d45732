/**
 * The certificate inventory's reads of pki_certs (docs/pki-inventory.md: API, query plans, the
 * bench): filtered keyset pages, counts per state, the expiry histogram, and the backfill of the
 * inventory columns of rows stored before them.
 *
 * Every query is written as SQL text so that docs/pki-inventory.md can show the very statements
 * and their `EXPLAIN QUERY PLAN`. Pages are keyset pages, never OFFSET: `(not_after, id) >
 * (?, ?)` (or `serial > ?`) walks an index from the previous page's last row, so page n costs
 * what page 1 costs. The indexes are migration 0019's (src/core/db/schema/pki.ts): they end at
 * not_after and SQLite appends the row's id to every index entry, so ties in not_after are
 * ordered by id (storage order) without a sort. Mount and issuer are pki_ids numbers and serials
 * octets (./cert-keys.ts); rows come back with ids and colon hex.
 *
 * Revocation state is the column `revoked_at`, kept by the trigger pki_certs_inv_revoked_mark on
 * every insert into pki_revoked (the one way a certificate becomes revoked), so no listing joins
 * pki_revoked.
 */
import type { Db } from "../../../core/db/client";
import { ID_OF, NO_OF, serialOctets, serialText, type BlobValue } from "./cert-keys";

export type CertState = "valid" | "expired" | "revoked";

export interface InventoryFilter {
  /** Case-insensitive (ASCII) substring of the common name. */
  commonName?: string;
  /** Case-insensitive (ASCII) substring of any SAN value. */
  san?: string;
  issuerId?: string;
  role?: string;
  state?: CertState;
  /** not_after < expiresBefore (Unix seconds). */
  expiresBefore?: number;
  /** not_after > expiresAfter (Unix seconds). */
  expiresAfter?: number;
}

export interface PageQuery {
  filter: InventoryFilter;
  /**
   * With a substring filter (commonName, san): how many entries of the index it walks, in the
   * page's order, the page may read at most (the scan window, edgeFilter; docs/pki-inventory.md
   * "Substring search"). Absent: the page reads until it has `limit` rows.
   */
  window?: number;
  sort: "not_after" | "serial";
  order: "asc" | "desc";
  /** The previous page's last row (its not_after and id read back from the row; 0 when sorting by serial). */
  after: Position | null;
  limit: number;
  /** Unix seconds: the boundary between valid and expired. */
  now: number;
}

/** A row's place in the orders of a page. */
export interface Position {
  serial: string;
  notAfter: number;
  id: number;
}

export interface InventoryRow {
  serial: string;
  common_name: string | null;
  sans: string | null;
  issuer_id: string;
  role: string | null;
  not_before: number | null;
  not_after: number;
  revoked_at: number | null;
  /** Only for a row whose inventory columns are not filled yet (not_before IS NULL). */
  der: string | null;
}

type Bind = string | number | Uint8Array;

/** `%…%` for LIKE with `\` as the escape character: the caller's `%`, `_` and `\` match themselves. */
const likePattern = (s: string): string => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/**
 * Rows a substring-filtered page reads at most, per sort (docs/pki-inventory.md "Substring
 * search"), chosen from measurement at a million certificates so that a full window stays well
 * under 50 ms of server time (docs/pki-inventory.md "Bench"): about 10 ms of CPU for 10,000
 * rows in not_after order, where rows stored near each other expire near each other, but about
 * 50 ms for 10,000 in serial order, where serials are random and each row is on a table page of
 * its own; 2,500 of those cost about 12 ms.
 */
export const SCAN_WINDOW = { not_after: 10_000, serial: 2_500 } as const;

export const hasSubstring = (f: InventoryFilter): boolean => f.commonName !== undefined || f.san !== undefined;

/**
 * The WHERE clause of a filter. State is left out when `withState` is false (counts). A scan
 * window's edge (windowStatement) is counted on `index` terms only: no substring test and, for
 * valid/expired, only the not_after half of the state (revoked_at is not in the not_after index),
 * so that counting the window reads index entries and no table rows.
 */
export function whereOf(mountId: string, f: InventoryFilter, now: number, withState = true, index = false): { clause: string; binds: Bind[] } {
  const parts = [`mount_no = ${NO_OF}`];
  const binds: Bind[] = [mountId];
  if (f.issuerId !== undefined) {
    parts.push(`issuer_no = ${NO_OF}`);
    binds.push(f.issuerId);
  }
  if (f.role !== undefined) {
    parts.push("role = ?");
    binds.push(f.role);
  }
  if (withState && f.state === "revoked") parts.push("revoked_at IS NOT NULL");
  const live = index ? "" : "revoked_at IS NULL AND ";
  if (withState && f.state === "valid") {
    parts.push(`${live}not_after >= ?`);
    binds.push(now);
  }
  if (withState && f.state === "expired") {
    parts.push(`${live}not_after < ?`);
    binds.push(now);
  }
  if (f.expiresBefore !== undefined) {
    parts.push("not_after < ?");
    binds.push(f.expiresBefore);
  }
  if (f.expiresAfter !== undefined) {
    parts.push("not_after > ?");
    binds.push(f.expiresAfter);
  }
  if (index) return { clause: parts.join(" AND "), binds };
  if (f.commonName !== undefined) {
    parts.push("common_name LIKE ? ESCAPE '\\'");
    binds.push(likePattern(f.commonName));
  }
  if (f.san !== undefined) {
    parts.push("sans LIKE ? ESCAPE '\\'");
    binds.push(likePattern(f.san));
  }
  return { clause: parts.join(" AND "), binds };
}

const PAGE_COLUMNS = `serial, common_name, sans, ${ID_OF("issuer_no")} AS issuer_id, role, not_before, not_after, revoked_at, CASE WHEN not_before IS NULL THEN der END AS der`;

/** The keyset term (rows strictly after `q.after` in the page's order) and the ORDER BY. */
function keysetOf(q: PageQuery): { keyset: string; binds: Bind[]; order: string } {
  const cmp = q.order === "asc" ? ">" : "<";
  const dir = q.order === "asc" ? "ASC" : "DESC";
  const order = q.sort === "not_after" ? `not_after ${dir}, id ${dir}` : `serial ${dir}`;
  if (q.after && q.sort === "not_after") return { keyset: ` AND (not_after, id) ${cmp} (?, ?)`, binds: [q.after.notAfter, q.after.id], order };
  if (q.after) return { keyset: ` AND serial ${cmp} ?`, binds: [serialOctets(q.after.serial)], order };
  return { keyset: "", binds: [], order };
}

/** The statement of one page (exported for the query plans in docs/pki-inventory.md and the bench). */
export function pageStatement(mountId: string, q: PageQuery): { query: string; binds: Bind[] } {
  if (q.window !== undefined && hasSubstring(q.filter)) return windowStatement(mountId, q, q.window);
  const where = whereOf(mountId, q.filter, q.now);
  const k = keysetOf(q);
  return { query: `SELECT ${PAGE_COLUMNS} FROM pki_certs WHERE ${where.clause}${k.keyset} ORDER BY ${k.order} LIMIT ?`, binds: [...where.binds, ...k.binds, q.limit] };
}

// Beyond the last possible key in each direction: an integer (not_after) sorts before any BLOB,
// and 21 octets of ff after every serial (20 octets at most, RFC 5280 §4.1.2.2); -2^63 sorts
// before every not_after and a TEXT '' before every BLOB serial (SQLite's ordering of storage
// classes, https://www.sqlite.org/datatype3.html §4.1). The id half only matters on a tie.
const PAST_END = { asc: ["X''", `X'${"ff".repeat(21)}'`], desc: ["-9223372036854775808", "''"] } as const;

/**
 * The terms a window's edge is counted on: those one index holds in the page's order, so that
 * the edge is a walk of at most `window` entries of that index and no table row. Sorting by
 * serial, only pki_certs_mount_serial's (mount_no, serial); by not_after, the not_after range
 * (expiry window, valid/expired) plus one of role (pki_certs_inv_role), issuer
 * (pki_certs_inv_issuer) or revoked (the partial pki_certs_inv_revoked), in that preference.
 * The other filters are tested on the page's rows, inside the window.
 */
function edgeFilter(q: PageQuery): InventoryFilter {
  if (q.sort === "serial") return {};
  const f = q.filter;
  const e: InventoryFilter = {};
  if (f.expiresBefore !== undefined) e.expiresBefore = f.expiresBefore;
  if (f.expiresAfter !== undefined) e.expiresAfter = f.expiresAfter;
  if (f.role !== undefined) e.role = f.role;
  else if (f.issuerId !== undefined) e.issuerId = f.issuerId;
  if (f.state === "valid" || f.state === "expired" || (f.state === "revoked" && e.role === undefined && e.issuerId === undefined)) e.state = f.state;
  return e;
}

/**
 * A substring-filtered page that reads at most `window` rows (docs/pki-inventory.md "Substring
 * search"). `edge` is the window's last row: the `window`-th row after the keyset position that
 * passes the index terms of the filter (edgeFilter, whereOf's `index`), an index-only walk; none when fewer
 * rows are left. The page is the substring matches up to and including the edge (or to the end
 * when there is none), at most `limit` of them, read along the same index range, which the edge
 * bounds. One statement: its rows are the matches (`edge = 0`) and then the edge itself, if any
 * (`edge = 1`, its serial and not_after only).
 */
function windowStatement(mountId: string, q: PageQuery, window: number): { query: string; binds: Bind[] } {
  const all = whereOf(mountId, q.filter, q.now);
  const idx = whereOf(mountId, edgeFilter(q), q.now, true, true);
  const k = keysetOf(q);
  const le = q.order === "asc" ? "<=" : ">=";
  const [endA, endS] = PAST_END[q.order];
  const bound =
    q.sort === "not_after"
      ? `(not_after, id) ${le} ((SELECT coalesce((SELECT not_after FROM edge), ${endA})), (SELECT coalesce((SELECT id FROM edge), ${endA})))`
      : `serial ${le} (SELECT coalesce((SELECT serial FROM edge), ${endS}))`;
  // The edge walks index entries only (the key and the id each entry carries); its serial and
  // not_after are read from its one row at the end.
  const edgeKey = q.sort === "serial" ? "serial, id" : "not_after, id";
  const nulls = "NULL AS common_name, NULL AS sans, NULL AS issuer_id, NULL AS role, NULL AS not_before";
  const query =
    `WITH edge AS (SELECT ${edgeKey} FROM pki_certs WHERE ${idx.clause}${k.keyset} ORDER BY ${k.order} LIMIT 1 OFFSET ?) ` +
    `SELECT * FROM (SELECT 0 AS edge, ${PAGE_COLUMNS} FROM pki_certs WHERE ${all.clause}${k.keyset} AND ${bound} ORDER BY ${k.order} LIMIT ?) ` +
    `UNION ALL SELECT 1 AS edge, c.serial, ${nulls}, c.not_after, NULL AS revoked_at, NULL AS der FROM edge JOIN pki_certs c ON c.id = edge.id`;
  return { query, binds: [...idx.binds, ...k.binds, window - 1, ...all.binds, ...k.binds, q.limit] };
}

export interface WindowedPage {
  rows: InventoryRow[];
  /** The window's last row when the window was full (the scan stopped there; notAfter 0 when sorting by serial); null when the scan reached the end. */
  edge: { serial: string; notAfter: number } | null;
}

export async function inventoryPage(db: Db, mountId: string, q: PageQuery): Promise<WindowedPage> {
  const s = pageStatement(mountId, q);
  const res = await db.$client
    .prepare(s.query)
    .bind(...s.binds)
    .all<Omit<InventoryRow, "serial"> & { serial: BlobValue; edge?: number }>();
  const rows: InventoryRow[] = [];
  let edge: WindowedPage["edge"] = null;
  for (const { edge: isEdge, ...r } of res.results) {
    const serial = serialText(r.serial);
    if (isEdge === 1) edge = { serial, notAfter: r.not_after };
    else rows.push({ ...r, serial });
  }
  return { rows, edge };
}

/** The position of a stored certificate (a page's `after`), or null when there is none. */
export async function positionOf(db: Db, mountId: string, serial: string): Promise<Position | null> {
  const row = await db.$client
    .prepare(`SELECT not_after, id FROM pki_certs WHERE mount_no = ${NO_OF} AND serial = ?`)
    .bind(mountId, serialOctets(serial))
    .first<{ not_after: number; id: number }>();
  return row ? { serial, notAfter: row.not_after, id: row.id } : null;
}

export interface StateCounts {
  total: number;
  valid: number;
  expired: number;
  revoked: number;
}

/**
 * Counts per state under a filter (its state ignored). Two statements, so that without a
 * substring filter both are index-only scans: everything, and the revoked ones through the
 * partial index pki_certs_inv_revoked; valid and expired are the differences.
 */
export async function stateCounts(db: Db, mountId: string, f: InventoryFilter, now: number): Promise<StateCounts> {
  const w = whereOf(mountId, f, now, false);
  const all = `SELECT count(*) AS n, coalesce(sum(not_after < ?), 0) AS past FROM pki_certs WHERE ${w.clause}`;
  const [a, r] = await db.$client.batch<{ n: number; past: number }>([
    db.$client.prepare(all).bind(now, ...w.binds),
    db.$client.prepare(`${all} AND revoked_at IS NOT NULL`).bind(now, ...w.binds),
  ]);
  const total = a?.results[0] ?? { n: 0, past: 0 };
  const revoked = r?.results[0] ?? { n: 0, past: 0 };
  return {
    total: total.n,
    revoked: revoked.n,
    expired: total.past - revoked.past,
    valid: total.n - total.past - (revoked.n - revoked.past),
  };
}

/**
 * Certificates not revoked whose not_after falls in [from, to), per day: `day` counts from
 * `dayStart` (a UTC midnight). All of them minus the revoked ones, as in stateCounts.
 */
export async function expiryPerDay(db: Db, mountId: string, dayStart: number, from: number, to: number): Promise<Map<number, number>> {
  const q = `SELECT CAST((not_after - ?) / 86400 AS INTEGER) AS day, count(*) AS n FROM pki_certs WHERE mount_no = ${NO_OF} AND not_after >= ? AND not_after < ?`;
  const [all, revoked] = await db.$client.batch<{ day: number; n: number }>([
    db.$client.prepare(`${q} GROUP BY day`).bind(dayStart, mountId, from, to),
    db.$client.prepare(`${q} AND revoked_at IS NOT NULL GROUP BY day`).bind(dayStart, mountId, from, to),
  ]);
  const out = new Map<number, number>();
  for (const r of all?.results ?? []) out.set(r.day, r.n);
  for (const r of revoked?.results ?? []) out.set(r.day, (out.get(r.day) ?? 0) - r.n);
  return out;
}

// -- backfill ---------------------------------------------------------------------------------

export interface PendingRow {
  mount_id: string;
  serial: string;
  der: string;
}

/**
 * Rows of active mounts whose inventory columns are not filled (partial index
 * pki_certs_inv_pending: once every row is filled, this reads an empty index).
 */
export async function pendingInventoryRows(db: Db, limit: number): Promise<PendingRow[]> {
  const res = await db.$client
    .prepare(
      "SELECT m.id AS mount_id, c.serial, c.der FROM pki_certs c INDEXED BY pki_certs_inv_pending JOIN pki_ids i ON i.no = c.mount_no JOIN mounts m ON m.id = i.id AND m.state = 'active' WHERE c.not_before IS NULL LIMIT ?",
    )
    .bind(limit)
    .all<Omit<PendingRow, "serial"> & { serial: BlobValue }>();
  return res.results.map((r) => ({ ...r, serial: serialText(r.serial) }));
}

export interface FilledColumns {
  mount_id: string;
  serial: string;
  common_name: string;
  sans: string;
  not_before: number;
}

/** Writes the inventory columns of many rows, as one statement per chunk (a JSON array bound once). */
export async function fillInventoryColumns(db: Db, rows: FilledColumns[], perStatement: number): Promise<void> {
  const stmts: D1PreparedStatement[] = [];
  for (let i = 0; i < rows.length; i += perStatement) {
    const chunk = JSON.stringify(rows.slice(i, i + perStatement));
    stmts.push(
      db.$client
        .prepare(
          `UPDATE pki_certs SET common_name = v.common_name, sans = v.sans, not_before = v.not_before
           FROM (SELECT value ->> 'mount_id' AS mount_id, value ->> 'serial' AS serial, value ->> 'common_name' AS common_name,
                        value ->> 'sans' AS sans, value ->> 'not_before' AS not_before FROM json_each(?)) AS v
           WHERE pki_certs.mount_no = (SELECT no FROM pki_ids WHERE id = v.mount_id) AND pki_certs.serial = unhex(replace(v.serial, ':', ''))
             AND pki_certs.not_before IS NULL`,
        )
        .bind(chunk),
    );
  }
  if (stmts.length > 0) await db.$client.batch(stmts);
}
