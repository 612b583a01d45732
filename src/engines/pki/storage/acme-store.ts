/**
 * The ACME server's door to the ACME tables (src/core/db/schema/acme.ts, migration 0010):
 * configuration, nonces, accounts, orders, authorizations, challenges and EAB keys of a PKI
 * mount. tidy_acme's bulk forms are in acme-tidy-store.ts; the mount purge is here.
 *
 * Concurrency rests on single statements and single batches (docs/architecture.md), never on a
 * read followed by a write:
 * - a nonce is consumed by one DELETE … RETURNING (RFC 8555 §6.5: single use even when two
 *   requests present it at once);
 * - one account per key: the unique (mount, thumbprint) index, inserts ON CONFLICT DO NOTHING;
 * - an EAB key is spent by the batch that creates the account: the insert only happens while the
 *   key exists and the same batch deletes it, so a key creates at most one account;
 * - a challenge is claimed once (pending → processing is a conditional UPDATE … RETURNING), each
 *   retry is recorded once (conditional on the attempt count) and only a processing challenge is
 *   finished; an
 *   order is finalized once (pending → processing likewise), and key-change replaces the key
 *   only if it is still the one the request was signed with.
 */
import { and, asc, eq, lt, sql } from "drizzle-orm";
import type { Db } from "../../../core/db/client";
import { pkiAcmeAccounts, pkiAcmeAuthzs, pkiAcmeChallenges, pkiAcmeConfig, pkiAcmeEab, pkiAcmeNonces, pkiAcmeOrders, pkiAcmeRenewalMarks } from "../../../core/db/schema";
import type { Stmt } from "./store";

export type AcmeAccountRow = typeof pkiAcmeAccounts.$inferSelect;
export type AcmeOrderRow = typeof pkiAcmeOrders.$inferSelect;
export type AcmeAuthzRow = typeof pkiAcmeAuthzs.$inferSelect;
export type AcmeChallengeRow = typeof pkiAcmeChallenges.$inferSelect;
export type AcmeEabRow = typeof pkiAcmeEab.$inferSelect;

// -- configuration ----------------------------------------------------------------------------

export const acmeConfigQuery = (db: Db, mountId: string) => db.select().from(pkiAcmeConfig).where(eq(pkiAcmeConfig.mountId, mountId));

export async function getAcmeConfigValue(db: Db, mountId: string): Promise<unknown> {
  return (await acmeConfigQuery(db, mountId))[0]?.value;
}

export async function putAcmeConfig(db: Db, mountId: string, value: Record<string, unknown>): Promise<void> {
  const now = Date.now();
  await db
    .insert(pkiAcmeConfig)
    .values({ mountId, value, updatedAt: now })
    .onConflictDoUpdate({ target: pkiAcmeConfig.mountId, set: { value, updatedAt: now } });
}

// -- nonces -----------------------------------------------------------------------------------

export const insertNonceStmt = (db: Db, mountId: string, nonce: string, expiresAt: number) => db.insert(pkiAcmeNonces).values({ mountId, nonce, expiresAt });

/**
 * A nonce stored only if ACME is enabled on the mount, for the batch that reads config/acme in
 * the same round trip: a POST to a mount without ACME leaves no row behind.
 */
export const insertNonceIfEnabledStmt = (db: Db, mountId: string, nonce: string, expiresAt: number) =>
  db
    .insert(pkiAcmeNonces)
    .select(
      sql`SELECT ${mountId}, ${nonce}, ${expiresAt} WHERE EXISTS (SELECT 1 FROM ${pkiAcmeConfig} WHERE ${pkiAcmeConfig.mountId} = ${mountId} AND json_extract(${pkiAcmeConfig.value}, '$.enabled') = 1)`,
    );

/** Consumes a nonce: returns a row only to the one request that deleted it, and only if unexpired. */
export const consumeNonceStmt = (db: Db, mountId: string, nonce: string, now: number) =>
  db
    .delete(pkiAcmeNonces)
    .where(and(eq(pkiAcmeNonces.mountId, mountId), eq(pkiAcmeNonces.nonce, nonce), sql`${pkiAcmeNonces.expiresAt} > ${now}`))
    .returning({ nonce: pkiAcmeNonces.nonce });

export async function deleteExpiredNonces(db: Db, mountId: string, now: number): Promise<void> {
  await db.delete(pkiAcmeNonces).where(and(eq(pkiAcmeNonces.mountId, mountId), lt(pkiAcmeNonces.expiresAt, now)));
}

