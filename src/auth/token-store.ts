/**
 * Storage of tokens: the only module that touches the `tokens` table. Tokens are stored as
 * SHA-256 hashes; the configured ROOT_TOKEN is never stored at all (it is compared in constant
 * time on each request, see src/auth/authenticate.ts).
 *
 * Invariant: no token outlives a revoked ancestor. D1 has no interactive
 * transactions, but it runs each statement atomically and one at a time, so creation and
 * revocation are each ONE statement that excludes the other:
 *   - a child is inserted by `INSERT … SELECT … WHERE EXISTS (parent still valid)` (insertToken),
 *     so it is stored only if its parent's row is there, unexpired and not out of uses at that
 *     instant;
 *   - a tree is revoked by one `DELETE … WHERE accessor IN (recursive subtree)` (revokeTree), which
 *     finds and deletes the whole subtree at one instant.
 * So either the insert runs first, and the child is in the subtree the delete removes, or the
 * delete runs first, and the insert finds no parent and stores nothing. Enumerating the subtree
 * in one statement and deleting it in later ones (as before) let a child slip in between.
 */
import { and, eq, gt, getTableColumns, inArray, sql } from "drizzle-orm";
import type { TokenRow } from "../core/caller";
import type { Db } from "../core/db/client";
import { tokens } from "../core/db/schema";
import { invalidate, ReadCache } from "../core/read-cache";

export type { TokenEntry, TokenRow } from "../core/caller";

// TokenRow (src/core/caller.ts) is declared by hand so that core need not read the schema; this
// fails type-checking as soon as it and the table's row differ in any column or type.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const TOKEN_ROW_IS_THE_TABLE_ROW: Same<TokenRow, typeof tokens.$inferSelect> = true;
void TOKEN_ROW_IS_THE_TABLE_ROW;

/**
 * Token rows by hash, per isolate, for the request pipeline (src/app/resolve.ts). Bounded by
 * CACHE_TTL_MS (src/core/read-cache.ts): a token revoked by another isolate stops working within
 * it; every write below invalidates "tokens" in this isolate, so its own revocations, renewals
 * and orphanings are seen at once. Not cached: unknown hashes (a new token works at once
 * everywhere), use-limited tokens (each use is a conditional UPDATE anyway), and rows past their
 * expiry (read again, in case another isolate renewed them).
 */
const rowsByHash = new ReadCache<TokenRow>("tokens.rows", "tokens", 10_000, {
  // Early re-reads in the background (src/core/read-cache.ts): what rememberToken would keep.
  reload: async (db, hash) => {
    const row = await getTokenByHash(db, hash);
    return row && row.numUses === 0 ? row : undefined;
  },
});

/** The cached row of a token hash, unless it is unknown here, stale or past its expiry. */
export function cachedToken(hash: string, now: number): TokenRow | undefined {
  const row = rowsByHash.get(hash, now);
  return row && (row.expireTime === null || row.expireTime > now) ? row : undefined;
}

export function rememberToken(row: TokenRow | undefined, readAt: number, generation: number): void {
  if (row && row.numUses === 0) rowsByHash.set(row.hash, row, readAt, generation);
}

export async function getTokenByHash(db: Db, hash: string): Promise<TokenRow | null> {
  const rows = await tokenByHashQuery(db, hash);
  return rows[0] ?? null;
}

/** The unexecuted lookup, for a request's first D1 batch (src/app/dispatch.ts). */
export const tokenByHashQuery = (db: Db, hash: string) => db.select().from(tokens).where(eq(tokens.hash, hash));

export async function getTokenByAccessor(db: Db, accessor: string): Promise<TokenRow | null> {
  const rows = await db.select().from(tokens).where(eq(tokens.accessor, accessor));
  return rows[0] ?? null;
}

/**
 * Stores a new token. An orphan is inserted as is. A child is inserted only if its parent is
 * still valid at the instant of the insert (see the invariant above); returns false, storing
 * nothing, when the parent was revoked, expired or used up meanwhile.
 */
export async function insertToken(db: Db, row: TokenRow, now: number): Promise<boolean> {
  if (row.parentAccessor === null) {
    await db.insert(tokens).values(row);
    return true;
  }
  // The new row's values in the table's column order (the order Drizzle's insert-select lists
  // the columns in), each encoded by its column (JSON, booleans) as .values() would.
  const cols = getTableColumns(tokens);
  const values = sql.join(
    (Object.keys(cols) as (keyof TokenRow)[]).map((k) => sql.param(row[k], cols[k])),
    sql`, `,
  );
  const res = await db.insert(tokens).select(sql`
    SELECT ${values}
    WHERE EXISTS (
      SELECT 1 FROM tokens AS p
      WHERE p.accessor = ${row.parentAccessor}
        AND (p.expire_time IS NULL OR p.expire_time > ${now})
        AND (p.num_uses = 0 OR p.uses_left > 0)
    )`);
  return (res.meta.changes ?? 0) > 0;
}

