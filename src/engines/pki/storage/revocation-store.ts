/**
 * Storage of revocations and built CRLs (pki_revoked, pki_crls, pki_crl_chunks): the only module
 * that touches those tables (tidy-store.ts pages and deletes pki_revoked for tidy). CRL rows are
 * written only by the mount's Authority Durable Object (src/engines/pki/authority/authority.ts), which
 * serializes rebuilds.
 *
 * A CRL's DER is kept as base64 in pki_crls.der when it fits one D1 value comfortably; a larger
 * one (a 100,000-entry CRL is ~5.4 MB of base64, D1 caps a value at 2 MB) goes to pki_crl_chunks
 * in CHUNK_CHARS slices with pki_crls.der = "". Writer and reader each use one D1 batch (one
 * transaction), so a reader sees either the old CRL or the new one, never slices of both.
 *
 * Cache invalidation (docs/pki-ocsp.md and docs/pki-revocation-crl.md "Caching"): the public
 * reads (OCSP, CRLs, CA) are cached per isolate in area "pki" (src/core/read-cache.ts). Every
 * write made here calls `invalidate("pki")` once it has succeeded, so the isolate that wrote sees
 * the change at once; writes run as statements elsewhere go through `runRevocationBatch`, which
 * does the same. Other isolates see them within CACHE_TTL_MS.
 */
import { and, asc, eq, gt, inArray, isNull, lte, max, min, sql } from "drizzle-orm";
import type { Db } from "../../../core/db/client";
import { mounts, pkiConfig, pkiCrlChunks, pkiCrls, pkiRevoked } from "../../../core/db/schema";
import type { MountRow } from "../../../core/mount-store";
import { generationOf, invalidate, ReadCache } from "../../../core/read-cache";
import { base64ToBytesStrict, bytesToBase64 } from "../../../core/encoding";
import type { CrlConfig } from "../defaults";
import { decodeConfig } from "./decode";
import { runBatch, type Stmt } from "./store";

/** Base64 characters per stored slice: well below D1's 2,000,000-byte value limit. */
export const CHUNK_CHARS = 1_000_000;
/** The DER bytes of one slice (3 bytes → 4 characters). */
const CHUNK_BYTES = (CHUNK_CHARS / 4) * 3;

/**
 * A CRL's base64 in stored slices, each encoded from its own part of the DER: the same slices as
 * cutting the whole base64 every CHUNK_CHARS (CHUNK_BYTES is a multiple of 3, so only the last
 * slice has padding), without holding that whole string as well (≈ 36 MiB at a million entries).
 */
export function crlBase64Slices(der: Uint8Array): string[] {
  const out: string[] = [];
  for (let i = 0; i < der.length || out.length === 0; i += CHUNK_BYTES) out.push(bytesToBase64(der.subarray(i, i + CHUNK_BYTES)));
  return out;
}

export type RevokedRow = typeof pkiRevoked.$inferSelect;
export type NewRevokedRow = typeof pkiRevoked.$inferInsert;
export type CrlRow = typeof pkiCrls.$inferSelect;

export async function getRevoked(db: Db, mountId: string, serial: string): Promise<RevokedRow | null> {
  const rows = await db.select().from(pkiRevoked).where(and(eq(pkiRevoked.mountId, mountId), eq(pkiRevoked.serial, serial)));
  return rows[0] ?? null;
}

/** What the OCSP responder needs of a revocation entry (RFC 6960 §2.2). */
export type RevocationStatus = Pick<RevokedRow, "serial" | "issuerId" | "revocationTime" | "reason">;

/**
 * Revocation status per mount and serial, per isolate (area "pki": insertRevoked and
 * runRevocationBatch clear it; other isolates' revocations show within CACHE_TTL_MS). `null`
 * records "not revoked", so a good certificate asked about again costs no D1 round trip either.
 */
const statuses = new ReadCache<RevocationStatus | null>("pki.revocationStatuses", "pki", 8192);

/**
 * The revocation entries of `serials` (absent: not revoked), reading only those not cached, in one
 * query. One bound parameter per serial stays far below D1's 100: parseOcspRequest refuses
 * requests of MAX_OCSP_REQUEST_BYTES (2048) or more, and each Request in one takes at least 60 bytes.
 */