// -- accounts ---------------------------------------------------------------------------------

export const accountByIdQuery = (db: Db, mountId: string, id: string) =>
  db.select().from(pkiAcmeAccounts).where(and(eq(pkiAcmeAccounts.mountId, mountId), eq(pkiAcmeAccounts.id, id)));

export async function getAccountByThumbprint(db: Db, mountId: string, thumbprint: string): Promise<AcmeAccountRow | null> {
  const rows = await db.select().from(pkiAcmeAccounts).where(and(eq(pkiAcmeAccounts.mountId, mountId), eq(pkiAcmeAccounts.thumbprint, thumbprint)));
  return rows[0] ?? null;
}

/** Inserts an account unless its key already has one; true when this call created it. */
export async function insertAccount(db: Db, row: AcmeAccountRow): Promise<boolean> {
  const out = await db.insert(pkiAcmeAccounts).values(row).onConflictDoNothing().returning({ id: pkiAcmeAccounts.id });
  return out.length === 1;
}

/**
 * Creates an account with an EAB key and spends the key, in one batch (one transaction): the
 * account is inserted only while the key exists, and the key is deleted. Returns whether this
 * call spent the key (and so created the account, unless the key already had one: then the
 * caller finds the existing account).
 */
export async function insertAccountSpendingEab(db: Db, row: AcmeAccountRow): Promise<boolean> {
  const a = pkiAcmeAccounts;
  const e = pkiAcmeEab;
  const [, deleted] = await db.batch([
    db
      .insert(a)
      .select(
        sql`SELECT ${row.mountId}, ${row.id}, ${row.thumbprint}, ${JSON.stringify(row.jwk)}, ${row.status}, ${JSON.stringify(row.contact)}, ${row.directory}, ${row.eabId}, ${row.createdAt}, ${row.updatedAt}
            WHERE EXISTS (SELECT 1 FROM ${e} WHERE ${e.mountId} = ${row.mountId} AND ${e.id} = ${row.eabId})`,
      )
      .onConflictDoNothing(),
    db
      .delete(e)
      .where(and(eq(e.mountId, row.mountId), eq(e.id, row.eabId)))
      .returning({ id: e.id }),
  ]);
  return deleted.length === 1;
}

export async function updateAccount(db: Db, mountId: string, id: string, patch: Partial<Pick<AcmeAccountRow, "status" | "contact">>): Promise<AcmeAccountRow | null> {
  const rows = await db
    .update(pkiAcmeAccounts)
    .set({ ...patch, updatedAt: Date.now() })
    .where(and(eq(pkiAcmeAccounts.mountId, mountId), eq(pkiAcmeAccounts.id, id)))
    .returning();
  return rows[0] ?? null;
}

/**
 * key-change (RFC 8555 §7.3.5): the new key replaces the old one only if the old one is still the
 * account's key; false otherwise. A key another account holds fails the unique index (caller).
 */
export async function replaceAccountKey(db: Db, mountId: string, id: string, oldThumbprint: string, next: { thumbprint: string; jwk: Record<string, unknown> }): Promise<boolean> {
  const rows = await db
    .update(pkiAcmeAccounts)
    .set({ thumbprint: next.thumbprint, jwk: next.jwk, updatedAt: Date.now() })
    .where(and(eq(pkiAcmeAccounts.mountId, mountId), eq(pkiAcmeAccounts.id, id), eq(pkiAcmeAccounts.thumbprint, oldThumbprint)))
    .returning({ id: pkiAcmeAccounts.id });
  return rows.length === 1;
}

// -- orders, authorizations, challenges -------------------------------------------------------

/** A new order with its authorizations and their challenges, in one batch. */
export async function insertOrder(db: Db, order: AcmeOrderRow, authzs: AcmeAuthzRow[], challenges: AcmeChallengeRow[]): Promise<void> {
  const stmts: Stmt[] = [db.insert(pkiAcmeOrders).values(order)];
  if (authzs.length > 0) stmts.push(db.insert(pkiAcmeAuthzs).values(authzs));
  if (challenges.length > 0) stmts.push(db.insert(pkiAcmeChallenges).values(challenges));
  const [first, ...rest] = stmts;
  if (first) await db.batch([first, ...rest]);
}

