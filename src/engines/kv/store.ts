/**
 * Storage of the KV-v2 engine: the only module that touches kv_config, kv_metadata and
 * kv_versions.
 *
 * CAS INVARIANT. A key's versions form one gap-free sequence and kv_metadata.current_version is
 * always the newest row in kv_versions. Writing version N+1 is one D1 batch (one implicit
 * transaction; D1 has no interactive transactions) of three statements:
 *   1. insert version N+1 only if the key's current_version is still N (missing metadata = 0);
 *   2. upsert the metadata's current_version to N+1 only if step 1 inserted *our* row;
 *   3. prune versions below the new oldest_version, again only if our row is there.
 * "Our row" is recognised by its sealed data, which is unique (random IV per seal). So a writer
 * that read a stale N changes nothing at all: neither a concurrent writer of N+1 nor a metadata
 * delete in between can be overwritten, and the primary key (mount_id, path, version) stays as
 * the last guard (a duplicate N+1 fails with UNIQUE and the whole batch rolls back). Callers get
 * `conflict` and decide: a cas write answers 400, a plain write re-reads and retries.
 */
import { and, eq, inArray, sql, type SQL } from "drizzle-orm";
import type { Db } from "../../core/db/client";
import { kvConfig, kvMetadata, kvVersions } from "../../core/db/schema";
import { seal, unseal, type SealKeys } from "../../core/db/seal";
import { DEFAULT_SETTINGS, type JsonObject, type KeyMetadata, type KvSettings, type VersionInfo } from "./service";

export interface StoredVersion extends VersionInfo {
  /** Null once destroyed. */
  sealedData: string | null;
}

/** Binds sealed data to its row, so a value copied to another key or version does not open. */
const sealContext = (mountId: string, path: string, version: number): string => `kv:${mountId}:${path}:${version}`;

export async function getConfig(db: Db, mountId: string): Promise<KvSettings> {
  const rows = await db.select().from(kvConfig).where(eq(kvConfig.mountId, mountId));
  const r = rows[0];
  return r ? { maxVersions: r.maxVersions, casRequired: r.casRequired, deleteVersionAfter: r.deleteVersionAfter } : { ...DEFAULT_SETTINGS };
}

export async function putConfig(db: Db, mountId: string, c: KvSettings): Promise<void> {
  await db
    .insert(kvConfig)
    .values({ mountId, ...c })
    .onConflictDoUpdate({ target: kvConfig.mountId, set: { ...c } });
}

/** The columns of kv_metadata as D1 returns them (raw SQL on the hot paths: cheaper than Drizzle's mapping). */
interface MetadataRow {
  path: string;
  current_version: number;
  oldest_version: number;
  max_versions: number;
  cas_required: number;
  delete_version_after: number;
  custom_metadata: string;
  created_time: number;
  updated_time: number;
}

const METADATA_COLUMNS = "path, current_version, oldest_version, max_versions, cas_required, delete_version_after, custom_metadata, created_time, updated_time";

const METADATA_COLUMNS_OF_M = METADATA_COLUMNS.split(", ")
  .map((c) => `m.${c}`)
  .join(", ");

function metaOfRow(r: MetadataRow): KeyMetadata {
  const custom: unknown = JSON.parse(r.custom_metadata);
  return {
    path: r.path,
    currentVersion: r.current_version,
    oldestVersion: r.oldest_version,
    maxVersions: r.max_versions,
    casRequired: Boolean(r.cas_required),
    deleteVersionAfter: r.delete_version_after,
    customMetadata: typeof custom === "object" && custom !== null ? (custom as Record<string, string>) : {},
    createdTime: r.created_time,
    updatedTime: r.updated_time,
  };
}