export async function revocationStatuses(db: Db, mountId: string, serials: string[]): Promise<Map<string, RevocationStatus>> {
  const out = new Map<string, RevocationStatus>();
  const missing: string[] = [];
  for (const serial of serials) {
    const hit = statuses.get(`${mountId}\n${serial}`);
    if (hit === undefined) missing.push(serial);
    else if (hit) out.set(serial, hit);
  }
  if (missing.length === 0) return out;
  const readAt = Date.now();
  const generation = generationOf("pki");
  const rows = await db
    .select({ serial: pkiRevoked.serial, issuerId: pkiRevoked.issuerId, revocationTime: pkiRevoked.revocationTime, reason: pkiRevoked.reason })
    .from(pkiRevoked)
    .where(and(eq(pkiRevoked.mountId, mountId), inArray(pkiRevoked.serial, missing)));
  const found = new Map(rows.map((r) => [r.serial, r]));
  for (const serial of missing) {
    const row = found.get(serial) ?? null;
    statuses.set(`${mountId}\n${serial}`, row, readAt, generation);
    if (row) out.set(serial, row);
  }
  return out;
}

/**
 * Records a revocation unless the serial is already revoked (revoking twice keeps the first
 * time, as upstream does). Returns the stored row either way.
 */
export async function insertRevoked(db: Db, row: Omit<NewRevokedRow, "id">): Promise<RevokedRow> {
  const inserted = await db.insert(pkiRevoked).values(row).onConflictDoNothing().returning();
  const first = inserted[0];
  if (first) {
    // The revoking isolate's OCSP and CRL answers must show it at once (docs/pki-ocsp.md "Caching").
    invalidate("pki");
    return first;
  }
  const existing = await getRevoked(db, row.mountId, row.serial);
  if (!existing) throw new Error("revocation entry vanished while it was being written");
  return existing;
}

/** Every revocation of the mount, in sequence order. */
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

/**
 * Runs statements built here (CRL rows and slices, revocation deletes) in one batch, then forgets
 * this isolate's cached public PKI answers: the one way this module's statements are executed.
 */
export async function runRevocationBatch(db: Db, stmts: Stmt[]): Promise<void> {
  if (stmts.length === 0) return;
  await runBatch(db, stmts);
  invalidate("pki");
}

/** Removes every revocation and CRL of a mount (the mount is being disabled). */
export function purgeRevocationStmts(db: Db, mountId: string): Stmt[] {
  return [
    db.delete(pkiRevoked).where(eq(pkiRevoked.mountId, mountId)),
    db.delete(pkiCrls).where(eq(pkiCrls.mountId, mountId)),
    db.delete(pkiCrlChunks).where(eq(pkiCrlChunks.mountId, mountId)),
  ];
}

// -- revocations: reads for LIST, the CRL builder and the cron ---------------------------------

/** Colon serials of every revocation of the mount (LIST certs/revoked). */
/** Revoked serials in key order, `after` exclusive, at most `limit` (0: all); cut in SQL as `listCertSerials`. */
export async function listRevokedSerials(db: Db, mountId: string, page: { after: string; limit: number } = { after: "", limit: 0 }): Promise<string[]> {
  const where = page.after ? and(eq(pkiRevoked.mountId, mountId), gt(pkiRevoked.serial, page.after)) : eq(pkiRevoked.mountId, mountId);
  const q = db.select({ serial: pkiRevoked.serial }).from(pkiRevoked).where(where).orderBy(asc(pkiRevoked.serial));
  const rows = page.limit > 0 ? await q.limit(page.limit) : await q;
  return rows.map((r) => r.serial);
}

/** What a CRL entry needs: no certificate bytes (those would cost ~700 bytes per entry). */
export interface RevokedEntry {
  id: number;
  serial: string;
  issuerId: string;
  revocationTime: number;
  reason: number;
  /** The certificate's CRL shard; null: on the full CRL only. */
  crlShard: number | null;
}

