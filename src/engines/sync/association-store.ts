/**
 * Storage of associations (the sync_associations table, src/core/db/schema/sync.ts): the rows,
 * their intents and generations, and the queries of the triggers and of reconciliation. The
 * engine's per-run state of a row (lease, in-flight mark, outcome) is written by
 * ./association-runs.ts. The engine (./engine.ts) decides; these modules only read and write,
 * each write one statement (D1 has no interactive transactions) and every outcome write
 * conditional on the generation it was computed for, so a stale worker cannot overwrite a newer
 * intent. Statements the engine needs together go in one D1 batch, one round trip (the
 * `...Statement` builders for the engine's own batches); a batch runs its statements in order as
 * one transaction, so each keeps its own condition.
 */
import type { Db } from "../../core/db/client";
import { trimChar } from "../../core/text";
import type { DestinationKey } from "./store";
import type { DestinationType } from "./destinations/types";

const SYNC_STATUSES = [
  "PENDING",
  "SYNCING",
  "SYNCED",
  "UNSYNCING",
  "UNSYNCED",
  "CLIENT_SIDE_ERROR",
  "EXTERNAL_SERVICE_ERROR",
  "INTERNAL_VAULT_ERROR",
] as const;
export type SyncStatus = (typeof SYNC_STATUSES)[number];
export type Desired = "synced" | "unsynced";

/** One external secret of an association: its name at the provider and its own status. */
export interface ExternalEntry {
  name: string;
  status: SyncStatus;
  updatedAt: number;
}

export interface Link {
  namespaceId: string;
  destinationType: DestinationType;
  destinationName: string;
  mountId: string;
  mountPath: string;
  mountAccessor: string;
  secretName: string;
}

export interface Association extends Link {
  id: string;
  status: SyncStatus;
  updatedAt: number;
  desired: Desired;
  generation: number;
  doneGeneration: number;
  /** Keyed by sub-key ("" for secret-path granularity). */
  external: Record<string, ExternalEntry>;
  lastError: string | null;
  attempts: number;
  /** docs/secrets-sync.md "5. Failures are visible": when the provider was last called, when the queue tries again (null: not scheduled). */
  lastAttemptAt: number | null;
  nextRetryAt: number | null;
  /** Set when the operation exhausted its retries; the next set (or a new intent) clears it. */
  deadLetteredAt: number | null;
  /** docs/secrets-sync.md "3. Drift is detected and repaired": last drift found by reconciliation, and how many times. */
  driftDetectedAt: number | null;
  driftCount: number;
}

export interface Row {
  id: string;
  namespace_id: string;
  destination_type: string;
  destination_name: string;
  mount_accessor: string;
  secret_name: string;
  sync_status: string;
  updated_at: number;
  mount_id: string;
  mount_path: string;
  desired: string;
  generation: number;
  done_generation: number;
  external: string;
  last_error: string | null;
  attempts: number;
  last_attempt_at: number | null;
  next_retry_at: number | null;
  dead_lettered_at: number | null;
  drift_detected_at: number | null;
  drift_count: number;
}

function asStatus(s: string): SyncStatus {
  return (SYNC_STATUSES as readonly string[]).includes(s) ? (s as SyncStatus) : "INTERNAL_VAULT_ERROR";
}

function parseExternal(raw: string): Record<string, ExternalEntry> {
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    return {};
  }
  const out: Record<string, ExternalEntry> = {};
  if (typeof v !== "object" || v === null || Array.isArray(v)) return out;
  for (const [k, e] of Object.entries(v)) {
    if (typeof e !== "object" || e === null) continue;
    const rec = e as Record<string, unknown>;
    if (typeof rec.name !== "string") continue;
    out[k] = {
      name: rec.name,
      status: asStatus(typeof rec.status === "string" ? rec.status : ""),
      updatedAt: typeof rec.updatedAt === "number" ? rec.updatedAt : 0,
    };
  }
  return out;
}

export function toAssociation(r: Row): Association {
  return {
    id: r.id,
    namespaceId: r.namespace_id,
    destinationType: r.destination_type as DestinationType,
    destinationName: r.destination_name,
    mountId: r.mount_id,
    mountPath: r.mount_path,
    mountAccessor: r.mount_accessor,
    secretName: r.secret_name,
    status: asStatus(r.sync_status),
    updatedAt: r.updated_at,
    desired: r.desired === "unsynced" ? "unsynced" : "synced",
    generation: r.generation,
    doneGeneration: r.done_generation,
    external: parseExternal(r.external),
    lastError: r.last_error,
    attempts: r.attempts,
    lastAttemptAt: r.last_attempt_at,
    nextRetryAt: r.next_retry_at,
    deadLetteredAt: r.dead_lettered_at,
    driftDetectedAt: r.drift_detected_at,
    driftCount: r.drift_count,
  };
}

