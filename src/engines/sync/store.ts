/**
 * Storage of secrets sync: with ./association-store.ts (which owns sync_associations), the only
 * module that touches the sync_* tables (src/core/db/schema/sync.ts).
 * Sensitive connection members and app private keys are sealed here, with a context naming the
 * row, so nothing above this module handles sealed text and nothing below it sees plaintext.
 * D1 has no interactive transactions (a batch is its only atomic unit): every write that must not race is
 * one conditional statement whose changed-row count is checked.
 */
import { and, asc, count, eq, isNotNull, isNull, sql } from "drizzle-orm";
import type { Db } from "../../core/db/client";
import { syncAssociations, syncConfig, syncDestinations, syncRepohostApps } from "../../core/db/schema";
import { seal, unseal, type SealKeys } from "../../core/db/seal";
import type { Connection, DestinationType, Granularity } from "./destinations/types";

// ---------------------------------------------------------------------------------------------
// Configuration (spec "Sync configuration")

export interface SyncConfig {
  disabled: boolean;
  queueCapacity: number;
  /** Seconds between drift reconciliation passes (docs/secrets-sync.md "3. Drift is detected and repaired"); 0 = off. */
  reconcileInterval: number;
}

export const DEFAULT_SYNC_CONFIG: SyncConfig = { disabled: false, queueCapacity: 1_000_000, reconcileInterval: 3600 };
const CONFIG_ID = "global";

/**
 * The configuration row as a prepared statement, for callers that batch it with other reads
 * (./operations.ts onSecretChanged); read its result with `syncConfigOf`. Plain SQL, not the
 * query builder: this runs for every KV change and every engine round.
 */
export function syncConfigStatement(db: Db): D1PreparedStatement {
  return db.$client.prepare("SELECT disabled, queue_capacity, reconcile_interval FROM sync_config WHERE id = ?").bind(CONFIG_ID);
}

export function syncConfigOf(result: D1Result<unknown> | undefined): SyncConfig {
  const row = result?.results[0] as { disabled: number; queue_capacity: number; reconcile_interval: number } | undefined;
  return row ? { disabled: Boolean(row.disabled), queueCapacity: row.queue_capacity, reconcileInterval: row.reconcile_interval } : { ...DEFAULT_SYNC_CONFIG };
}

export async function getSyncConfig(db: Db): Promise<SyncConfig> {
  return syncConfigOf(await syncConfigStatement(db).all());
}

export async function putSyncConfig(db: Db, cfg: SyncConfig): Promise<void> {
  const values = { id: CONFIG_ID, disabled: cfg.disabled, queueCapacity: cfg.queueCapacity, reconcileInterval: cfg.reconcileInterval, updatedAt: Date.now() };
  await db
    .insert(syncConfig)
    .values(values)
    .onConflictDoUpdate({
      target: syncConfig.id,
      set: { disabled: values.disabled, queueCapacity: values.queueCapacity, reconcileInterval: values.reconcileInterval, updatedAt: values.updatedAt },
    });
}

export async function resetSyncConfig(db: Db): Promise<void> {
  await db.delete(syncConfig).where(eq(syncConfig.id, CONFIG_ID));
}

// ---------------------------------------------------------------------------------------------
// Destinations

export interface DestinationOptions {
  granularity: Granularity;
  /** "" means the type's default template for the granularity (reported on read). */
  secretNameTemplate: string;
  customTags: Record<string, string>;
  /** Rewrite a secret changed or deleted out of band (docs/secrets-sync.md "3. Drift is detected and repaired"); false only reports it. */
  driftRepair: boolean;
}

export interface DestinationKey {
  namespaceId: string;
  type: DestinationType;
  name: string;
}

export interface DestinationRecord extends DestinationKey {
  /** Every connection member, sensitive ones included (unsealed). */
  connection: Connection;
  options: DestinationOptions;
  purgeInitiatedAt: number | null;
  purgeError: string | null;
  version: number;
  createdAt: number;
  updatedAt: number;
}

function destinationContext(k: DestinationKey): string {
  return `sync-destination:${k.namespaceId}:${k.type}:${k.name}`;
}

function whereKey(k: DestinationKey) {
  return and(eq(syncDestinations.namespaceId, k.namespaceId), eq(syncDestinations.type, k.type), eq(syncDestinations.name, k.name));
}

function isConnection(v: unknown): v is Connection {
  return (
    typeof v === "object" &&
    v !== null &&
    !Array.isArray(v) &&
    Object.values(v).every((x) => typeof x === "string" || (Array.isArray(x) && x.every((y) => typeof y === "string")))
  );
}