const entryColumns = {
  id: pkiRevoked.id,
  serial: pkiRevoked.serial,
  issuerId: pkiRevoked.issuerId,
  revocationTime: pkiRevoked.revocationTime,
  reason: pkiRevoked.reason,
  crlShard: pkiRevoked.crlShard,
};

/**
 * One page of the revocations of one CRL segment with afterId < id ≤ uptoId, in sequence order:
 * `shard` null is the entries on no shard, n those of CRL shard n. Each page is one range of the
 * index pki_revoked_mount_shard (mount_id, crl_shard, id), so it costs its own rows only. A page
 * over the whole mount ordered by id has no index to walk: SQLite then reads every revocation of
 * the mount and sorts them for each page, and a build of a million paid that two hundred times
 * (docs/pki-revocation-crl.md "Performance").
 */
export function listRevokedEntriesOfShard(db: Db, mountId: string, shard: number | null, afterId: number, uptoId: number, limit: number) {
  return db
    .select(entryColumns)
    .from(pkiRevoked)
    .where(and(eq(pkiRevoked.mountId, mountId), shard === null ? isNull(pkiRevoked.crlShard) : eq(pkiRevoked.crlShard, shard), gt(pkiRevoked.id, afterId), lte(pkiRevoked.id, uptoId)))
    .orderBy(asc(pkiRevoked.id))
    .limit(limit);
}

/**
 * One page of the mount's revocations with afterId < id ≤ uptoId in sequence order, walking the
 * primary key (the unary + keeps SQLite off the mount's indexes, none of which orders by id
 * alone): a delta build's read, whose range holds only the revocations since its base, of every
 * mount, each read once.
 */
export function listRevokedEntriesSince(db: Db, mountId: string, afterId: number, uptoId: number, limit: number) {
  return db
    .select(entryColumns)
    .from(pkiRevoked)
    .where(and(sql`+${pkiRevoked.mountId} = ${mountId}`, gt(pkiRevoked.id, afterId), lte(pkiRevoked.id, uptoId)))
    .orderBy(asc(pkiRevoked.id))
    .limit(limit);
}

/** The lowest CRL shard above `after` that holds revocations of the mount (one index seek), or null. */
export async function nextRevokedShard(db: Db, mountId: string, after: number): Promise<number | null> {
  const rows = await nextRevokedShardQuery(db, mountId, after);
  return rows[0]?.s ?? null;
}

/** The query of nextRevokedShard (its plan is checked in test/integration/pki-crl-scale.test.ts). */
export const nextRevokedShardQuery = (db: Db, mountId: string, after: number) =>
  db
    .select({ s: min(pkiRevoked.crlShard) })
    .from(pkiRevoked)
    .where(and(eq(pkiRevoked.mountId, mountId), gt(pkiRevoked.crlShard, after)));

/** The highest revocation sequence number of the mount (0 when none). */
export async function maxRevokedSeq(db: Db, mountId: string): Promise<number> {
  const rows = await db.select({ m: max(pkiRevoked.id) }).from(pkiRevoked).where(eq(pkiRevoked.mountId, mountId));
  return rows[0]?.m ?? 0;
}

// -- CRLs ---------------------------------------------------------------------------------------

export type CrlKind = "complete" | "delta";

/** A stored CRL with its DER reassembled. */
export interface StoredCrl {
  row: Omit<CrlRow, "der">;
  der: Uint8Array<ArrayBuffer>;
}

/**
 * Reads a CRL and its slices in one batch (one transaction: a consistent pair). `kind` is the
 * stored kind: "complete", "delta", or a shard's "shard:<n>:<kind>" (revocation/crl-shards.ts).
 */
