/**
 * The triggers of the sync engine: association set and remove, KV changes, purge,
 * re-enabling, reconciliation. Each records the new intent (./association-store.ts), then either
 * tries it at once (set, remove), or leaves it to the queue (./consumer.ts). While the sync
 * config is `disabled`, intents wait as PENDING, at most `queue_capacity` of them.
 */
import type { Db } from "../../core/db/client";
import { ApiError } from "../../core/errors";
import type { KvChangeEvent } from "../kv";
import * as kvStore from "../kv";
import {
  associationsOf,
  associationsOfDestination,
  associationsOfSecretStatement,
  bump,
  bumpPending,
  bumpSecretIfEnabledStatement,
  bumpedIds,
  countPending,
  deleteAssociationsOf,
  findAssociation,
  getAssociation,
  isTombstone,
  unfinishedIds,
  unsyncMountAssociations,
  reconcileCandidates,
  recordIntent,
  type Association,
  type Desired,
  type Link,
} from "./association-store";
import { drive, type EngineDeps } from "./engine";
import { deleteExternalSecretsOf, externalSecretsOf, preExistingOfDestination } from "./external-store";
import { backoffSeconds, enqueue, type SyncMessage } from "./messages";
import { deleteDestinationRow, getSyncConfig, listPurging, markPurge, setPurgeError, syncConfigOf, syncConfigStatement, type DestinationKey } from "./store";

function queueFull(cap: number): ApiError {
  return new ApiError(429, `sync is disabled and its queue is full (queue_capacity ${cap}); re-enable syncing or raise queue_capacity`);
}

const assocMessage = (id: string): SyncMessage => ({ kind: "association", id });

/**
 * Records an intent and, unless syncing is disabled, tries it at once. Returns the association
 * as it stands afterwards: SYNCED/UNSYNCED when the provider answered in time, else the
 * in-flight or failed status; the queue carries retries and busy cases.
 */
async function intendAndTry(deps: EngineDeps, link: Link, desired: Desired): Promise<Association> {
  const cfg = await getSyncConfig(deps.db);
  if (cfg.disabled) {
    const existing = await findAssociation(deps.db, link);
    if (existing?.status !== "PENDING" && (await countPending(deps.db, existing?.id ?? "")) >= cfg.queueCapacity) throw queueFull(cfg.queueCapacity);
    return recordIntent(deps.db, link, desired, "PENDING", Date.now());
  }
  const a = await recordIntent(deps.db, link, desired, "PENDING", Date.now());
  const r = await drive(deps, a.id, { finalOnRetryable: false });
  if (r.kind === "busy") {
    await enqueue(deps.env, [assocMessage(a.id)]);
  } else if (r.kind === "done" && r.retryable) {
    await enqueue(deps.env, [assocMessage(a.id)], r.retryDelaySeconds ?? backoffSeconds(1, r.retryAfter));
  }
  return (await getAssociation(deps.db, a.id)) ?? a;
}

/** associations/set: link (or refresh) and sync. */
export function setAssociation(deps: EngineDeps, link: Link): Promise<Association> {
  return intendAndTry(deps, link, "synced");
}

/**
 * associations/remove: unsync and unlink; null when there was nothing to remove. `left` names
 * the external secrets that existed before Lanyard first wrote them: they stay at the provider
 * (docs/secrets-sync.md "2. Never delete what Lanyard did not create"), and the answer warns about each.
 */
export async function removeAssociation(deps: EngineDeps, link: Link): Promise<{ assoc: Association; left: string[] } | null> {
  const existing = await findAssociation(deps.db, link);
  if (!existing || isTombstone(existing)) return null;
  const left = (await externalSecretsOf(deps.db, existing.id)).filter((r) => r.ownership === "pre_existing").map((r) => r.name);
  const assoc = await intendAndTry(deps, { ...link, mountAccessor: existing.mountAccessor, mountPath: existing.mountPath }, "unsynced");
  return { assoc, left };
}

/**
 * Whether a KV change affects what is synced: writes, undeletes and metadata deletes always do;
 * a delete or destroy only when it touched the current version (Vault docs: secrets sync).
 */
async function affectsCurrent(deps: EngineDeps, e: KvChangeEvent): Promise<boolean> {
  if (e.kind === "written" || e.kind === "metadata-deleted") return true;
  const meta = await kvStore.getMetadata(deps.db, e.mountId, e.path);
  if (!meta) return true;
  const touched = e.versions ?? (e.version !== undefined ? [e.version] : []);
  return touched.includes(meta.currentVersion);
}

/**
 * KV change listener: every association of the secret converges again, through the queue.
 * Writes are not seen here: they go through the write companion below, whose statements commit
 * with the write. Other changes run inside the change's request, after it (waitUntil); a
 * metadata delete (like a write, it always affects the current version) costs one D1 round
 * trip: the associations, the switch and every bump in one batch.
 */