/** A mount's settings and a key's metadata, in one D1 round trip (every write reads both). */
export async function getConfigAndMetadata(db: Db, mountId: string, path: string): Promise<{ config: KvSettings; meta: KeyMetadata | null }> {
  const d1 = db.$client;
  const [configRows, metaRows] = await d1.batch([
    d1.prepare("SELECT max_versions, cas_required, delete_version_after FROM kv_config WHERE mount_id = ?").bind(mountId),
    d1.prepare(`SELECT ${METADATA_COLUMNS} FROM kv_metadata WHERE mount_id = ? AND path = ?`).bind(mountId, path),
  ]);
  const c = configRows?.results[0] as { max_versions: number; cas_required: number; delete_version_after: number } | undefined;
  const m = metaRows?.results[0] as MetadataRow | undefined;
  return {
    config: c ? { maxVersions: c.max_versions, casRequired: Boolean(c.cas_required), deleteVersionAfter: c.delete_version_after } : { ...DEFAULT_SETTINGS },
    meta: m ? metaOfRow(m) : null,
  };
}

export async function getMetadata(db: Db, mountId: string, path: string): Promise<KeyMetadata | null> {
  const r = await db.$client.prepare(`SELECT ${METADATA_COLUMNS} FROM kv_metadata WHERE mount_id = ? AND path = ?`).bind(mountId, path).first<MetadataRow>();
  return r ? metaOfRow(r) : null;
}

/** The version columns `getMetadataAndVersion` joins onto the metadata (null: no such version). */
interface VersionColumns {
  v_version: number | null;
  v_sealed_data: string | null;
  v_created_time: number | null;
  v_deletion_time: number | null;
  v_destroyed: number | null;
}

/**
 * A key's metadata and one of its versions (`requested`, or the current one when 0) in one
 * D1 round trip: every read of a secret needs both. `version` is null when that
 * version does not exist; the whole answer null when the key has no metadata.
 */
export async function getMetadataAndVersion(
  db: Db,
  mountId: string,
  path: string,
  requested: number,
): Promise<{ meta: KeyMetadata; version: StoredVersion | null } | null> {
  const r = await db.$client
    .prepare(
      `SELECT ${METADATA_COLUMNS_OF_M},
              v.version AS v_version, v.sealed_data AS v_sealed_data, v.created_time AS v_created_time,
              v.deletion_time AS v_deletion_time, v.destroyed AS v_destroyed
       FROM kv_metadata m
       LEFT JOIN kv_versions v ON v.mount_id = m.mount_id AND v.path = m.path
         AND v.version = (CASE WHEN ? > 0 THEN ? ELSE m.current_version END)
       WHERE m.mount_id = ? AND m.path = ?`,
    )
    .bind(requested, requested, mountId, path)
    .first<MetadataRow & VersionColumns>();
  if (!r) return null;
  const meta = metaOfRow(r);
  const version: StoredVersion | null =
    r.v_version === null
      ? null
      : { version: r.v_version, createdTime: r.v_created_time ?? 0, deletionTime: r.v_deletion_time, destroyed: Boolean(r.v_destroyed), sealedData: r.v_sealed_data };
  return { meta, version };
}

/** A key's metadata and its version rows (oldest first, without their data) in one D1 round trip; null without metadata. */
export async function getMetadataAndVersions(db: Db, mountId: string, path: string): Promise<{ meta: KeyMetadata; versions: VersionInfo[] } | null> {
  const d1 = db.$client;
  const [metaRows, versionRows] = await d1.batch([
    d1.prepare(`SELECT ${METADATA_COLUMNS} FROM kv_metadata WHERE mount_id = ? AND path = ?`).bind(mountId, path),
    versionsStatement(db, mountId, path),
  ]);
  const m = metaRows?.results[0] as MetadataRow | undefined;
  if (!m) return null;
  return { meta: metaOfRow(m), versions: versionInfosOf(versionRows) };
}

const versionsStatement = (db: Db, mountId: string, path: string): D1PreparedStatement =>
  db.$client.prepare("SELECT version, created_time, deletion_time, destroyed FROM kv_versions WHERE mount_id = ? AND path = ? ORDER BY version").bind(mountId, path);

