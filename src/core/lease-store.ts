/**
 * Storage of leases (Vault's expiration manager; Vault API: /sys/leases): the only module
 * that touches the `leases` table. Lease ids are namespace-relative, so every read and write is
 * scoped to one namespace, as Vault keeps each namespace's leases in its own storage view.
 */
import { and, asc, eq, inArray, lte, sql } from "drizzle-orm";
import type { Db } from "./db/client";
import { leases } from "./db/schema";

export type LeaseRow = typeof leases.$inferSelect;

export async function insertLease(db: Db, row: LeaseRow): Promise<void> {
  await db.insert(leases).values(row);
}

export async function getLease(db: Db, namespaceId: string, id: string): Promise<LeaseRow | null> {
  const rows = await db
    .select()
    .from(leases)
    .where(and(eq(leases.namespaceId, namespaceId), eq(leases.id, id)))
    .limit(1);
  return rows[0] ?? null;
}

/** Leases of a namespace whose id starts with `prefix` (compared as text, not as a LIKE pattern). */
export async function leasesUnder(db: Db, namespaceId: string, prefix: string): Promise<LeaseRow[]> {
  return db
    .select()
    .from(leases)
    .where(and(eq(leases.namespaceId, namespaceId), sql`substr(${leases.id}, 1, ${prefix.length}) = ${prefix}`))
    .orderBy(asc(leases.id));
}

export async function deleteLease(db: Db, namespaceId: string, id: string): Promise<void> {
  await db.delete(leases).where(and(eq(leases.namespaceId, namespaceId), eq(leases.id, id)));
}

/** Leases that expired at or before `now`, oldest first (the expiry job's batch). */
export async function expiredLeases(db: Db, now: number, limit: number): Promise<LeaseRow[]> {
  return db.select().from(leases).where(lte(leases.expireTime, now)).orderBy(asc(leases.expireTime)).limit(limit);
}

/** Every lease of a mount that is being disabled (idempotent). */
export async function deleteMountLeases(db: Db, mountId: string): Promise<void> {
  await db.delete(leases).where(eq(leases.mountId, mountId));
}

/** Every lease left in namespaces that are being deleted (idempotent). */
export async function deleteNamespaceLeases(db: Db, namespaceIds: string[]): Promise<void> {
  if (namespaceIds.length === 0) return;
  await db.delete(leases).where(inArray(leases.namespaceId, namespaceIds));
}

/** sys/metrics: unexpired leases per namespace id, one GROUP BY. */
export async function liveLeaseCounts(db: Db, now: number): Promise<{ namespaceId: string; n: number }[]> {
  return db
    .select({ namespaceId: leases.namespaceId, n: sql<number>`count(*)` })
    .from(leases)
    .where(sql`${leases.expireTime} > ${now}`)
    .groupBy(leases.namespaceId);
}