/** A removed association whose unsync finished: kept for its generation, hidden from reads. */
const TOMBSTONE_SQL = "(desired = 'unsynced' AND sync_status = 'UNSYNCED')";
const LIVE = `NOT ${TOMBSTONE_SQL}`;

export function isTombstone(a: Pick<Association, "desired" | "status">): boolean {
  return a.desired === "unsynced" && a.status === "UNSYNCED";
}

export async function getAssociation(db: Db, id: string): Promise<Association | null> {
  const r = await db.$client.prepare("SELECT * FROM sync_associations WHERE id = ?").bind(id).first<Row>();
  return r ? toAssociation(r) : null;
}

export async function findAssociation(db: Db, l: Omit<Link, "mountPath" | "mountAccessor">): Promise<Association | null> {
  const r = await db.$client
    .prepare(
      `SELECT * FROM sync_associations WHERE namespace_id = ? AND destination_type = ? AND destination_name = ?
       AND mount_id = ? AND secret_name = ?`,
    )
    .bind(l.namespaceId, l.destinationType, l.destinationName, l.mountId, l.secretName)
    .first<Row>();
  return r ? toAssociation(r) : null;
}

/**
 * Records a new user intent: creates the association or bumps its generation, in one statement.
 * The status becomes `status` (PENDING until the engine picks it up). Returns the row.
 */
export async function recordIntent(db: Db, l: Link, desired: Desired, status: SyncStatus, now: number): Promise<Association> {
  const r = await db.$client
    .prepare(
      `INSERT INTO sync_associations (id, namespace_id, destination_type, destination_name, mount_accessor, secret_name,
         sync_status, updated_at, mount_id, mount_path, desired, generation, done_generation, external, attempts)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 0, '{}', 0)
       ON CONFLICT (namespace_id, destination_type, destination_name, mount_id, secret_name) DO UPDATE SET
         generation = generation + 1, desired = excluded.desired, sync_status = excluded.sync_status,
         updated_at = excluded.updated_at, mount_accessor = excluded.mount_accessor, mount_path = excluded.mount_path,
         attempts = 0, next_retry_at = NULL, dead_lettered_at = NULL
       RETURNING *`,
    )
    .bind(crypto.randomUUID(), l.namespaceId, l.destinationType, l.destinationName, l.mountAccessor, l.secretName, status, now, l.mountId, l.mountPath, desired)
    .first<Row>();
  if (!r) throw new Error("recording an association intent returned no row");
  return toAssociation(r);
}

/** Bumps the generation of an existing association (KV change, reconcile, purge); null if gone. */
export async function bump(db: Db, id: string, status: SyncStatus, now: number, desired?: Desired, lastError?: string): Promise<Association | null> {
  const r = await db.$client
    .prepare(
      `UPDATE sync_associations SET generation = generation + 1, sync_status = ?, updated_at = ?, attempts = 0,
         next_retry_at = NULL, dead_lettered_at = NULL,
         desired = coalesce(?, desired), last_error = coalesce(?, last_error) WHERE id = ? RETURNING *`,
    )
    .bind(status, now, desired ?? null, lastError ?? null, id)
    .first<Row>();
  return r ? toAssociation(r) : null;
}

/** Live associations of one secret (KV change events), as a statement for a caller that batches it; read its result with `associationsOf`. */
export function associationsOfSecretStatement(db: Db, mountId: string, secretName: string): D1PreparedStatement {
  return db.$client.prepare(`SELECT * FROM sync_associations WHERE mount_id = ? AND secret_name = ? AND desired = 'synced'`).bind(mountId, secretName);
}

export function associationsOf(result: D1Result<unknown> | undefined): Association[] {
  return ((result?.results ?? []) as Row[]).map(toAssociation);
}

/**
 * The statement that bumps every live association of a secret to PENDING, only while sync is
 * enabled (no sync_config row = enabled), returning the ids it bumped: a KV write's whole
 * sync bookkeeping in one statement, batched with the reads of ./operations.ts onSecretChanged.
 */
export function bumpSecretIfEnabledStatement(db: Db, mountId: string, secretName: string, now: number): D1PreparedStatement {
  return db.$client
    .prepare(
      `UPDATE sync_associations SET generation = generation + 1, sync_status = 'PENDING', updated_at = ?, attempts = 0,
         next_retry_at = NULL, dead_lettered_at = NULL
       WHERE mount_id = ? AND secret_name = ? AND desired = 'synced'
         AND coalesce((SELECT disabled FROM sync_config WHERE id = 'global'), 0) = 0
       RETURNING id`,
    )
    .bind(now, mountId, secretName);
}