/** An order and its authorizations, in one round trip; null when there is no such order. */
export async function getOrderWithAuthzs(db: Db, mountId: string, id: string): Promise<{ order: AcmeOrderRow; authzs: AcmeAuthzRow[] } | null> {
  const [orders, authzs] = await db.batch([
    db.select().from(pkiAcmeOrders).where(and(eq(pkiAcmeOrders.mountId, mountId), eq(pkiAcmeOrders.id, id))),
    db.select().from(pkiAcmeAuthzs).where(and(eq(pkiAcmeAuthzs.mountId, mountId), eq(pkiAcmeAuthzs.orderId, id))).orderBy(asc(pkiAcmeAuthzs.createdAt), asc(pkiAcmeAuthzs.id)),
  ]);
  const order = orders[0];
  return order ? { order, authzs } : null;
}

export async function listOrderIds(db: Db, mountId: string, accountId: string): Promise<string[]> {
  const rows = await db
    .select({ id: pkiAcmeOrders.id })
    .from(pkiAcmeOrders)
    .where(and(eq(pkiAcmeOrders.mountId, mountId), eq(pkiAcmeOrders.accountId, accountId)))
    .orderBy(asc(pkiAcmeOrders.createdAt), asc(pkiAcmeOrders.id));
  return rows.map((r) => r.id);
}

/** The order that issued a certificate (revoke-cert by account key). */
export async function getOrderBySerial(db: Db, mountId: string, serial: string): Promise<AcmeOrderRow | null> {
  const rows = await db.select().from(pkiAcmeOrders).where(and(eq(pkiAcmeOrders.mountId, mountId), eq(pkiAcmeOrders.certSerial, serial)));
  return rows[0] ?? null;
}

/** pending → processing, once: true for the one request that claimed the order. */
export async function claimOrderForFinalize(db: Db, mountId: string, id: string): Promise<boolean> {
  const rows = await db
    .update(pkiAcmeOrders)
    .set({ status: "processing" })
    .where(and(eq(pkiAcmeOrders.mountId, mountId), eq(pkiAcmeOrders.id, id), eq(pkiAcmeOrders.status, "pending")))
    .returning({ id: pkiAcmeOrders.id });
  return rows.length === 1;
}

export async function updateOrder(db: Db, mountId: string, id: string, patch: Partial<Pick<AcmeOrderRow, "status" | "certSerial" | "certChain" | "certExpiresAt" | "error">>): Promise<void> {
  await db.update(pkiAcmeOrders).set(patch).where(and(eq(pkiAcmeOrders.mountId, mountId), eq(pkiAcmeOrders.id, id)));
}

/** An authorization and its challenges, in one round trip. */
export async function getAuthzWithChallenges(db: Db, mountId: string, id: string): Promise<{ authz: AcmeAuthzRow; challenges: AcmeChallengeRow[] } | null> {
  const [authzs, challenges] = await db.batch([
    db.select().from(pkiAcmeAuthzs).where(and(eq(pkiAcmeAuthzs.mountId, mountId), eq(pkiAcmeAuthzs.id, id))),
    db.select().from(pkiAcmeChallenges).where(and(eq(pkiAcmeChallenges.mountId, mountId), eq(pkiAcmeChallenges.authzId, id))).orderBy(asc(pkiAcmeChallenges.type)),
  ]);
  const authz = authzs[0];
  return authz ? { authz, challenges } : null;
}

/** pending → processing for one challenge of a pending authorization; true for the one claimer. */
export async function claimChallenge(db: Db, mountId: string, authzId: string, type: string): Promise<boolean> {
  const c = pkiAcmeChallenges;
  const rows = await db
    .update(c)
    .set({ status: "processing" })
    .where(
      and(
        eq(c.mountId, mountId),
        eq(c.authzId, authzId),
        eq(c.type, type),
        eq(c.status, "pending"),
        sql`EXISTS (SELECT 1 FROM ${pkiAcmeAuthzs} WHERE ${pkiAcmeAuthzs.mountId} = ${mountId} AND ${pkiAcmeAuthzs.id} = ${authzId} AND ${pkiAcmeAuthzs.status} = 'pending')`,
      ),
    )
    .returning({ type: c.type });
  return rows.length === 1;
}

/**
 * A failed attempt that will be retried: the challenge stays processing with the failure in
 * `error` and `attempts` counted. Conditional on the attempt before it, so of two deliveries of
 * one retry message only one records it (and schedules the next); true for that one.
 */
