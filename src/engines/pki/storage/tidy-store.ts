/**
 * Tidy's storage (Vault API /pki/tidy): paged scans and bulk deletes over pki_certs and
 * pki_revoked, the stored-certificate counts of tidy-status, and the list of mounts with
 * auto-tidy enabled. Kept apart from store.ts / revocation-store.ts (which own the single-row
 * reads and writes of those tables) because only the tidy job needs these bulk forms.
 *
 * D1 allows at most 100 bound parameters per statement, so deletes by serial go in chunks; every
 * delete RETURNs what it removed, so the job counts rows that really went (a retried step never
 * counts a row twice).
 */
import { and, asc, count, eq, gt, inArray, sql } from "drizzle-orm";
import type { Db } from "../../../core/db/client";
import { mounts, pkiCerts, pkiConfig, pkiRevoked } from "../../../core/db/schema";
import type { MountRow } from "../../../core/mount-store";
import type { AutoTidyConfig } from "../defaults";
import { decodeConfig } from "./decode";
import { deleteBodies } from "./cert-bodies";
import { noOf } from "./cert-keys";

const CHUNK = 90;

export interface CertPageRow {
  serial: string;
  der: string;
  /** Unix seconds. */
  notAfter: number;
  revoked: boolean;
}

/**
 * Stored certificates after `afterSerial` (a stored serial, or "" for the first page), in serial
 * order, with whether each has a revocation entry. pki_revoked keeps colon hex and pki_certs
 * octets, so the entries are looked up for the page's serials (one statement, its index) rather
 * than joined row by row.
 */
export async function listCertsPage(db: Db, mountId: string, afterSerial: string, limit: number): Promise<CertPageRow[]> {
  const mount = eq(pkiCerts.mountNo, noOf(mountId));
  const rows = await db
    .select({ serial: pkiCerts.serial, der: pkiCerts.der, notAfter: pkiCerts.notAfter })
    .from(pkiCerts)
    .where(afterSerial ? and(mount, gt(pkiCerts.serial, afterSerial)) : mount)
    .orderBy(asc(pkiCerts.serial))
    .limit(limit);
  if (rows.length === 0) return [];
  const revoked = await db
    .select({ serial: pkiRevoked.serial })
    .from(pkiRevoked)
    .where(and(eq(pkiRevoked.mountId, mountId), inArray(pkiRevoked.serial, sql`(SELECT value FROM json_each(${JSON.stringify(rows.map((r) => r.serial))}))`)));
  const isRevoked = new Set(revoked.map((r) => r.serial));
  return rows.map((r) => ({ serial: r.serial, der: r.der, notAfter: r.notAfter, revoked: isRevoked.has(r.serial) }));
}

export interface RevokedPageRow {
  id: number;
  serial: string;
  issuerId: string;
  /** Unix seconds. */
  notAfter: number;
  der: string;
}

/** Revocation entries after sequence id `afterId`, in sequence order. */
export function listRevokedPage(db: Db, mountId: string, afterId: number, limit: number): Promise<RevokedPageRow[]> {
  return db
    .select({ id: pkiRevoked.id, serial: pkiRevoked.serial, issuerId: pkiRevoked.issuerId, notAfter: pkiRevoked.notAfter, der: pkiRevoked.der })
    .from(pkiRevoked)
    .where(and(eq(pkiRevoked.mountId, mountId), gt(pkiRevoked.id, afterId)))
    .orderBy(asc(pkiRevoked.id))
    .limit(limit);
}

function chunks<T>(xs: T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < xs.length; i += CHUNK) out.push(xs.slice(i, i + CHUNK));
  return out;
}

/**
 * Deletes stored certificates and revocation entries by serial, in one D1 batch (all or
 * nothing), then the R2 bodies of the certificate rows that went (cert-bodies.ts: rows first, so
 * no row is left without its body; a body left by a failure here is an orphan, never read);
 * returns how many rows of each really went.
 */
export async function deleteBySerial(
  db: Db,
  bodies: R2Bucket,
  mountId: string,
  certSerials: string[],
  revokedSerials: string[],
): Promise<{ certs: number; revoked: number }> {
  const certStmts = chunks(certSerials).map((c) =>
    db
      .delete(pkiCerts)
      .where(and(eq(pkiCerts.mountNo, noOf(mountId)), inArray(pkiCerts.serial, c)))
      .returning({ serial: pkiCerts.serial }),
  );
  const revokedStmts = chunks(revokedSerials).map((c) =>
    db
      .delete(pkiRevoked)
      .where(and(eq(pkiRevoked.mountId, mountId), inArray(pkiRevoked.serial, c)))
      .returning({ serial: pkiRevoked.serial }),
  );
  const all = [...certStmts, ...revokedStmts];
  const [first, ...rest] = all;
  if (!first) return { certs: 0, revoked: 0 };
  const results = await db.batch([first, ...rest]);
  const goneCerts: string[] = [];
  let revoked = 0;
  results.forEach((r, i) => {
    if (i < certStmts.length) goneCerts.push(...r.map((x) => x.serial));
    else revoked += r.length;
  });
  await deleteBodies(bodies, mountId, goneCerts);
  return { certs: goneCerts.length, revoked };
}

/**
 * Re-points revocation entries at their (re)computed issuer ("" when none verifies), in one
 * batch of one UPDATE per issuer and chunk of serials: a page whose every entry moves costs
 * about pageSize / CHUNK statements, not one per entry (the 1,000 D1 queries of one invocation).
 */
export async function setRevokedIssuers(db: Db, mountId: string, updates: { serial: string; issuerId: string }[]): Promise<void> {
  const byIssuer = new Map<string, string[]>();
  for (const u of updates) {
    const serials = byIssuer.get(u.issuerId);
    if (serials) serials.push(u.serial);
    else byIssuer.set(u.issuerId, [u.serial]);
  }
  const stmts = [...byIssuer].flatMap(([issuerId, serials]) =>
    chunks(serials).map((c) => db.update(pkiRevoked).set({ issuerId }).where(and(eq(pkiRevoked.mountId, mountId), inArray(pkiRevoked.serial, c)))),
  );
  const [first, ...rest] = stmts;
  if (first) await db.batch([first, ...rest]);
}

/** Current numbers of stored certificates and revocation entries (tidy-status counts). */
export async function countStored(db: Db, mountId: string): Promise<{ certs: number; revoked: number }> {
  const [c, r] = await db.batch([
    db.select({ n: count() }).from(pkiCerts).where(eq(pkiCerts.mountNo, noOf(mountId))),
    db.select({ n: count() }).from(pkiRevoked).where(eq(pkiRevoked.mountId, mountId)),
  ]);
  return { certs: c[0]?.n ?? 0, revoked: r[0]?.n ?? 0 };
}

/** Every PKI mount (all namespaces) whose stored auto-tidy configuration is enabled. */
export async function listAutoTidyMounts(db: Db): Promise<{ mount: MountRow; config: AutoTidyConfig }[]> {
  const rows = await db
    .select({ mount: mounts, value: pkiConfig.value })
    .from(pkiConfig)
    .innerJoin(mounts, eq(mounts.id, pkiConfig.mountId))
    .where(and(eq(pkiConfig.name, "auto_tidy"), eq(mounts.type, "pki")));
  return rows
    .map((r) => ({ mount: r.mount, config: decodeConfig("auto_tidy", r.value) }))
    .filter((r) => r.config.enabled);
}