/** The ids `bumpSecretIfEnabledStatement` bumped. */
export function bumpedIds(result: D1Result<unknown> | undefined): string[] {
  return ((result?.results ?? []) as { id: string }[]).map((r) => r.id);
}

/**
 * `bump` of several associations to PENDING in one D1 batch (a KV change of a secret synced to
 * several destinations). Returns the ids still there.
 */
export async function bumpPending(db: Db, ids: string[], now: number): Promise<string[]> {
  if (ids.length === 0) return [];
  const results = await db.$client.batch(
    ids.map((id) =>
      db.$client
        .prepare(
          `UPDATE sync_associations SET generation = generation + 1, sync_status = 'PENDING', updated_at = ?, attempts = 0,
             next_retry_at = NULL, dead_lettered_at = NULL WHERE id = ?`,
        )
        .bind(now, id),
    ),
  );
  return ids.filter((_, i) => (results[i]?.meta.changes ?? 0) === 1);
}

/** Live associations of a destination, by mount accessor and secret name. */
export async function associationsOfDestination(db: Db, k: DestinationKey): Promise<Association[]> {
  const rows = await db.$client
    .prepare(
      `SELECT * FROM sync_associations WHERE namespace_id = ? AND destination_type = ? AND destination_name = ? AND ${LIVE}
       ORDER BY mount_accessor, secret_name`,
    )
    .bind(k.namespaceId, k.type, k.name)
    .all<Row>();
  return rows.results.map(toAssociation);
}

/** Live associations of a namespace, optionally of one secret. */
export async function associationsOfNamespace(db: Db, namespaceId: string, secret?: { mountId: string; secretName: string }): Promise<Association[]> {
  const stmt = secret
    ? db.$client
        .prepare(`SELECT * FROM sync_associations WHERE namespace_id = ? AND mount_id = ? AND secret_name = ? AND ${LIVE} ORDER BY destination_type, destination_name`)
        .bind(namespaceId, secret.mountId, secret.secretName)
    : db.$client.prepare(`SELECT * FROM sync_associations WHERE namespace_id = ? AND ${LIVE} ORDER BY mount_path, secret_name`).bind(namespaceId);
  const rows = await stmt.all<Row>();
  return rows.results.map(toAssociation);
}

/** How many operations wait as PENDING (the `queue_capacity` bound), not counting `exceptId`. */
export async function countPending(db: Db, exceptId = ""): Promise<number> {
  const r = await db.$client
    .prepare("SELECT count(*) AS n FROM sync_associations WHERE sync_status = 'PENDING' AND id != ?")
    .bind(exceptId)
    .first<{ n: number }>();
  return r?.n ?? 0;
}

/**
 * One page of the associations with unfinished work (an intent newer than the last final
 * outcome: parked while disabled, dropped when the queue was full, or in flight), ordered by id
 * and starting after `after`; optionally only those of one mount. Re-enabling and mount disable
 * walk them page by page (./operations.ts sweepUnfinished).
 */
export async function unfinishedIds(db: Db, after: string, limit: number, mountId?: string): Promise<string[]> {
  const stmt = mountId
    ? db.$client
        .prepare("SELECT id FROM sync_associations WHERE done_generation < generation AND mount_id = ? AND id > ? ORDER BY id LIMIT ?")
        .bind(mountId, after, limit)
    : db.$client.prepare("SELECT id FROM sync_associations WHERE done_generation < generation AND id > ? ORDER BY id LIMIT ?").bind(after, limit);
  const rows = await stmt.all<{ id: string }>();
  return rows.results.map((r) => r.id);
}

/**
 * The mount is being disabled: every association of it that still wants its secret synced gets
 * an unsync intent (the secret is going away), in one statement. Returns how many changed.
 */
export async function unsyncMountAssociations(db: Db, mountId: string, now: number): Promise<number> {
  const res = await db.$client
    .prepare(
      `UPDATE sync_associations SET generation = generation + 1, desired = 'unsynced', sync_status = 'PENDING', updated_at = ?,
         attempts = 0, next_retry_at = NULL, dead_lettered_at = NULL WHERE mount_id = ? AND desired = 'synced'`,
    )
    .bind(now, mountId)
    .run();
  return res.meta.changes ?? 0;
}

/**
 * An association by the mount it was made with, for when that mount is gone (disabled): `mount`
 * matches the stored mount path ("a/b/") or accessor. A live association wins over a finished
 * removal; among several, the newest.
 */