function toOptions(raw: Record<string, unknown>): DestinationOptions {
  const tags = raw.custom_tags;
  return {
    granularity: raw.granularity === "secret-key" ? "secret-key" : "secret-path",
    secretNameTemplate: typeof raw.secret_name_template === "string" ? raw.secret_name_template : "",
    customTags: isConnection(tags) ? (Object.fromEntries(Object.entries(tags).filter(([, v]) => typeof v === "string")) as Record<string, string>) : {},
    // Destinations stored before drift repair existed have no drift_repair: the default, true.
    driftRepair: raw.drift_repair !== false,
  };
}

function fromOptions(o: DestinationOptions): Record<string, unknown> {
  return { granularity: o.granularity, secret_name_template: o.secretNameTemplate, custom_tags: o.customTags, drift_repair: o.driftRepair };
}

export function destinationExists(db: Db, k: DestinationKey): Promise<boolean> {
  return db
    .select({ n: count() })
    .from(syncDestinations)
    .where(whereKey(k))
    .then((r) => (r[0]?.n ?? 0) > 0);
}

interface DestinationRow {
  connection: string;
  sealed_credentials: string;
  options: string;
  purge_initiated_at: number | null;
  purge_error: string | null;
  version: number;
  created_at: number;
  updated_at: number;
}

const DESTINATION_COLUMNS = "connection, sealed_credentials, options, purge_initiated_at, purge_error, version, created_at, updated_at";

/** The statement of `destinationOf`, for a caller that batches it (the engine reads it for every operation). */
export function destinationStatement(db: Db, k: DestinationKey): D1PreparedStatement {
  return db.$client
    .prepare(`SELECT ${DESTINATION_COLUMNS} FROM sync_destinations WHERE namespace_id = ? AND type = ? AND name = ?`)
    .bind(k.namespaceId, k.type, k.name);
}