/**
 * Spends one use of a limited-use token. Returns the uses left after this one, or null when the
 * token had none left. A single conditional UPDATE, so concurrent requests cannot overspend.
 */
export async function spendUse(db: Db, hash: string): Promise<number | null> {
  const rows = await db
    .update(tokens)
    .set({ usesLeft: sql`${tokens.usesLeft} - 1` })
    .where(and(eq(tokens.hash, hash), gt(tokens.usesLeft, 0)))
    .returning({ usesLeft: tokens.usesLeft });
  return rows[0]?.usesLeft ?? null;
}

export async function setExpiry(db: Db, hash: string, ttl: number, expireTime: number | null): Promise<void> {
  await db.update(tokens).set({ ttl, expireTime }).where(eq(tokens.hash, hash));
  invalidate("tokens");
}

/**
 * Revokes a token and every descendant (revoking a parent revokes its children) in ONE statement,
 * so no child can be inserted between finding the subtree and deleting it (see the invariant
 * above), and a failure cannot leave half a tree. One bound parameter, whatever the tree's size
 * (D1 allows 100 per statement). UNION, not UNION ALL, so even a corrupt cycle terminates.
 */
export async function revokeTree(db: Db, accessor: string): Promise<number> {
  const res = await db.run(sql`
    DELETE FROM tokens WHERE accessor IN (
      WITH RECURSIVE sub(accessor) AS (
        SELECT ${accessor}
        UNION
        SELECT t.accessor FROM tokens t JOIN sub ON t.parent_accessor = sub.accessor
      )
      SELECT accessor FROM sub
    )`);
  invalidate("tokens");
  return res.meta.changes ?? 0;
}

/**
 * Vault's revoke-orphan: deletes the token and makes its children orphans. One D1 batch (a
 * transaction), so no child can be inserted under the token between the two statements; a
 * concurrent insert runs before (its child is orphaned too) or after (it finds no parent and
 * stores nothing, see insertToken).
 */
export async function revokeOrphan(db: Db, accessor: string): Promise<void> {
  await db.batch([db.delete(tokens).where(eq(tokens.accessor, accessor)), db.update(tokens).set({ parentAccessor: null }).where(eq(tokens.parentAccessor, accessor))]);
  invalidate("tokens");
}

export async function revokeNamespaceTokens(db: Db, nsIds: string[]): Promise<void> {
  if (nsIds.length === 0) return;
  await db.delete(tokens).where(inArray(tokens.namespaceId, nsIds));
  invalidate("tokens");
}

export async function listAccessors(db: Db, nsId: string): Promise<string[]> {
  const rows = await db.select({ a: tokens.accessor }).from(tokens).where(eq(tokens.namespaceId, nsId));
  return rows.map((r) => r.a).sort();
}

/**
 * Revokes every token an auth mount issued at login (or, with `roleName`, those issued through
 * that role) and their descendants, in ONE statement like revokeTree. Deleting a role or
 * disabling an auth mount stops its tokens this way.
 */
export async function revokeIssuedBy(db: Db, authMountId: string, roleName?: string): Promise<number> {
  const roleCond = roleName === undefined ? sql`` : sql` AND role_name = ${roleName}`;
  const res = await db.run(sql`
    DELETE FROM tokens WHERE accessor IN (
      WITH RECURSIVE sub(accessor) AS (
        SELECT accessor FROM tokens WHERE auth_mount_id = ${authMountId}${roleCond}
        UNION
        SELECT t.accessor FROM tokens t JOIN sub ON t.parent_accessor = sub.accessor
      )
      SELECT accessor FROM sub
    )`);
  invalidate("tokens");
  return res.meta.changes ?? 0;
}

/** sys/metrics: live tokens (no expiry, or not yet expired) per namespace id, one GROUP BY. */
export async function liveTokenCounts(db: Db, now: number): Promise<{ namespaceId: string; n: number }[]> {
  return db
    .select({ namespaceId: tokens.namespaceId, n: sql<number>`count(*)` })
    .from(tokens)
    .where(sql`${tokens.expireTime} IS NULL OR ${tokens.expireTime} > ${now}`)
    .groupBy(tokens.namespaceId);
}
