/**
 * Storage of AppRole SecretIDs: the only module that touches the `approle_secret_ids` table
 * (src/core/db/schema/auth.ts). Vault keeps a SecretID under an HMAC of it (approle
 * validation.go `createHMAC`); here the row's key is SHA-256 of the mount id, the role name and
 * the SecretID, so the SecretID itself is stored nowhere and a SecretID of one role or mount
 * never matches another's. SecretIDs are random UUIDs (122 bits) unless an operator supplies a
 * custom one, so an unkeyed hash is enough.
 *
 * A SecretID is found by its hash through the primary key, as tokens are (src/auth/token-store.ts):
 * the secret is never compared byte by byte, so there is no comparison whose timing could leak it.
 *
 * Use limits: a SecretID with `num_uses > 0` is spent by ONE conditional UPDATE
 * (`uses_left = uses_left - 1 … WHERE uses_left > 0 RETURNING`) and deleted by the same D1 batch
 * (a transaction) when that use was its last. Two concurrent logins can never both see the last use,
 * which a read-then-write could allow. Vault does the same under a per-SecretID write lock
 * (path_login.go).
 */
import { and, asc, eq, gt, lte, or, sql } from "drizzle-orm";
import type { Db } from "../../../core/db/client";
import { approleSecretIds } from "../../../core/db/schema";
import { sha256Hex } from "../../../core/encoding";

/** A stored SecretID, as lookups show it. Times are Unix milliseconds; 0 = never expires. */
export interface SecretIdEntry {
  roleName: string;
  accessor: string;
  metadata: Record<string, string>;
  cidrList: string[];
  tokenBoundCidrs: string[];
  /** The limit it was generated with; 0 = unlimited. */
  numUses: number;
  /** Uses left when numUses > 0. */
  usesLeft: number;
  /** Seconds, as generated (after the mount's max TTL cap); 0 = no expiry. */
  ttl: number;
  creationTime: number;
  expirationTime: number;
  lastUpdatedTime: number;
}

/** What a new SecretID is stored with (the SecretID itself is passed apart and only hashed). */
export interface NewSecretId {
  accessor: string;
  metadata: Record<string, string>;
  cidrList: string[];
  tokenBoundCidrs: string[];
  numUses: number;
  ttl: number;
  now: number;
}

/** Whose SecretIDs: a role of a mount, and the role's salt. */
export interface SecretIdScope {
  mountId: string;
  roleName: string;
  salt: string;
}

/**
 * The row key of a SecretID. NUL separates the parts: mount ids and salts are UUIDs and role
 * names are `\w`, `.` and `-` only, so no two different inputs run together.
 */
function secretIdHash(scope: SecretIdScope, secretId: string): Promise<string> {
  return sha256Hex(`${scope.mountId}\u0000${scope.roleName}\u0000${scope.salt}\u0000${secretId}`);
}

type Row = typeof approleSecretIds.$inferSelect;

function entryOf(row: Row): SecretIdEntry {
  return {
    roleName: row.roleName,
    accessor: row.accessor,
    metadata: row.metadata,
    cidrList: row.cidrList,
    tokenBoundCidrs: row.tokenBoundCidrs,
    numUses: row.numUses,
    usesLeft: row.usesLeft,
    ttl: row.ttl,
    creationTime: row.creationTime,
    expirationTime: row.expirationTime,
    lastUpdatedTime: row.lastUpdatedTime,
  };
}

/**
 * Stores a new SecretID. False when this role already has it (a custom SecretID given twice;
 * Vault: "SecretID is already registered").
 */
export async function insertSecretId(db: Db, scope: SecretIdScope, secretId: string, e: NewSecretId): Promise<boolean> {
  const hash = await secretIdHash(scope, secretId);
  const rows = await db
    .insert(approleSecretIds)
    .values({
      mountId: scope.mountId,
      roleName: scope.roleName,
      hash,
      accessor: e.accessor,
      metadata: e.metadata,
      cidrList: e.cidrList,
      tokenBoundCidrs: e.tokenBoundCidrs,
      numUses: e.numUses,
      usesLeft: e.numUses,
      ttl: e.ttl,
      creationTime: e.now,
      expirationTime: e.ttl > 0 ? e.now + e.ttl * 1000 : 0,
      lastUpdatedTime: e.now,
    })
    .onConflictDoNothing()
    .returning({ accessor: approleSecretIds.accessor });
  return rows.length === 1;
}

/** A role's SecretID by its value (lookup); expired ones are still shown until tidied, as in Vault. */
export async function findSecretId(db: Db, scope: SecretIdScope, secretId: string): Promise<SecretIdEntry | null> {
  const hash = await secretIdHash(scope, secretId);
  const rows = await db
    .select()
    .from(approleSecretIds)
    .where(and(eq(approleSecretIds.mountId, scope.mountId), eq(approleSecretIds.hash, hash)));
  const row = rows[0];
  return row ? entryOf(row) : null;
}