function versionInfosOf(result: D1Result<unknown> | undefined): VersionInfo[] {
  return ((result?.results ?? []) as { version: number; created_time: number; deletion_time: number | null; destroyed: number }[]).map((v) => ({
    version: v.version,
    createdTime: v.created_time,
    deletionTime: v.deletion_time,
    destroyed: Boolean(v.destroyed),
  }));
}

/** The version rows of a key, oldest first, without their data. */
export async function listVersions(db: Db, mountId: string, path: string): Promise<VersionInfo[]> {
  return versionInfosOf(await versionsStatement(db, mountId, path).all());
}

export async function getVersion(db: Db, mountId: string, path: string, version: number): Promise<StoredVersion | null> {
  const rows = await db
    .select()
    .from(kvVersions)
    .where(and(eq(kvVersions.mountId, mountId), eq(kvVersions.path, path), eq(kvVersions.version, version)));
  const r = rows[0];
  if (!r) return null;
  return { version: r.version, createdTime: r.createdTime, deletionTime: r.deletionTime, destroyed: r.destroyed, sealedData: r.sealedData };
}

/**
 * The statement of `currentVersionOf`: a key's current version row, found through its metadata
 * in one read (the sync engine batches it with the destination).
 */
export function currentVersionStatement(db: Db, mountId: string, path: string): D1PreparedStatement {
  return db.$client
    .prepare(
      `SELECT v.version, v.sealed_data, v.created_time, v.deletion_time, v.destroyed
       FROM kv_metadata m JOIN kv_versions v ON v.mount_id = m.mount_id AND v.path = m.path AND v.version = m.current_version
       WHERE m.mount_id = ? AND m.path = ?`,
    )
    .bind(mountId, path);
}

/** The current version read by `currentVersionStatement`; null when the key has none. */
export function currentVersionOf(result: D1Result<unknown> | undefined): StoredVersion | null {
  const r = result?.results[0] as
    | { version: number; sealed_data: string | null; created_time: number; deletion_time: number | null; destroyed: number }
    | undefined;
  if (!r) return null;
  return { version: r.version, createdTime: r.created_time, deletionTime: r.deletion_time, destroyed: Boolean(r.destroyed), sealedData: r.sealed_data };
}

/** Opens a version's data; null when it was destroyed. */
export async function openVersionData(keys: SealKeys, mountId: string, path: string, v: StoredVersion): Promise<JsonObject | null> {
  if (v.sealedData === null) return null;
  const parsed: unknown = JSON.parse(await unseal(keys, v.sealedData, sealContext(mountId, path, v.version)));
  return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as JsonObject) : {};
}

export interface WriteVersionInput {
  mountId: string;
  path: string;
  /** The current version the caller read (0 when the key does not exist). */
  expectedCurrent: number;
  data: JsonObject;
  createdTime: number;
  deletionTime: number | null;
  /** The oldest version to keep after this write; rows below it are pruned in the same batch. */
  oldestVersion: number;
}

/**
 * `extra`: the results of the caller's extra statements (./events.ts companions), in their
 * order; they ran whether or not the write won, and are empty when the batch was rolled back.
 */
export type WriteVersionResult = { ok: true; version: number; extra: D1Result<unknown>[] } | { ok: false; conflict: true; extra: D1Result<unknown>[] };

function isUniqueViolation(err: unknown): boolean {
  for (let e: unknown = err, i = 0; e instanceof Error && i < 5; e = e.cause, i++) {
    if (/UNIQUE constraint failed/i.test(e.message)) return true;
  }
  return false;
}

/**
 * Writes version expectedCurrent+1 atomically (see the CAS invariant at the top of this file).
 * `extra` statements run after the write's own in the same batch, whether or not it wins.
 */