export async function findAssociationByStoredMount(
  db: Db,
  l: { namespaceId: string; destinationType: DestinationType; destinationName: string; mount: string; secretName: string },
): Promise<Association | null> {
  // trimChar, not a /\/+$/ regex, which is quadratic on a long run of "/" (src/core/text.ts).
  const path = `${trimChar(l.mount, "/")}/`;
  const r = await db.$client
    .prepare(
      `SELECT * FROM sync_associations WHERE namespace_id = ? AND destination_type = ? AND destination_name = ? AND secret_name = ?
       AND (mount_path = ? OR mount_accessor = ?) ORDER BY ${TOMBSTONE_SQL}, updated_at DESC LIMIT 1`,
    )
    .bind(l.namespaceId, l.destinationType, l.destinationName, l.secretName, path, l.mount)
    .first<Row>();
  return r ? toAssociation(r) : null;
}

/**
 * Associations the reconciliation pass re-drives: unfinished ones nobody works on (their last
 * change is older than `stuckBefore` and no lease is live), and failed ones (provider or internal
 * errors) older than `failedBefore`. Client-side errors and dead letters (retries exhausted,
 * docs/secrets-sync.md "5. Failures are visible") wait for the user (a new set).
 */
export async function reconcileCandidates(db: Db, now: number, stuckBefore: number, failedBefore: number, limit: number): Promise<Association[]> {
  const rows = await db.$client
    .prepare(
      `SELECT * FROM sync_associations WHERE (lease_until IS NULL OR lease_until < ?) AND (
         (done_generation < generation AND updated_at < ?)
         OR (sync_status IN ('EXTERNAL_SERVICE_ERROR', 'INTERNAL_VAULT_ERROR') AND dead_lettered_at IS NULL AND updated_at < ?)
       ) ORDER BY updated_at LIMIT ?`,
    )
    .bind(now, stuckBefore, failedBefore, limit)
    .all<Row>();
  return rows.results.map(toAssociation);
}

/**
 * What drift reconciliation looks at (docs/secrets-sync.md "3. Drift is detected and repaired"): settled, synced associations (nothing
 * pending, not a dead letter), of one destination when given; ids after `after`, a page at a time.
 */
const DRIFT_CANDIDATE = `desired = 'synced' AND sync_status = 'SYNCED' AND done_generation >= generation AND dead_lettered_at IS NULL`;

export async function driftCandidateIds(db: Db, after: string, limit: number, k?: DestinationKey): Promise<string[]> {
  const stmt = k
    ? db.$client
        .prepare(
          `SELECT id FROM sync_associations WHERE ${DRIFT_CANDIDATE} AND namespace_id = ? AND destination_type = ? AND destination_name = ?
           AND id > ? ORDER BY id LIMIT ?`,
        )
        .bind(k.namespaceId, k.type, k.name, after, limit)
    : db.$client.prepare(`SELECT id FROM sync_associations WHERE ${DRIFT_CANDIDATE} AND id > ? ORDER BY id LIMIT ?`).bind(after, limit);
  return (await stmt.all<{ id: string }>()).results.map((r) => r.id);
}

export async function countDriftCandidates(db: Db, k: DestinationKey): Promise<number> {
  const r = await db.$client
    .prepare(`SELECT count(*) AS n FROM sync_associations WHERE ${DRIFT_CANDIDATE} AND namespace_id = ? AND destination_type = ? AND destination_name = ?`)
    .bind(k.namespaceId, k.type, k.name)
    .first<{ n: number }>();
  return r?.n ?? 0;
}

/** Whether an association is one drift reconciliation judges (see DRIFT_CANDIDATE). */
export function isDriftCandidate(a: Association): boolean {
  return a.desired === "synced" && a.status === "SYNCED" && a.doneGeneration >= a.generation && a.deadLetteredAt === null;
}

/** Deletes every association row of a destination (the end of a purge). */
export async function deleteAssociationsOf(db: Db, k: DestinationKey): Promise<void> {
  await db.$client
    .prepare("DELETE FROM sync_associations WHERE namespace_id = ? AND destination_type = ? AND destination_name = ?")
    .bind(k.namespaceId, k.type, k.name)
    .run();
}

/** Removes finished tombstones of destinations that no longer exist. */
export async function deleteOrphanTombstones(db: Db, k: DestinationKey): Promise<void> {
  await db.$client
    .prepare(
      `DELETE FROM sync_associations WHERE namespace_id = ? AND destination_type = ? AND destination_name = ? AND ${TOMBSTONE_SQL}
       AND NOT EXISTS (SELECT 1 FROM sync_destinations d WHERE d.namespace_id = ? AND d.type = ? AND d.name = ?)`,
    )
    .bind(k.namespaceId, k.type, k.name, k.namespaceId, k.type, k.name)
    .run();
}