export async function getCrlDer(db: Db, mountId: string, issuerId: string, kind: string): Promise<StoredCrl | null> {
  const key = and(eq(pkiCrls.mountId, mountId), eq(pkiCrls.issuerId, issuerId), eq(pkiCrls.kind, kind));
  const [rows, chunks] = await db.batch([
    db.select().from(pkiCrls).where(key),
    db
      .select({ data: pkiCrlChunks.data })
      .from(pkiCrlChunks)
      .where(and(eq(pkiCrlChunks.mountId, mountId), eq(pkiCrlChunks.issuerId, issuerId), eq(pkiCrlChunks.kind, kind)))
      .orderBy(asc(pkiCrlChunks.idx)),
  ]);
  const row = rows[0];
  if (!row) return null;
  const { der: _der, ...meta } = row;
  if (row.der !== "") return { row: meta, der: base64ToBytesStrict(row.der) };
  // Slice by slice into one buffer: joining the base64 first would hold it twice (≈ 36 MiB each
  // for a million entries). Only the last slice has padding (crlBase64Slices).
  const last = chunks[chunks.length - 1]?.data ?? "";
  const pad = last.endsWith("==") ? 2 : last.endsWith("=") ? 1 : 0;
  const der = new Uint8Array((chunks.reduce((n, c) => n + c.data.length, 0) / 4) * 3 - pad);
  let o = 0;
  for (const c of chunks) {
    const part = base64ToBytesStrict(c.data);
    der.set(part, o);
    o += part.length;
  }
  return { row: meta, der };
}

/** Metadata of every stored CRL of the mount (no DER): the cron's due check. */
export function listCrlMeta(db: Db, mountId: string): Promise<Omit<CrlRow, "der">[]> {
  return db
    .select({
      mountId: pkiCrls.mountId,
      issuerId: pkiCrls.issuerId,
      kind: pkiCrls.kind,
      number: pkiCrls.number,
      maxSeq: pkiCrls.maxSeq,
      thisUpdate: pkiCrls.thisUpdate,
      nextUpdate: pkiCrls.nextUpdate,
    })
    .from(pkiCrls)
    .where(eq(pkiCrls.mountId, mountId));
}

/** Statements that replace one CRL (row and slices, from crlBase64Slices); run them in one batch. */
export function putCrlStmts(db: Db, row: Omit<CrlRow, "der">, slices: string[]): Stmt[] {
  const chunked = slices.length > 1;
  const stmts: Stmt[] = [
    db.delete(pkiCrlChunks).where(and(eq(pkiCrlChunks.mountId, row.mountId), eq(pkiCrlChunks.issuerId, row.issuerId), eq(pkiCrlChunks.kind, row.kind))),
  ];
  if (chunked) {
    slices.forEach((data, idx) => stmts.push(db.insert(pkiCrlChunks).values({ mountId: row.mountId, issuerId: row.issuerId, kind: row.kind, idx, data })));
  }
  stmts.push(putCrlStmt(db, { ...row, der: chunked ? "" : (slices[0] ?? "") }));
  return stmts;
}

/**
 * Removes the CRLs of issuers that no longer have one (deleted, keyless, or lacking crl-signing).
 * The ids to keep travel as one JSON array parameter: a list of bound parameters broke with 100
 * issuers in a mount, D1's limit per statement.
 */
export function deleteCrlsExceptStmts(db: Db, mountId: string, keepIssuerIds: string[]): Stmt[] {
  const keep = JSON.stringify(keepIssuerIds);
  return [
    db.delete(pkiCrls).where(and(eq(pkiCrls.mountId, mountId), sql`${pkiCrls.issuerId} NOT IN (SELECT value FROM json_each(${keep}))`)),
    db.delete(pkiCrlChunks).where(and(eq(pkiCrlChunks.mountId, mountId), sql`${pkiCrlChunks.issuerId} NOT IN (SELECT value FROM json_each(${keep}))`)),
  ];
}

/** PKI mounts whose config/crl has auto_rebuild (the cron's work list), with that config. */
export async function listAutoRebuildMounts(db: Db): Promise<{ mount: MountRow; config: CrlConfig }[]> {
  const rows = await db
    .select({ mount: mounts, value: pkiConfig.value })
    .from(pkiConfig)
    .innerJoin(mounts, eq(mounts.id, pkiConfig.mountId))
    .where(and(eq(pkiConfig.name, "crl"), eq(mounts.type, "pki"), sql`json_extract(${pkiConfig.value}, '$.auto_rebuild') = 1`));
  return rows.map((r) => ({ mount: r.mount, config: decodeConfig("crl", r.value) })).filter((r) => r.config.auto_rebuild);
}
