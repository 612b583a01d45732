/**
 * Reads of certificate metadata (the sealed pki_certs.metadata column, src/engines/pki/issuance/cert-metadata.ts).
 * Metadata is written with its certificate by store.ts's insertCertStmt; this module only reads.
 */
import { and, asc, eq, isNotNull } from "drizzle-orm";
import type { Db } from "../../../core/db/client";
import { pkiCerts } from "../../../core/db/schema";
import { idOf, noOf } from "./cert-keys";
import { certKey } from "./store";

export interface MetadataRow {
  serial: string;
  issuerId: string;
  notAfter: number;
  metadata: string;
}

/** Serials of the mount's certificates that carry metadata, sorted. */
export async function listMetadataSerials(db: Db, mountId: string): Promise<string[]> {
  const rows = await db
    .select({ serial: pkiCerts.serial })
    .from(pkiCerts)
    .where(and(eq(pkiCerts.mountNo, noOf(mountId)), isNotNull(pkiCerts.metadata)))
    .orderBy(asc(pkiCerts.serial));
  return rows.map((r) => r.serial);
}

export async function getMetadataRow(db: Db, mountId: string, serial: string): Promise<MetadataRow | null> {
  const rows = await db
    .select({ serial: pkiCerts.serial, issuerId: idOf(pkiCerts.issuerNo), notAfter: pkiCerts.notAfter, metadata: pkiCerts.metadata })
    .from(pkiCerts)
    .where(certKey(mountId, serial));
  const r = rows[0];
  if (!r || r.metadata === null) return null;
  return { serial: r.serial, issuerId: r.issuerId, notAfter: r.notAfter, metadata: r.metadata };
}