export async function onSecretChanged(deps: EngineDeps, e: KvChangeEvent): Promise<void> {
  if (e.kind === "written") return;
  const always = e.kind === "metadata-deleted";
  const [found, config, bumpedRows] = await deps.db.$client.batch([
    associationsOfSecretStatement(deps.db, e.mountId, e.path),
    syncConfigStatement(deps.db),
    ...(always ? [bumpSecretIfEnabledStatement(deps.db, e.mountId, e.path, Date.now())] : []),
  ]);
  const assocs = associationsOf(found);
  const cfg = syncConfigOf(config);
  if (always && !cfg.disabled) return queueBumped(deps, bumpedRows);
  if (assocs.length === 0 || !(await affectsCurrent(deps, e))) return;
  if (!cfg.disabled) {
    const bumped = await bumpPending(deps.db, assocs.map((a) => a.id), Date.now());
    if (bumped.length > 0) await enqueue(deps.env, bumped.map(assocMessage));
    return;
  }
  await parkChanges(deps, assocs, cfg.queueCapacity);
}

/**
 * The statements a KV write carries for sync (src/engines/kv/events.ts KvWriteCompanion): the
 * switch, and the bump of every live association of the secret, conditional on the switch in
 * SQL. Alone (a write that lost its race) they only make the engine look again.
 */
export function secretWriteStatements(db: Db, key: { mountId: string; path: string }, now: number): D1PreparedStatement[] {
  return [syncConfigStatement(db), bumpSecretIfEnabledStatement(db, key.mountId, key.path, now)];
}

/**
 * After the write's batch ran: queue what was bumped, or (sync disabled) park the change. Also
 * when the write lost its race: its bump happened all the same and must not be left without a
 * message (the engine converges to whatever the secret holds, so the message is harmless).
 */
export async function onSecretWritten(deps: EngineDeps, e: KvChangeEvent, results: D1Result<unknown>[]): Promise<void> {
  const cfg = syncConfigOf(results[0]);
  if (!cfg.disabled) return queueBumped(deps, results[1]);
  const assocs = associationsOf(await associationsOfSecretStatement(deps.db, e.mountId, e.path).all());
  await parkChanges(deps, assocs, cfg.queueCapacity);
}

/** Queues a message for each association `bumpSecretIfEnabledStatement` bumped. */
async function queueBumped(deps: EngineDeps, bumpedRows: D1Result<unknown> | undefined): Promise<void> {
  const bumped = bumpedIds(bumpedRows);
  if (bumped.length > 0) await enqueue(deps.env, bumped.map(assocMessage));
}

/** Sync disabled: each change is parked as PENDING (re-enabling queues it), up to queue_capacity. */
async function parkChanges(deps: EngineDeps, assocs: Association[], queueCapacity: number): Promise<void> {
  for (const a of assocs) {
    if (a.status !== "PENDING" && (await countPending(deps.db, a.id)) >= queueCapacity) {
      // Over capacity: not parked; the status says so and reconciliation picks it up later.
      await bump(deps.db, a.id, "INTERNAL_VAULT_ERROR", Date.now(), undefined, "the sync queue was full when the secret changed");
      continue;
    }
    await bump(deps.db, a.id, "PENDING", Date.now());
  }
}

/**
 * DELETE destination with purge=true: records the purge, turns every association into an
 * unsync intent, and queues the purge job (Vault API: delete a destination, purge: asynchronous). Returns the external
 * secrets that existed before Lanyard first wrote them: the purge leaves them (docs/secrets-sync.md "2. Never delete what Lanyard did not create").
 */
export async function requestPurge(deps: EngineDeps, key: DestinationKey): Promise<string[]> {
  const left = await preExistingOfDestination(deps.db, key);
  await markPurge(deps.db, key, Date.now());
  for (const a of await associationsOfDestination(deps.db, key)) {
    if (a.desired !== "unsynced") await bump(deps.db, a.id, "PENDING", Date.now(), "unsynced");
  }
  if (!(await getSyncConfig(deps.db)).disabled) await enqueue(deps.env, [{ kind: "purge", ...key }]);
  return left;
}

export interface PurgeResult {
  /** The destination is gone (or never existed). */
  finished: boolean;
  retry: boolean;
  delaySeconds: number;
}

/**
 * The purge job: unsyncs every association of the destination, then deletes them and the
 * destination. A failure leaves the destination in place with `purge_error` set.
 */
