/**
 * Drift reconciliation (docs/secrets-sync.md "3. Drift is detected and repaired"). Vault's Secrets Sync is one-way and does not notice a
 * synced secret changed or deleted at the provider (hashicorp/vault#25576, the docs of its reconciliation: "out-of-band edits at the
 * destination are explicitly not corrected"); Lanyard compares each synced external secret with
 * what it last wrote and rewrites it from the source.
 *
 * - What is compared: for each name an association wrote (./external-store.ts, its
 *   sync_external_secrets row), the provider's copy read back (each provider's read.ts) against
 *   the HMAC of the value Lanyard last wrote (./digest.ts) where the provider returns the value
 *   (cloudone-sm, cloudtwo-kv, cloudthree-sm, webhost-project), against the provider's
 *   `updated_at` its own write produced where it cannot (repohost). Gone (deleted, AWS scheduled
 *   for deletion, Key Vault soft-deleted) is drift too. A name without that record (written
 *   before it was kept) is not judged until Lanyard writes it again.
 * - Which associations: settled ones only (SYNCED, nothing pending, not a dead letter), checked
 *   under the association's lease, so the engine cannot be writing while the copy is read, and a
 *   secret being synced is never mistaken for drift.
 * - What happens: `drift_detected_at` and `drift_count` are stamped (./external-store.ts
 *   recordDrift); with the destination's `drift_repair` (default true) the association's
 *   generation is bumped and the engine rewrites just the drifted names from the source (a
 *   secret scheduled for deletion is restored, a soft-deleted one recovered, the connectors' own
 *   ways); with `drift_repair: false` nothing is written, and a drift that stays is found (and
 *   counted) again at each pass.
 * - When: every `reconcile_interval` of sys/sync/config (seconds, default 1h, 0 = never) on the
 *   minute cron, aligned to the epoch (a 1h interval runs at the top of each hour; the schedule
 *   needs no stored state), and on demand with POST sys/sync/destinations/:type/:name/reconcile.
 *   Both go through the queue: a sweep message queues one `drift` message per association, a
 *   page at a time. Nothing runs while sync is disabled. Read-backs pass the provider-limits
 *   gate like every other request (./limits.ts).
 * - Nothing secret leaves: read-back values go straight into the HMAC comparison; logs carry
 *   association ids and external names only.
 */
import { acquireLease, releaseLease } from "./association-runs";
import { bump, countDriftCandidates, driftCandidateIds, getAssociation, isDriftCandidate } from "./association-store";
import type { ReadBack } from "./connectors/read-back";
import { providerOf } from "./providers/registry";
import { ConnectorError, type ConnectorContext } from "./connectors/types";
import { digestContext, digestMatches } from "./digest";
import { drive, type EngineDeps } from "./engine";
import { externalSecretsOf, recordDrift, type ExternalSecretRow } from "./external-store";
import { backoffSeconds, enqueue, type SyncMessage } from "./messages";
import { getApp, getDestination, getSyncConfig, type DestinationKey } from "./store";

/** Associations one drift-sweep message queues. */
const DRIFT_PAGE = 1000;
/** How long a drift check may hold an association: every read-back of it. */
const LEASE_MS = 120_000;
const CRON_PERIOD_MS = 60_000;

/**
 * Whether the minute cron that fired at `scheduledTime` starts a drift pass: when a new period of
 * `intervalSeconds` (counted from the epoch) began within the last minute; every minute for an
 * interval of a minute or less; never for 0.
 */
export function driftPassDue(intervalSeconds: number, scheduledTime: number): boolean {
  if (!(intervalSeconds > 0)) return false;
  const period = intervalSeconds * 1000;
  if (period <= CRON_PERIOD_MS) return true;
  return Math.floor(scheduledTime / period) !== Math.floor((scheduledTime - CRON_PERIOD_MS) / period);
}

/** The cron's part: queues a drift pass over every destination when one is due. */
export async function startDriftPass(deps: EngineDeps, scheduledTime: number): Promise<boolean> {
  const cfg = await getSyncConfig(deps.db);
  if (cfg.disabled || !driftPassDue(cfg.reconcileInterval, scheduledTime)) return false;
  await enqueue(deps.env, [{ kind: "drift-sweep", after: "" }]);
  return true;
}

/**
 * POST sys/sync/destinations/:type/:name/reconcile: queues a drift check of every settled
 * association of the destination; returns how many.
 */
export async function queueDestinationReconcile(deps: EngineDeps, key: DestinationKey): Promise<number> {
  const n = await countDriftCandidates(deps.db, key);
  if (n > 0) await enqueue(deps.env, [{ kind: "drift-sweep", after: "", destination: { namespaceId: key.namespaceId, type: key.type, name: key.name } }]);
  return n;
}

