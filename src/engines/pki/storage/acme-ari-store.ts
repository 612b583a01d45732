/**
 * The door to what ACME renewal information (RFC 9773; src/engines/pki/acme/ari.ts) reads and
 * writes: the facts behind one certificate's window (the certificate, its revocation, the order
 * that issued it, the mount's early-renewal marks) and the marks themselves
 * (pki_acme_renewal_marks, migration 0015).
 *
 * Concurrency: a certificate is replaced by at most one order that has not failed. The partial
 * unique index pki_acme_orders_replaces holds it under concurrent new-orders (the second insert
 * fails); an order that failed gives its claim up by a conditional UPDATE that only matches while
 * it still holds it. Marks are one upsert each; every write here calls `invalidate("pki")` so the
 * isolate that wrote serves the new window at once (docs/architecture.md "The read model").
 */
import { and, desc, eq } from "drizzle-orm";
import type { Db } from "../../../core/db/client";
import { invalidate } from "../../../core/read-cache";
import { pkiAcmeConfig, pkiAcmeOrders, pkiAcmeRenewalMarks, pkiCerts, pkiRevoked } from "../../../core/db/schema";
import { idOf } from "./cert-keys";
import { certKey } from "./store";
import type { AcmeOrderRow } from "./acme-store";

export type RenewalMarkRow = typeof pkiAcmeRenewalMarks.$inferSelect;

export interface RenewalFacts {
  acmeConfig: unknown;
  /** notBefore/notAfter in Unix seconds; notBefore null on rows the inventory backfill has not reached. */
  cert: { der: string; issuerId: string; createdAt: number; notBefore: number | null; notAfter: number } | null;
  revoked: boolean;
  /** The role of the ACME order that issued the certificate, null when ACME did not. */
  orderRole: string | null;
  marks: RenewalMarkRow[];
}

/** Everything one window depends on, in one round trip. */
export async function renewalFacts(db: Db, mountId: string, serial: string): Promise<RenewalFacts> {
  const [config, certs, revoked, orders, marks] = await db.batch([
    db.select({ value: pkiAcmeConfig.value }).from(pkiAcmeConfig).where(eq(pkiAcmeConfig.mountId, mountId)),
    db.select({ der: pkiCerts.der, issuerId: idOf(pkiCerts.issuerNo), createdAt: pkiCerts.createdAt, notBefore: pkiCerts.notBefore, notAfter: pkiCerts.notAfter }).from(pkiCerts).where(certKey(mountId, serial)),
    db.select({ serial: pkiRevoked.serial }).from(pkiRevoked).where(and(eq(pkiRevoked.mountId, mountId), eq(pkiRevoked.serial, serial))),
    db.select({ role: pkiAcmeOrders.role }).from(pkiAcmeOrders).where(and(eq(pkiAcmeOrders.mountId, mountId), eq(pkiAcmeOrders.certSerial, serial))),
    db.select().from(pkiAcmeRenewalMarks).where(eq(pkiAcmeRenewalMarks.mountId, mountId)),
  ]);
  return { acmeConfig: config[0]?.value, cert: certs[0] ?? null, revoked: revoked.length > 0, orderRole: orders[0]?.role ?? null, marks };
}

/** The order that currently claims to replace a certificate, if any. */
export async function orderReplacing(db: Db, mountId: string, certId: string): Promise<AcmeOrderRow | null> {
  const rows = await db.select().from(pkiAcmeOrders).where(and(eq(pkiAcmeOrders.mountId, mountId), eq(pkiAcmeOrders.replaces, certId)));
  return rows[0] ?? null;
}

/** A failed order gives up its claim on the certificate it meant to replace. */
export async function releaseReplacement(db: Db, mountId: string, orderId: string, certId: string): Promise<void> {
  await db
    .update(pkiAcmeOrders)
    .set({ replaces: "" })
    .where(and(eq(pkiAcmeOrders.mountId, mountId), eq(pkiAcmeOrders.id, orderId), eq(pkiAcmeOrders.replaces, certId)));
}

/** Whether an error is the unique index refusing a second replacing order. */
export function isReplacementConflict(e: unknown): boolean {
  const text = e instanceof Error ? `${e.message} ${e.cause instanceof Error ? e.cause.message : ""}` : String(e);
  return /UNIQUE constraint failed: pki_acme_orders\.mount_id, pki_acme_orders\.replaces/.test(text);
}

export async function putRenewalMark(db: Db, row: RenewalMarkRow): Promise<void> {
  await db
    .insert(pkiAcmeRenewalMarks)
    .values(row)
    .onConflictDoUpdate({ target: [pkiAcmeRenewalMarks.mountId, pkiAcmeRenewalMarks.kind, pkiAcmeRenewalMarks.ref], set: { explanationUrl: row.explanationUrl, markedAt: row.markedAt } });
  invalidate("pki");
}

export async function listRenewalMarks(db: Db, mountId: string): Promise<RenewalMarkRow[]> {
  return db.select().from(pkiAcmeRenewalMarks).where(eq(pkiAcmeRenewalMarks.mountId, mountId)).orderBy(desc(pkiAcmeRenewalMarks.markedAt));
}

export async function deleteRenewalMark(db: Db, mountId: string, kind: string, ref: string): Promise<boolean> {
  const rows = await db
    .delete(pkiAcmeRenewalMarks)
    .where(and(eq(pkiAcmeRenewalMarks.mountId, mountId), eq(pkiAcmeRenewalMarks.kind, kind), eq(pkiAcmeRenewalMarks.ref, ref)))
    .returning({ ref: pkiAcmeRenewalMarks.ref });
  invalidate("pki");
  return rows.length === 1;
}

