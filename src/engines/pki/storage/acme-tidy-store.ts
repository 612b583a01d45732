/**
 * Tidy's storage for ACME (`tidy_acme`, Vault API /pki/tidy): paged scans of a mount's ACME
 * accounts and their orders, and the bulk deletes and revocations the tidy job decides on. Kept
 * apart from acme-store.ts (the ACME server's single-row reads and writes of the same tables)
 * because only the tidy job needs these bulk forms, as tidy-store.ts is for pki_certs.
 *
 * The job decides from a read, then writes in one batch whose statements re-check what a
 * concurrent request could have changed in between: an account is revoked or deleted only if it
 * still has no order at all (a client that just created one keeps its account), only from the
 * status the decision saw, and only while its age still passes the buffer. Every write RETURNs
 * what it changed, so the counts are what really happened and a retried step counts nothing twice.
 * D1 allows at most 100 bound parameters per statement: lists go in chunks.
 */
import { and, asc, eq, gt, inArray, lt, sql } from "drizzle-orm";
import type { Db } from "../../../core/db/client";
import { pkiAcmeAccounts, pkiAcmeAuthzs, pkiAcmeChallenges, pkiAcmeEab, pkiAcmeNonces, pkiAcmeOrders } from "../../../core/db/schema";
import type { Stmt } from "./store";

const CHUNK = 90;

function chunks<T>(xs: T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < xs.length; i += CHUNK) out.push(xs.slice(i, i + CHUNK));
  return out;
}

export interface AcmeTidyAccount {
  id: string;
  /** valid | deactivated | revoked. */
  status: string;
  /** Unix ms. */
  createdAt: number;
  /** Unix ms of the last change; for a revoked or deactivated account, when that happened. */
  updatedAt: number;
}

export interface AcmeTidyOrder {
  id: string;
  accountId: string;
  /** Unix ms: when the order expires (24 h after creation). */
  expiresAt: number;
  /** Unix ms: the issued certificate's notAfter; 0 when the order has no certificate. */
  certExpiresAt: number;
}

/** Accounts after `afterId`, in id order. */
export function listAcmeAccountsPage(db: Db, mountId: string, afterId: string, limit: number): Promise<AcmeTidyAccount[]> {
  const a = pkiAcmeAccounts;
  return db
    .select({ id: a.id, status: a.status, createdAt: a.createdAt, updatedAt: a.updatedAt })
    .from(a)
    .where(and(eq(a.mountId, mountId), gt(a.id, afterId)))
    .orderBy(asc(a.id))
    .limit(limit);
}

/** Every order of the given accounts. */
export async function listAcmeOrdersOf(db: Db, mountId: string, accountIds: string[]): Promise<AcmeTidyOrder[]> {
  const o = pkiAcmeOrders;
  const pages = await Promise.all(
    chunks(accountIds).map((c) =>
      db
        .select({ id: o.id, accountId: o.accountId, expiresAt: o.expiresAt, certExpiresAt: o.certExpiresAt })
        .from(o)
        .where(and(eq(o.mountId, mountId), inArray(o.accountId, c))),
    ),
  );
  return pages.flat();
}

export interface AcmeTidyWrites {
  /** Orders to delete, with their authorizations and challenges. */
  deleteOrders: string[];
  /** Valid accounts to revoke (still only if created before the cutoff). */
  revoke: string[];
  /** Revoked or deactivated accounts to delete (still only if last changed before the cutoff). */
  remove: string[];
}

/**
 * Applies one page's decisions in one batch (one transaction). `now` stamps the revocations;
 * `cutoff` (now − acme_account_safety_buffer) is re-checked against the accounts' times.
 */
export async function applyAcmeTidy(db: Db, mountId: string, w: AcmeTidyWrites, now: number, cutoff: number): Promise<{ ordersDeleted: number; revoked: number; deleted: number }> {
  const o = pkiAcmeOrders;
  const z = pkiAcmeAuthzs;
  const c = pkiAcmeChallenges;
  const a = pkiAcmeAccounts;
  const stmts: Stmt[] = [];
  const orderStmts: number[] = [];
  const revokeStmts: number[] = [];
  const deleteStmts: number[] = [];
  for (const ids of chunks(w.deleteOrders)) {
    stmts.push(
      db.delete(c).where(and(eq(c.mountId, mountId), sql`${c.authzId} IN (SELECT ${z.id} FROM ${z} WHERE ${z.mountId} = ${mountId} AND ${inArray(z.orderId, ids)})`)),
      db.delete(z).where(and(eq(z.mountId, mountId), inArray(z.orderId, ids))),
    );
    orderStmts.push(stmts.length);
    stmts.push(db.delete(o).where(and(eq(o.mountId, mountId), inArray(o.id, ids))).returning({ id: o.id }));
  }
  // Runs after the order deletes of the same batch: "no order left" sees them gone, and sees any
  // order a client created since the read.
  const noOrders = sql`NOT EXISTS (SELECT 1 FROM ${o} WHERE ${o.mountId} = ${a.mountId} AND ${o.accountId} = ${a.id})`;
  for (const ids of chunks(w.revoke)) {
    revokeStmts.push(stmts.length);
    stmts.push(
      db
        .update(a)
        .set({ status: "revoked", updatedAt: now })
        .where(and(eq(a.mountId, mountId), inArray(a.id, ids), eq(a.status, "valid"), lt(a.createdAt, cutoff), noOrders))
        .returning({ id: a.id }),
    );
  }
  for (const ids of chunks(w.remove)) {
    deleteStmts.push(stmts.length);
    stmts.push(
      db
        .delete(a)
        .where(and(eq(a.mountId, mountId), inArray(a.id, ids), inArray(a.status, ["revoked", "deactivated"]), lt(a.updatedAt, cutoff), noOrders))
        .returning({ id: a.id }),
    );
  }
  const [first, ...rest] = stmts;
  if (!first) return { ordersDeleted: 0, revoked: 0, deleted: 0 };
  const results = (await db.batch([first, ...rest])) as unknown[];
  const count = (idx: number[]): number => idx.reduce((n, i) => n + (Array.isArray(results[i]) ? (results[i] as unknown[]).length : 0), 0);
  return { ordersDeleted: count(orderStmts), revoked: count(revokeStmts), deleted: count(deleteStmts) };
}

/** Unused EAB keys created before `createdBefore` (Vault deletes them once older than the buffer); how many went. */
export async function deleteStaleEabs(db: Db, mountId: string, createdBefore: number): Promise<number> {
  const e = pkiAcmeEab;
  const rows = await db
    .delete(e)
    .where(and(eq(e.mountId, mountId), lt(e.createdAt, createdBefore)))
    .returning({ id: e.id });
  return rows.length;
}

/** Replay nonces that expired unused. */
export async function deleteExpiredAcmeNonces(db: Db, mountId: string, now: number): Promise<void> {
  await db.delete(pkiAcmeNonces).where(and(eq(pkiAcmeNonces.mountId, mountId), lt(pkiAcmeNonces.expiresAt, now)));
}