export async function processPurge(deps: EngineDeps, key: DestinationKey, final: boolean, attempt: number): Promise<PurgeResult> {
  if ((await getSyncConfig(deps.db)).disabled) return { finished: false, retry: false, delaySeconds: 0 };
  const purging = (await listPurging(deps.db)).some((k) => k.namespaceId === key.namespaceId && k.type === key.type && k.name === key.name);
  if (!purging) return { finished: true, retry: false, delaySeconds: 0 };
  const failures: string[] = [];
  let retryable = false;
  let retryAfter: number | undefined;
  for (const a of await associationsOfDestination(deps.db, key)) {
    if (a.desired !== "unsynced") await bump(deps.db, a.id, "PENDING", Date.now(), "unsynced");
    const r = await drive(deps, a.id, { finalOnRetryable: final });
    if (r.kind === "busy") {
      retryable = true;
      failures.push(`${a.mountAccessor}/${a.secretName}: busy`);
    } else if (r.kind === "done" && !isTombstone(r.assoc)) {
      if (r.retryable) retryable = true;
      retryAfter = Math.max(retryAfter ?? 0, r.retryAfter ?? 0) || undefined;
      failures.push(`${a.mountAccessor}/${a.secretName}: ${r.assoc.lastError ?? r.assoc.status}`);
    }
  }
  if (failures.length === 0) {
    await deleteExternalSecretsOf(deps.db, key);
    await deleteAssociationsOf(deps.db, key);
    await deleteDestinationRow(deps.db, key);
    return { finished: true, retry: false, delaySeconds: 0 };
  }
  await setPurgeError(deps.db, key, `could not unsync ${failures.length} secret(s): ${failures.slice(0, 3).join("; ")}`.slice(0, 1000));
  return { finished: false, retry: retryable && !final, delaySeconds: backoffSeconds(attempt, retryAfter) };
}

/** Associations one sweep message queues (ten sendBatch calls of 100). */
const SWEEP_PAGE = 1000;

/**
 * Sync was re-enabled: queue every unfinished purge and a sweep that queues every association
 * with unfinished work: the PENDING backlog, and the KV changes that were dropped because the
 * queue was full (INTERNAL_VAULT_ERROR with a generation newer than the last outcome). The sweep
 * walks them a page per queue message, so re-enabling stays one cheap request at any backlog size.
 */
export async function resumePending(deps: EngineDeps): Promise<void> {
  const purges = await listPurging(deps.db);
  await enqueue(deps.env, [{ kind: "sweep", after: "" }, ...purges.map((k): SyncMessage => ({ kind: "purge", ...k }))]);
}

/**
 * One sweep message: queues the next page of associations with unfinished work and, when the
 * page was full, the message for the page after it. While disabled it does nothing (re-enabling
 * starts a new sweep). Queuing an association twice is harmless (./engine.ts), so a retried
 * sweep message may repeat a page.
 */
export async function sweepUnfinished(deps: EngineDeps, after: string, mountId?: string, page = SWEEP_PAGE): Promise<number> {
  if ((await getSyncConfig(deps.db)).disabled) return 0;
  const ids = await unfinishedIds(deps.db, after, page, mountId);
  const msgs = ids.map(assocMessage);
  const last = ids[ids.length - 1];
  if (ids.length === page && last !== undefined) msgs.push(mountId === undefined ? { kind: "sweep", after: last } : { kind: "sweep", after: last, mountId });
  await enqueue(deps.env, msgs);
  return ids.length;
}

/**
 * A KV-v2 mount is being disabled: its secrets are going away, so every association of it is
 * unsynced (the provider copies deleted, the associations end UNSYNCED) through the queue. The
 * associations keep the mount's path and accessor, so a later associations/remove still finds
 * them. While disabled, the intents wait as PENDING like any other.
 */
export async function unsyncMount(deps: EngineDeps, mountId: string): Promise<number> {
  const n = await unsyncMountAssociations(deps.db, mountId, Date.now());
  if (n > 0 && !(await getSyncConfig(deps.db)).disabled) await enqueue(deps.env, [{ kind: "sweep", after: "", mountId }]);
  return n;
}

/** Unfinished work nobody touched for this long is re-queued by reconciliation. */
const STUCK_MS = 2 * 60_000;
/** Provider/internal failures are retried by reconciliation after this long. */
const FAILED_MS = 10 * 60_000;

/**
 * The cron reconciliation pass: re-drives associations that are stuck (unfinished, no live
 * lease) or failed on the provider's side or ours, and re-queues unfinished purges.
 */
export async function reconcile(deps: EngineDeps, now = Date.now()): Promise<{ associations: number; purges: number }> {
  if ((await getSyncConfig(deps.db)).disabled) return { associations: 0, purges: 0 };
  const msgs: SyncMessage[] = [];
  for (const a of await reconcileCandidates(deps.db, now, now - STUCK_MS, now - FAILED_MS, 500)) {
    if (a.doneGeneration >= a.generation) await bump(deps.db, a.id, a.status, now);
    msgs.push(assocMessage(a.id));
  }
  const purges = await listPurging(deps.db);
  msgs.push(...purges.map((k): SyncMessage => ({ kind: "purge", ...k })));
  await enqueue(deps.env, msgs);
  return { associations: msgs.length - purges.length, purges: purges.length };
}