/** One drift-sweep message: queues the next page of drift checks, and the sweep after it. */
export async function driftSweep(deps: EngineDeps, after: string, destination?: DestinationKey, page = DRIFT_PAGE): Promise<number> {
  if ((await getSyncConfig(deps.db)).disabled) return 0;
  const ids = await driftCandidateIds(deps.db, after, page, destination);
  const msgs: SyncMessage[] = ids.map((id) => ({ kind: "drift", id }));
  const last = ids[ids.length - 1];
  if (ids.length === page && last !== undefined) msgs.push(destination ? { kind: "drift-sweep", after: last, destination } : { kind: "drift-sweep", after: last });
  await enqueue(deps.env, msgs);
  return ids.length;
}

/** Whether the provider's copy is no longer what Lanyard last wrote. */
async function drifted(deps: EngineDeps, key: DestinationKey, row: ExternalSecretRow, back: ReadBack): Promise<boolean> {
  switch (back.kind) {
    case "absent":
    case "changed":
      return true;
    case "value":
      return row.valueHmac !== null && !(await digestMatches(deps.keys, row.valueHmac, digestContext(key, row.name), back.value));
    case "meta":
      return row.providerUpdatedAt !== null && back.updatedAt !== row.providerUpdatedAt;
  }
}

export type DriftCheck =
  | { kind: "skipped" }
  | { kind: "busy" }
  /** A read-back failed; retry after `delaySeconds` when `retryable`. */
  | { kind: "failed"; retryable: boolean; delaySeconds: number }
  | { kind: "checked"; drifted: string[]; repaired: boolean };

/** One `drift` message: reads back an association's external secrets and repairs or reports drift. */
export async function checkDrift(deps: EngineDeps, id: string): Promise<DriftCheck> {
  if ((await getSyncConfig(deps.db)).disabled) return { kind: "skipped" };
  const token = crypto.randomUUID();
  if (!(await acquireLease(deps.db, id, token, Date.now(), LEASE_MS))) return (await getAssociation(deps.db, id)) ? { kind: "busy" } : { kind: "skipped" };
  const found: string[] = [];
  let repair = false;
  let label = "";
  try {
    const a = await getAssociation(deps.db, id);
    if (!a || !isDriftCandidate(a)) return { kind: "skipped" };
    const key: DestinationKey = { namespaceId: a.namespaceId, type: a.destinationType, name: a.destinationName };
    const dest = await getDestination(deps.db, deps.keys, key);
    if (!dest || dest.purgeInitiatedAt !== null) return { kind: "skipped" };
    repair = dest.options.driftRepair;
    label = `${dest.type}/${dest.name}`;
    const provider = providerOf(dest.type);
    const ctx: ConnectorContext = { env: deps.env, dest, loadApp: (name) => getApp(deps.db, deps.keys, a.namespaceId, name), limits: provider.limits };
    const read = provider.read;
    for (const row of await externalSecretsOf(deps.db, id)) {
      if (row.ownership === null || row.writtenAt === null) continue;
      if (await drifted(deps, key, row, await read(ctx, row.name))) found.push(row.name);
    }
  } catch (e) {
    if (!(e instanceof ConnectorError)) throw e;
    console.error(`sync reconcile: reading back association ${id} failed: ${e.code}: ${e.message}`);
    return { kind: "failed", retryable: e.retryable, delaySeconds: backoffSeconds(1, e.retryAfter) };
  } finally {
    await releaseLease(deps.db, id, token);
  }
  if (found.length === 0) return { kind: "checked", drifted: [], repaired: false };
  await recordDrift(deps.db, id, Date.now());
  const names = found.slice(0, 5).join(", ") + (found.length > 5 ? ` and ${found.length - 5} more` : "");
  console.log(`sync reconcile: ${label}: association ${id}: changed or deleted out of band: ${names}; ${repair ? "rewriting from the source" : "drift_repair is false, reported only"}`);
  if (!repair) return { kind: "checked", drifted: found, repaired: false };
  const b = await bump(deps.db, id, "PENDING", Date.now());
  if (!b) return { kind: "checked", drifted: found, repaired: false };
  const r = await drive(deps, id, { finalOnRetryable: false, repair: { generation: b.generation, names: found } });
  // Not finished now (busy, or a retryable failure): the queue converges it, the whole association.
  if (r.kind === "busy") await enqueue(deps.env, [{ kind: "association", id }]);
  else if (r.kind === "done" && r.retryable) await enqueue(deps.env, [{ kind: "association", id }], r.retryDelaySeconds ?? backoffSeconds(1, r.retryAfter));
  return { kind: "checked", drifted: found, repaired: true };
}
