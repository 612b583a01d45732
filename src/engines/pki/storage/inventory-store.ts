/**
 * The certificate inventory's reads of pki_certs (docs/pki-inventory.md: API, query plans, the
 * bench): filtered keyset pages, counts per state, the expiry histogram, and the backfill of the
 * inventory columns of rows stored before them.
 *
 * Every query is written as SQL text so that docs/pki-inventory.md can show the very statements
 * and their `EXPLAIN QUERY PLAN`. Pages are keyset pages, never OFFSET: `(not_after, serial) >
 * (?, ?)` (or `serial > ?`) walks an index from the previous page's last row, so page n costs
 * what page 1 costs. The indexes are migration 0017's (src/core/db/schema/pki.ts).
 *
 * Revocation state is the column `revoked_at`, kept by the trigger pki_certs_inv_revoked_mark on
 * every insert into pki_revoked (the one way a certificate becomes revoked), so no listing joins
 * pki_revoked.
 */
import type { Db } from "../../../core/db/client";

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
  sort: "not_after" | "serial";
  order: "asc" | "desc";
  /** The previous page's last row (its not_after read back from the row). */
  after: { serial: string; notAfter: number } | null;
  limit: number;
  /** Unix seconds: the boundary between valid and expired. */
  now: number;
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

type Bind = string | number;

/** `%…%` for LIKE with `\` as the escape character: the caller's `%`, `_` and `\` match themselves. */
const likePattern = (s: string): string => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/** The WHERE clause of a filter. State is left out when `withState` is false (counts). */
export function whereOf(mountId: string, f: InventoryFilter, now: number, withState = true): { sql: string; binds: Bind[] } {
  const parts = ["mount_id = ?"];
  const binds: Bind[] = [mountId];
  if (f.issuerId !== undefined) {
    parts.push("issuer_id = ?");
    binds.push(f.issuerId);
  }
  if (f.role !== undefined) {
    parts.push("role = ?");
    binds.push(f.role);
  }
  if (withState && f.state === "revoked") parts.push("revoked_at IS NOT NULL");
  if (withState && f.state === "valid") {
    parts.push("revoked_at IS NULL AND not_after >= ?");
    binds.push(now);
  }
  if (withState && f.state === "expired") {
    parts.push("revoked_at IS NULL AND not_after < ?");
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
  if (f.commonName !== undefined) {
    parts.push("common_name LIKE ? ESCAPE '\\'");
    binds.push(likePattern(f.commonName));
  }
  if (f.san !== undefined) {
    parts.push("sans LIKE ? ESCAPE '\\'");
    binds.push(likePattern(f.san));
  }
  return { sql: parts.join(" AND "), binds };
}

const PAGE_COLUMNS = "serial, common_name, sans, issuer_id, role, not_before, not_after, revoked_at, CASE WHEN not_before IS NULL THEN der END AS der";

/** The statement of one page (exported for the query plans in docs/pki-inventory.md and the bench). */
export function pageStatement(mountId: string, q: PageQuery): { sql: string; binds: Bind[] } {
  const where = whereOf(mountId, q.filter, q.now);
  const binds = [...where.binds];
  const cmp = q.order === "asc" ? ">" : "<";
  const dir = q.order === "asc" ? "ASC" : "DESC";
  let keyset = "";
  if (q.after && q.sort === "not_after") {
    keyset = ` AND (not_after, serial) ${cmp} (?, ?)`;
    binds.push(q.after.notAfter, q.after.serial);
  } else if (q.after) {
    keyset = ` AND serial ${cmp} ?`;
    binds.push(q.after.serial);
  }
  const order = q.sort === "not_after" ? `not_after ${dir}, serial ${dir}` : `serial ${dir}`;
  binds.push(q.limit);
  return { sql: `SELECT ${PAGE_COLUMNS} FROM pki_certs WHERE ${where.sql}${keyset} ORDER BY ${order} LIMIT ?`, binds };
}

export async function inventoryPage(db: Db, mountId: string, q: PageQuery): Promise<InventoryRow[]> {
  const s = pageStatement(mountId, q);
  const res = await db.$client.prepare(s.sql).bind(...s.binds).all<InventoryRow>();
  return res.results;
}

/** The not_after of a stored certificate (a page's `after`), or null when there is none. */
export async function notAfterOf(db: Db, mountId: string, serial: string): Promise<number | null> {
  const row = await db.$client.prepare("SELECT not_after FROM pki_certs WHERE mount_id = ? AND serial = ?").bind(mountId, serial).first<{ not_after: number }>();
  return row ? row.not_after : null;
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
  const all = `SELECT count(*) AS n, coalesce(sum(not_after < ?), 0) AS past FROM pki_certs WHERE ${w.sql}`;
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
  const q = "SELECT CAST((not_after - ?) / 86400 AS INTEGER) AS day, count(*) AS n FROM pki_certs WHERE mount_id = ? AND not_after >= ? AND not_after < ?";
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
      "SELECT c.mount_id, c.serial, c.der FROM pki_certs c INDEXED BY pki_certs_inv_pending JOIN mounts m ON m.id = c.mount_id AND m.state = 'active' WHERE c.not_before IS NULL LIMIT ?",
    )
    .bind(limit)
    .all<PendingRow>();
  return res.results;
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
           WHERE pki_certs.mount_id = v.mount_id AND pki_certs.serial = v.serial AND pki_certs.not_before IS NULL`,
        )
        .bind(chunk),
    );
  }
  if (stmts.length > 0) await db.$client.batch(stmts);
}