export async function writeVersion(db: Db, keys: SealKeys, w: WriteVersionInput, extra: D1PreparedStatement[] = []): Promise<WriteVersionResult> {
  const version = w.expectedCurrent + 1;
  const sealed = await seal(keys, JSON.stringify(w.data), sealContext(w.mountId, w.path, version));
  const d1 = db.$client;
  // Raw statements: drizzle cannot batch parameterised raw SQL on D1, and these need INSERT … SELECT.
  const ours = `EXISTS (SELECT 1 FROM kv_versions WHERE mount_id = ? AND path = ? AND version = ? AND sealed_data = ?)`;
  const oursArgs = [w.mountId, w.path, version, sealed];
  try {
    const [inserted, , , ...extraResults] = await d1.batch<{ version: number }>([
      d1
        .prepare(
          `INSERT INTO kv_versions (mount_id, path, version, sealed_data, created_time, deletion_time, destroyed)
           SELECT ?, ?, ?, ?, ?, ?, 0
           WHERE coalesce((SELECT current_version FROM kv_metadata WHERE mount_id = ? AND path = ?), 0) = ?
           RETURNING version`,
        )
        .bind(w.mountId, w.path, version, sealed, w.createdTime, w.deletionTime, w.mountId, w.path, w.expectedCurrent),
      d1
        .prepare(
          `INSERT INTO kv_metadata (mount_id, path, current_version, oldest_version, max_versions, cas_required,
                                    delete_version_after, custom_metadata, created_time, updated_time)
           SELECT ?, ?, ?, ?, 0, 0, 0, '{}', ?, ?
           WHERE ${ours}
           ON CONFLICT (mount_id, path) DO UPDATE SET
             current_version = excluded.current_version,
             oldest_version = max(kv_metadata.oldest_version, excluded.oldest_version),
             updated_time = excluded.updated_time`,
        )
        .bind(w.mountId, w.path, version, w.oldestVersion, w.createdTime, w.createdTime, ...oursArgs),
      d1
        .prepare(`DELETE FROM kv_versions WHERE mount_id = ? AND path = ? AND version < ? AND ${ours}`)
        .bind(w.mountId, w.path, w.oldestVersion, ...oursArgs),
      ...extra,
    ]);
    return inserted?.results.length === 1 ? { ok: true, version, extra: extraResults } : { ok: false, conflict: true, extra: extraResults };
  } catch (err) {
    // The batch was rolled back whole: the extra statements changed nothing either.
    if (isUniqueViolation(err)) return { ok: false, conflict: true, extra: [] };
    throw err;
  }
}

/**
 * Settings and custom metadata of a key, created when missing (a key may have metadata before
 * any version). current_version and oldest_version are left alone, so this never races with
 * version writes.
 */
export async function upsertMetadataSettings(
  db: Db,
  mountId: string,
  path: string,
  s: KvSettings & { customMetadata: Record<string, string> },
  now: number,
): Promise<void> {
  await db
    .insert(kvMetadata)
    .values({ mountId, path, currentVersion: 0, oldestVersion: 0, ...s, createdTime: now, updatedTime: now })
    .onConflictDoUpdate({
      target: [kvMetadata.mountId, kvMetadata.path],
      set: {
        maxVersions: s.maxVersions,
        casRequired: s.casRequired,
        deleteVersionAfter: s.deleteVersionAfter,
        customMetadata: s.customMetadata,
        updatedTime: now,
      },
    });
}

const versionsOf = (mountId: string, path: string, versions: number[]) =>
  and(eq(kvVersions.mountId, mountId), eq(kvVersions.path, path), inArray(kvVersions.version, versions));

/**
 * Version numbers per statement: D1 binds at most 100 parameters per statement, and each
 * statement below binds up to 6 more. The list's length is bounded by the caller
 * (MAX_VERSIONS_PER_REQUEST in service.ts).
 */
const VERSIONS_PER_STATEMENT = 90;