export async function recordFailedAttempt(db: Db, mountId: string, authzId: string, type: string, attempt: number, error: Record<string, unknown>): Promise<boolean> {
  const c = pkiAcmeChallenges;
  const rows = await db
    .update(c)
    .set({ attempts: attempt, error })
    .where(and(eq(c.mountId, mountId), eq(c.authzId, authzId), eq(c.type, type), eq(c.status, "processing"), eq(c.attempts, attempt - 1)))
    .returning({ type: c.type });
  return rows.length === 1;
}

/** The outcome of a validation: the challenge (while still processing) and its authorization together (one batch). */
export async function finishChallenge(db: Db, mountId: string, authzId: string, type: string, outcome: { valid: true; at: number; attempt: number } | { valid: false; error: Record<string, unknown>; attempt: number }): Promise<void> {
  const c = pkiAcmeChallenges;
  const z = pkiAcmeAuthzs;
  const status = outcome.valid ? "valid" : "invalid";
  await db.batch([
    db
      .update(c)
      .set(outcome.valid ? { status, validatedAt: outcome.at, error: null, attempts: outcome.attempt } : { status, error: outcome.error, attempts: outcome.attempt })
      .where(and(eq(c.mountId, mountId), eq(c.authzId, authzId), eq(c.type, type), eq(c.status, "processing"))),
    db
      .update(z)
      .set({ status })
      .where(and(eq(z.mountId, mountId), eq(z.id, authzId), eq(z.status, "pending"))),
  ]);
}

export async function deactivateAuthz(db: Db, mountId: string, id: string): Promise<void> {
  await db.update(pkiAcmeAuthzs).set({ status: "deactivated" }).where(and(eq(pkiAcmeAuthzs.mountId, mountId), eq(pkiAcmeAuthzs.id, id)));
}

// -- EAB --------------------------------------------------------------------------------------

export async function insertEab(db: Db, row: AcmeEabRow): Promise<void> {
  await db.insert(pkiAcmeEab).values(row);
}

export async function getEab(db: Db, mountId: string, id: string): Promise<AcmeEabRow | null> {
  const rows = await db.select().from(pkiAcmeEab).where(and(eq(pkiAcmeEab.mountId, mountId), eq(pkiAcmeEab.id, id)));
  return rows[0] ?? null;
}

/** Every unused EAB key of the mount, without the sealed key. */
export function listEabs(db: Db, mountId: string): Promise<Omit<AcmeEabRow, "sealedKey" | "mountId">[]> {
  return db
    .select({ id: pkiAcmeEab.id, directory: pkiAcmeEab.directory, createdAt: pkiAcmeEab.createdAt })
    .from(pkiAcmeEab)
    .where(eq(pkiAcmeEab.mountId, mountId))
    .orderBy(asc(pkiAcmeEab.id));
}

/** Deletes an EAB key; true when there was one. */
export async function deleteEab(db: Db, mountId: string, id: string): Promise<boolean> {
  const rows = await db.delete(pkiAcmeEab).where(and(eq(pkiAcmeEab.mountId, mountId), eq(pkiAcmeEab.id, id))).returning({ id: pkiAcmeEab.id });
  return rows.length === 1;
}

// -- mount removal ----------------------------------------------------------------------------

/** Every ACME row of a mount (the mount is being disabled). */
export function purgeAcmeStmts(db: Db, mountId: string): Stmt[] {
  return [
    db.delete(pkiAcmeChallenges).where(eq(pkiAcmeChallenges.mountId, mountId)),
    db.delete(pkiAcmeAuthzs).where(eq(pkiAcmeAuthzs.mountId, mountId)),
    db.delete(pkiAcmeOrders).where(eq(pkiAcmeOrders.mountId, mountId)),
    db.delete(pkiAcmeAccounts).where(eq(pkiAcmeAccounts.mountId, mountId)),
    db.delete(pkiAcmeEab).where(eq(pkiAcmeEab.mountId, mountId)),
    db.delete(pkiAcmeNonces).where(eq(pkiAcmeNonces.mountId, mountId)),
    db.delete(pkiAcmeConfig).where(eq(pkiAcmeConfig.mountId, mountId)),
    db.delete(pkiAcmeRenewalMarks).where(eq(pkiAcmeRenewalMarks.mountId, mountId)),
  ];
}