/** The destination `destinationStatement` read, with its sealed members opened; null if there is none. */
export async function destinationOf(keys: SealKeys, k: DestinationKey, result: D1Result<unknown> | undefined): Promise<DestinationRecord | null> {
  const row = result?.results[0] as DestinationRow | undefined;
  if (!row) return null;
  const secret: unknown = JSON.parse(await unseal(keys, row.sealed_credentials, destinationContext(k)));
  const connection: unknown = JSON.parse(row.connection);
  const options: unknown = JSON.parse(row.options);
  if (!isConnection(secret) || !isConnection(connection) || typeof options !== "object" || options === null) {
    throw new Error("stored destination has an unexpected shape");
  }
  return {
    ...k,
    connection: { ...connection, ...secret },
    options: toOptions(options as Record<string, unknown>),
    purgeInitiatedAt: row.purge_initiated_at,
    purgeError: row.purge_error,
    version: row.version,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** One destination with its sealed members opened. Plain SQL: the engine reads it for every operation. */
export async function getDestination(db: Db, keys: SealKeys, k: DestinationKey): Promise<DestinationRecord | null> {
  return destinationOf(keys, k, await destinationStatement(db, k).all());
}

async function split(keys: SealKeys, rec: DestinationKey & { connection: Connection }, sensitive: readonly string[]) {
  const plain: Connection = {};
  const secret: Connection = {};
  for (const [name, v] of Object.entries(rec.connection)) (sensitive.includes(name) ? secret : plain)[name] = v;
  return { plain, sealed: await seal(keys, JSON.stringify(secret), destinationContext(rec)) };
}

/** Inserts a new destination; false when one of that name appeared meanwhile. */
export async function insertDestination(
  db: Db,
  keys: SealKeys,
  rec: DestinationKey & { connection: Connection; options: DestinationOptions },
  sensitive: readonly string[],
): Promise<boolean> {
  const { plain, sealed } = await split(keys, rec, sensitive);
  const now = Date.now();
  const res = await db
    .insert(syncDestinations)
    .values({
      namespaceId: rec.namespaceId,
      type: rec.type,
      name: rec.name,
      connection: plain,
      sealedCredentials: sealed,
      options: fromOptions(rec.options),
      purgeInitiatedAt: null,
      purgeError: null,
      version: 1,
      createdAt: now,
      updatedAt: now,
    })
    .onConflictDoNothing();
  return (res.meta.changes ?? 0) === 1;
}

/** Replaces a destination's details if it is still at `expectedVersion` and not being purged. */
export async function updateDestination(
  db: Db,
  keys: SealKeys,
  rec: DestinationKey & { connection: Connection; options: DestinationOptions },
  sensitive: readonly string[],
  expectedVersion: number,
): Promise<boolean> {
  const { plain, sealed } = await split(keys, rec, sensitive);
  const res = await db
    .update(syncDestinations)
    .set({ connection: plain, sealedCredentials: sealed, options: fromOptions(rec.options), version: expectedVersion + 1, updatedAt: Date.now() })
    .where(and(whereKey(rec), eq(syncDestinations.version, expectedVersion), isNull(syncDestinations.purgeInitiatedAt)));
  return (res.meta.changes ?? 0) === 1;
}

/** Names of the destinations in a namespace, per type, sorted. */
export async function listDestinations(db: Db, namespaceId: string, type?: DestinationType): Promise<{ type: string; name: string }[]> {
  const where = type
    ? and(eq(syncDestinations.namespaceId, namespaceId), eq(syncDestinations.type, type))
    : eq(syncDestinations.namespaceId, namespaceId);
  return db
    .select({ type: syncDestinations.type, name: syncDestinations.name })
    .from(syncDestinations)
    .where(where)
    .orderBy(asc(syncDestinations.type), asc(syncDestinations.name));
}

export async function countAssociations(db: Db, k: DestinationKey): Promise<number> {
  const rows = await db
    .select({ n: count() })
    .from(syncAssociations)
    .where(
      and(
        eq(syncAssociations.namespaceId, k.namespaceId),
        eq(syncAssociations.destinationType, k.type),
        eq(syncAssociations.destinationName, k.name),
        sql`NOT (${syncAssociations.desired} = 'unsynced' AND ${syncAssociations.syncStatus} = 'UNSYNCED')`,
      ),
    );
  return rows[0]?.n ?? 0;
}

// A removed association whose unsync finished (a tombstone, see association-store.ts) no longer counts.
const NO_ASSOCIATIONS = `NOT EXISTS (SELECT 1 FROM sync_associations a
  WHERE a.namespace_id = ? AND a.destination_type = ? AND a.destination_name = ?
  AND NOT (a.desired = 'unsynced' AND a.sync_status = 'UNSYNCED'))`;

/**
 * Deletes a destination in one statement that also checks it has no associations, so an
 * association added meanwhile cannot be orphaned. Returns whether a row was deleted.
 */
export async function deleteDestinationIfUnassociated(db: Db, k: DestinationKey): Promise<boolean> {
  const res = await db.$client
    .prepare(`DELETE FROM sync_destinations WHERE namespace_id = ? AND type = ? AND name = ? AND ${NO_ASSOCIATIONS}`)
    .bind(k.namespaceId, k.type, k.name, k.namespaceId, k.type, k.name)
    .run();
  return (res.meta.changes ?? 0) > 0;
}

/**
 * Records a purge request durably (spec "Deleting a destination with purge=true"): part 2's
 * engine finds destinations with `purge_initiated_at` set, unsyncs and removes their associations,
 * then deletes them. Keeps the first request's time when a purge is already under way.
 */
export async function markPurge(db: Db, k: DestinationKey, at: number): Promise<void> {
  await db.$client
    .prepare(
      `UPDATE sync_destinations SET purge_initiated_at = coalesce(purge_initiated_at, ?), purge_error = NULL, updated_at = ?
       WHERE namespace_id = ? AND type = ? AND name = ?`,
    )
    .bind(at, at, k.namespaceId, k.type, k.name)
    .run();
}

/** Records why a purge could not finish yet (shown as purge_error on read). */
export async function setPurgeError(db: Db, k: DestinationKey, error: string | null): Promise<void> {
  await db.$client
    .prepare("UPDATE sync_destinations SET purge_error = ? WHERE namespace_id = ? AND type = ? AND name = ?")
    .bind(error, k.namespaceId, k.type, k.name)
    .run();
}

/** Deletes a destination row unconditionally (the end of a purge). */
export async function deleteDestinationRow(db: Db, k: DestinationKey): Promise<void> {
  await db.delete(syncDestinations).where(whereKey(k));
}

/** Destinations whose purge was requested (for part 2's engine). */
export async function listPurging(db: Db): Promise<DestinationKey[]> {
  const rows = await db
    .select({ namespaceId: syncDestinations.namespaceId, type: syncDestinations.type, name: syncDestinations.name })
    .from(syncDestinations)
    .where(isNotNull(syncDestinations.purgeInitiatedAt));
  return rows.map((r) => ({ ...r, type: r.type as DestinationType }));
}

// ---------------------------------------------------------------------------------------------
// Repository-host apps (Vault API: /v1/sys/sync/github-apps)

export interface RepohostApp {
  namespaceId: string;
  name: string;
  appId: number;
  /** PKCS#8 PEM (unsealed). */
  privateKey: string;
  fingerprint: string;
}

function appContext(namespaceId: string, name: string): string {
  return `sync-repohost-app:${namespaceId}:${name}`;
}

export async function getApp(db: Db, keys: SealKeys, namespaceId: string, name: string): Promise<RepohostApp | null> {
  const rows = await db
    .select()
    .from(syncRepohostApps)
    .where(and(eq(syncRepohostApps.namespaceId, namespaceId), eq(syncRepohostApps.name, name)));
  const row = rows[0];
  if (!row) return null;
  return {
    namespaceId,
    name,
    appId: row.appId,
    privateKey: await unseal(keys, row.sealedPrivateKey, appContext(namespaceId, name)),
    fingerprint: row.fingerprint,
  };
}

export async function appExists(db: Db, namespaceId: string, name: string): Promise<boolean> {
  const rows = await db
    .select({ n: count() })
    .from(syncRepohostApps)
    .where(and(eq(syncRepohostApps.namespaceId, namespaceId), eq(syncRepohostApps.name, name)));
  return (rows[0]?.n ?? 0) > 0;
}

export async function putApp(db: Db, keys: SealKeys, app: RepohostApp): Promise<void> {
  const sealed = await seal(keys, app.privateKey, appContext(app.namespaceId, app.name));
  const now = Date.now();
  await db
    .insert(syncRepohostApps)
    .values({ namespaceId: app.namespaceId, name: app.name, appId: app.appId, sealedPrivateKey: sealed, fingerprint: app.fingerprint, createdAt: now, updatedAt: now })
    .onConflictDoUpdate({
      target: [syncRepohostApps.namespaceId, syncRepohostApps.name],
      set: { appId: app.appId, sealedPrivateKey: sealed, fingerprint: app.fingerprint, updatedAt: now },
    });
}

export async function listApps(db: Db, namespaceId: string): Promise<string[]> {
  const rows = await db
    .select({ name: syncRepohostApps.name })
    .from(syncRepohostApps)
    .where(eq(syncRepohostApps.namespaceId, namespaceId))
    .orderBy(asc(syncRepohostApps.name));
  return rows.map((r) => r.name);
}

/** Names of the repohost destinations of a namespace that use an app. */
export async function destinationsUsingApp(db: Db, namespaceId: string, appName: string): Promise<string[]> {
  const rows = await db.$client
    .prepare(
      `SELECT name FROM sync_destinations
       WHERE namespace_id = ? AND type = 'repohost' AND json_extract(connection, '$.app_name') = ? ORDER BY name`,
    )
    .bind(namespaceId, appName)
    .all<{ name: string }>();
  return rows.results.map((r) => r.name);
}

/**
 * Deletes an app unless a destination references it, in one statement (spec rule 4), so a
 * destination created meanwhile cannot be left pointing at nothing. Returns whether it was deleted.
 */
export async function deleteAppIfUnreferenced(db: Db, namespaceId: string, name: string): Promise<boolean> {
  const res = await db.$client
    .prepare(
      `DELETE FROM sync_repohost_apps WHERE namespace_id = ? AND name = ? AND NOT EXISTS (
         SELECT 1 FROM sync_destinations d WHERE d.namespace_id = ? AND d.type = 'repohost'
           AND json_extract(d.connection, '$.app_name') = ?)`,
    )
    .bind(namespaceId, name, namespaceId, name)
    .run();
  return (res.meta.changes ?? 0) > 0;
}

// ---------------------------------------------------------------------------------------------
// Namespaces (docs/http-conventions.md, namespaces: a namespace is deleted only when empty)

/** What secrets sync still holds in a namespace: destinations as `type/name`, app names. */
export async function syncObjectsInNamespace(db: Db, namespaceId: string): Promise<{ destinations: string[]; apps: string[] }> {
  const dests = await listDestinations(db, namespaceId);
  return { destinations: dests.map((d) => `${d.type}/${d.name}`), apps: await listApps(db, namespaceId) };
}

/**
 * Removes what is left of a namespace's associations once it has no destinations: only finished
 * removals (tombstones) can remain then. Called when the namespace itself is deleted.
 */
export async function deleteNamespaceSyncRows(db: Db, namespaceId: string): Promise<void> {
  await db.$client.batch([
    db.$client.prepare("DELETE FROM sync_external_secrets WHERE namespace_id = ?").bind(namespaceId),
    db.$client.prepare("DELETE FROM sync_associations WHERE namespace_id = ?").bind(namespaceId),
  ]);
}
