/**
 * Storage of tokens: the only module that touches the `tokens` table. Tokens are stored as
 * SHA-256 hashes; the configured ROOT_TOKEN is never stored at all (it is compared in constant
 * time on each request, see src/auth/authenticate.ts).
 */
import { and, eq, gt, inArray, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { tokens } from "../db/schema";

export type TokenRow = typeof tokens.$inferSelect;

/** The authenticated caller. `configuredRoot` is the ROOT_TOKEN itself. */
export interface TokenEntry extends TokenRow {
  configuredRoot: boolean;
  /** The token text as presented, kept only for this request (lookup-self returns it as `id`). */
  presented: string;
}

export async function getTokenByHash(db: Db, hash: string): Promise<TokenRow | null> {
  const rows = await tokenByHashQuery(db, hash);
  return rows[0] ?? null;
}

/** The unexecuted lookup, for a request's first D1 batch (src/http/dispatch.ts). */
export const tokenByHashQuery = (db: Db, hash: string) => db.select().from(tokens).where(eq(tokens.hash, hash));

export async function getTokenByAccessor(db: Db, accessor: string): Promise<TokenRow | null> {
  const rows = await db.select().from(tokens).where(eq(tokens.accessor, accessor));
  return rows[0] ?? null;
}

export async function insertToken(db: Db, row: TokenRow): Promise<void> {
  await db.insert(tokens).values(row);
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
}

/** Accessors of a token and all of its descendants. */
export async function subtreeAccessors(db: Db, accessor: string): Promise<string[]> {
  const rows = await db.all<{ accessor: string }>(sql`
    WITH RECURSIVE sub(accessor) AS (
      SELECT ${accessor}
      UNION ALL
      SELECT t.accessor FROM tokens t JOIN sub ON t.parent_accessor = sub.accessor
    )
    SELECT accessor FROM sub`);
  return rows.map((r) => r.accessor);
}

/** Revokes a token and every descendant (revoking a parent revokes its children). */
export async function revokeTree(db: Db, accessor: string): Promise<number> {
  const all = await subtreeAccessors(db, accessor);
  let n = 0;
  // D1 limits bound parameters per statement; delete in chunks.
  for (let i = 0; i < all.length; i += 90) {
    const res = await db.delete(tokens).where(inArray(tokens.accessor, all.slice(i, i + 90)));
    n += res.meta.changes ?? 0;
  }
  return n;
}

export async function revokeNamespaceTokens(db: Db, nsIds: string[]): Promise<void> {
  if (nsIds.length === 0) return;
  await db.delete(tokens).where(inArray(tokens.namespaceId, nsIds));
}

export async function listAccessors(db: Db, nsId: string): Promise<string[]> {
  const rows = await db.select({ a: tokens.accessor }).from(tokens).where(eq(tokens.namespaceId, nsId));
  return rows.map((r) => r.a).sort();
}