/**
 * Runs one version-changing statement per chunk of `versions`, all in one batch (so the change
 * is all or nothing), and returns the versions changed.
 */
async function updateVersions(
  db: Db,
  versions: number[],
  stmt: (chunk: number[]) => ReturnType<typeof returningVersions>,
): Promise<number[]> {
  const [first, ...rest] = Array.from({ length: Math.ceil(versions.length / VERSIONS_PER_STATEMENT) }, (_, i) =>
    stmt(versions.slice(i * VERSIONS_PER_STATEMENT, (i + 1) * VERSIONS_PER_STATEMENT)),
  );
  if (!first) return [];
  const results = await db.batch([first, ...rest]);
  return results.flat().map((r) => r.version).sort((a, b) => a - b);
}

/** The shape every statement of updateVersions has: an UPDATE of kv_versions returning the version. */
const returningVersions = (db: Db, set: Partial<typeof kvVersions.$inferInsert>, where: SQL | undefined) =>
  db.update(kvVersions).set(set).where(where).returning({ version: kvVersions.version });

/**
 * Soft-deletes versions at `now`: destroyed versions and versions already deleted stay as they
 * are; a future delete_version_after time is brought forward. Returns the versions changed.
 */
export async function softDeleteVersions(db: Db, mountId: string, path: string, versions: number[], now: number): Promise<number[]> {
  return updateVersions(db, versions, (chunk) =>
    returningVersions(
      db,
      { deletionTime: now },
      and(
        versionsOf(mountId, path, chunk),
        eq(kvVersions.destroyed, false),
        sql`(${kvVersions.deletionTime} IS NULL OR ${kvVersions.deletionTime} > ${now})`,
      ),
    ),
  );
}

/** Clears the deletion time of versions that are not destroyed. */
export async function undeleteVersions(db: Db, mountId: string, path: string, versions: number[]): Promise<number[]> {
  return updateVersions(db, versions, (chunk) =>
    returningVersions(db, { deletionTime: null }, and(versionsOf(mountId, path, chunk), eq(kvVersions.destroyed, false))),
  );
}

/** Destroys versions: their sealed data is gone for good, the row stays as a tombstone. */
export async function destroyVersions(db: Db, mountId: string, path: string, versions: number[]): Promise<number[]> {
  return updateVersions(db, versions, (chunk) => returningVersions(db, { destroyed: true, sealedData: null }, versionsOf(mountId, path, chunk)));
}

/** Removes a key: every version and its metadata, in one batch. Returns whether it existed. */
export async function deleteKey(db: Db, mountId: string, path: string): Promise<boolean> {
  const [, meta] = await db.batch([
    db.delete(kvVersions).where(and(eq(kvVersions.mountId, mountId), eq(kvVersions.path, path))),
    db
      .delete(kvMetadata)
      .where(and(eq(kvMetadata.mountId, mountId), eq(kvMetadata.path, path)))
      .returning({ path: kvMetadata.path }),
  ]);
  return meta.length > 0;
}

/** Paths of keys under a folder prefix ("" = the whole mount). */
export async function keysUnder(db: Db, mountId: string, prefix: string): Promise<string[]> {
  const rows = await db
    .select({ path: kvMetadata.path })
    .from(kvMetadata)
    .where(and(eq(kvMetadata.mountId, mountId), sql`substr(${kvMetadata.path}, 1, length(${prefix})) = ${prefix}`));
  return rows.map((r) => r.path);
}

/** Deletes every row of a mount (the mount is being disabled). */
export async function purgeKvMount(db: Db, mountId: string): Promise<void> {
  await db.batch([
    db.delete(kvVersions).where(eq(kvVersions.mountId, mountId)),
    db.delete(kvMetadata).where(eq(kvMetadata.mountId, mountId)),
    db.delete(kvConfig).where(eq(kvConfig.mountId, mountId)),
  ]);
}