export async function findSecretIdByAccessor(db: Db, mountId: string, roleName: string, accessor: string): Promise<SecretIdEntry | null> {
  const rows = await db
    .select()
    .from(approleSecretIds)
    .where(and(eq(approleSecretIds.mountId, mountId), eq(approleSecretIds.accessor, accessor), eq(approleSecretIds.roleName, roleName)));
  const row = rows[0];
  return row ? entryOf(row) : null;
}

/** The accessors of a role's SecretIDs, sorted. */
export async function listSecretIdAccessors(db: Db, mountId: string, roleName: string): Promise<string[]> {
  const rows = await db
    .select({ accessor: approleSecretIds.accessor })
    .from(approleSecretIds)
    .where(and(eq(approleSecretIds.mountId, mountId), eq(approleSecretIds.roleName, roleName)))
    .orderBy(asc(approleSecretIds.accessor));
  return rows.map((r) => r.accessor);
}

/** Deletes a role's SecretID by its value; false when there was none. */
export async function deleteSecretId(db: Db, scope: SecretIdScope, secretId: string): Promise<boolean> {
  const hash = await secretIdHash(scope, secretId);
  const rows = await db
    .delete(approleSecretIds)
    .where(and(eq(approleSecretIds.mountId, scope.mountId), eq(approleSecretIds.hash, hash)))
    .returning({ accessor: approleSecretIds.accessor });
  return rows.length > 0;
}

/** Deletes a role's SecretID by its accessor; false when there was none. */
export async function deleteSecretIdByAccessor(db: Db, mountId: string, roleName: string, accessor: string): Promise<boolean> {
  const rows = await db
    .delete(approleSecretIds)
    .where(and(eq(approleSecretIds.mountId, mountId), eq(approleSecretIds.accessor, accessor), eq(approleSecretIds.roleName, roleName)))
    .returning({ accessor: approleSecretIds.accessor });
  return rows.length > 0;
}

/**
 * Spends one use of a SecretID at login and returns it, or null when it does not exist, has
 * expired or has no use left. Expiry is checked strictly here (Vault only drops expired
 * SecretIDs in its periodic tidy, so one works up to ~1 min past its expiration_time).
 *
 * One UPDATE decides: it matches only a live SecretID with a use left (or no limit), takes the
 * use in the same statement and returns the row as it is after. A finite SecretID whose last
 * use this was is deleted by the second statement of the same batch. An unlimited one is matched
 * by the same statement and left unchanged (CASE), so there is no read before the write at all.
 */
export async function spendSecretId(db: Db, scope: SecretIdScope, secretId: string, now: number): Promise<SecretIdEntry | null> {
  const hash = await secretIdHash(scope, secretId);
  const t = approleSecretIds;
  const key = and(eq(t.mountId, scope.mountId), eq(t.hash, hash));
  const [spent] = await db.batch([
    db
      .update(t)
      .set({
        usesLeft: sql`CASE WHEN ${t.numUses} > 0 THEN ${t.usesLeft} - 1 ELSE ${t.usesLeft} END`,
        lastUpdatedTime: sql`CASE WHEN ${t.numUses} > 0 THEN ${now} ELSE ${t.lastUpdatedTime} END`,
      })
      .where(and(key, or(eq(t.numUses, 0), gt(t.usesLeft, 0)), or(eq(t.expirationTime, 0), gt(t.expirationTime, now))))
      .returning(),
    db.delete(t).where(and(key, gt(t.numUses, 0), lte(t.usesLeft, 0))),
  ]);
  const row = spent[0];
  return row ? entryOf(row) : null;
}

/** Deletes the mount's expired SecretIDs (tidy/secret-id); returns how many went. */
export async function deleteExpiredSecretIds(db: Db, mountId: string, now: number): Promise<number> {
  const t = approleSecretIds;
  const rows = await db
    .delete(t)
    .where(and(eq(t.mountId, mountId), gt(t.expirationTime, 0), lte(t.expirationTime, now)))
    .returning({ accessor: t.accessor });
  return rows.length;
}

/**
 * Deletes expired SecretIDs of every mount, for a scheduled job (Vault tidies every minute);
 * at most `limit` rows per call so one run stays within a Worker's limits.
 */
export async function deleteExpiredSecretIdsEverywhere(db: Db, now: number, limit = 1000): Promise<number> {
  const res = await db.run(sql`
    DELETE FROM approle_secret_ids WHERE rowid IN (
      SELECT rowid FROM approle_secret_ids WHERE expiration_time > 0 AND expiration_time <= ${now} LIMIT ${limit}
    )`);
  return res.meta.changes ?? 0;
}

/** Deletes every SecretID of a role (the role is being deleted). */
export async function deleteRoleSecretIds(db: Db, mountId: string, roleName: string): Promise<void> {
  await db.delete(approleSecretIds).where(and(eq(approleSecretIds.mountId, mountId), eq(approleSecretIds.roleName, roleName)));
}

/** Deletes every SecretID of an auth mount (the mount is being disabled; AuthMethod.purge). */
export async function deleteMountSecretIds(db: Db, mountId: string): Promise<void> {
  await db.delete(approleSecretIds).where(eq(approleSecretIds.mountId, mountId));
}
