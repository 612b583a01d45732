/**
 * Storage of revocations and built CRLs (pki_revoked, pki_crls): the only module that touches
 * those tables. CRL rows are written only by the mount's Authority Durable Object
 * (src/authority/authority.ts), which serializes rebuilds.
 */
import { and, asc, eq, gt } from "drizzle-orm";
import type { Db } from "../db/client";
import { pkiCrls, pkiRevoked } from "../db/schema";
import type { Stmt } from "./store";

export type RevokedRow = typeof pkiRevoked.$inferSelect;
export type NewRevokedRow = typeof pkiRevoked.$inferInsert;
export type CrlRow = typeof pkiCrls.$inferSelect;

export async function getRevoked(db: Db, mountId: string, serial: string): Promise<RevokedRow | null> {
  const rows = await db.select().from(pkiRevoked).where(and(eq(pkiRevoked.mountId, mountId), eq(pkiRevoked.serial, serial)));
  return rows[0] ?? null;
}

/**
 * Records a revocation unless the serial is already revoked (revoking twice keeps the first
 * time, pki-engine.md §5). Returns the stored row either way.
 */
export async function insertRevoked(db: Db, row: Omit<NewRevokedRow, "id">): Promise<RevokedRow> {
  const inserted = await db.insert(pkiRevoked).values(row).onConflictDoNothing().returning();
  const first = inserted[0];
  if (first) return first;
  const existing = await getRevoked(db, row.mountId, row.serial);
  if (!existing) throw new Error("revocation entry vanished while it was being written");
  return existing;
}

/** Every revocation of the mount, in sequence order. */
export const listRevoked = (db: Db, mountId: string): Promise<RevokedRow[]> =>
  db.select().from(pkiRevoked).where(eq(pkiRevoked.mountId, mountId)).orderBy(asc(pkiRevoked.id));

/** Revocations recorded after sequence number `afterSeq` (delta CRLs). */
export const listRevokedAfter = (db: Db, mountId: string, afterSeq: number): Promise<RevokedRow[]> =>
  db.select().from(pkiRevoked).where(and(eq(pkiRevoked.mountId, mountId), gt(pkiRevoked.id, afterSeq))).orderBy(asc(pkiRevoked.id));

export const deleteRevokedStmt = (db: Db, mountId: string, serial: string): Stmt =>
  db.delete(pkiRevoked).where(and(eq(pkiRevoked.mountId, mountId), eq(pkiRevoked.serial, serial)));

export async function getCrl(db: Db, mountId: string, issuerId: string, kind: "complete" | "delta"): Promise<CrlRow | null> {
  const rows = await db.select().from(pkiCrls).where(and(eq(pkiCrls.mountId, mountId), eq(pkiCrls.issuerId, issuerId), eq(pkiCrls.kind, kind)));
  return rows[0] ?? null;
}

export const putCrlStmt = (db: Db, row: CrlRow): Stmt =>
  db
    .insert(pkiCrls)
    .values(row)
    .onConflictDoUpdate({
      target: [pkiCrls.mountId, pkiCrls.issuerId, pkiCrls.kind],
      set: { number: row.number, der: row.der, maxSeq: row.maxSeq, thisUpdate: row.thisUpdate, nextUpdate: row.nextUpdate },
    });

/** Removes every revocation and CRL of a mount (the mount is being disabled). */
export function purgeRevocationStmts(db: Db, mountId: string): Stmt[] {
  return [db.delete(pkiRevoked).where(eq(pkiRevoked.mountId, mountId)), db.delete(pkiCrls).where(eq(pkiCrls.mountId, mountId))];
}
