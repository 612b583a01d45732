/**
 * The sync engine: driving one association to its latest intent (./plan.ts decides what to do,
 * ./execute.ts runs it against the provider).
 *
 * INVARIANTS
 * - Intent, not commands. Every trigger (set, remove, KV change, purge, reconcile) records the
 *   user's latest intent on the association (`desired`) and bumps its `generation`. The engine
 *   never replays an old operation: it reads the current intent and the current secret and
 *   converges the provider to them (`planOperation`). So a message delivered twice, late, or
 *   after a newer one does no harm: it makes the engine look again.
 * - One worker per association. `drive` holds a lease on the row while it talks to the provider;
 *   a second worker finds it busy and retries later. Leases expire, so a crash frees the row.
 *   The lease is taken in the same D1 batch that reads the row, and released in the batch that
 *   records the outcome, only when that outcome was recorded. A one-name sync is 4 D1 round
 *   trips: lease + row + switch; destination + secret; claims + in flight; the write
 *   records + outcome + lease release. A write's record (ownership, digest) is therefore
 *   committed with the outcome, not right after the provider call: a crash in between leaves
 *   the claim without ownership, and the next round's write records it again (the ownership a
 *   re-write finds is then "pre_existing", the safe side: never deleted, rule 2).
 * - Ordering per external secret. The outcome of generation N is recorded only if N is still
 *   the current generation (checked before the provider call by `markInFlight`, and after it by
 *   `finishRound`). If the generation moved while the provider call ran (say a remove arrived
 *   during a sync), the loop runs again with the newest intent before releasing the lease, so
 *   a late sync can never leave behind a secret that was since removed.
 * - Idempotence. `done_generation` marks the last generation whose outcome is final; a
 *   redelivered message for it is a no-op. Provider calls are upserts and deletes that succeed
 *   when the secret is already gone.
 * - Nothing secret leaves this module: statuses and errors carry names and provider codes only.
 * - No harm at the destination (docs/secrets-sync.md "What Lanyard guarantees at the destination"). Before writing, the association claims each external
 *   name (./external-store.ts claimNames, one conditional upsert per name): a name another
 *   association of the destination holds is not written, and the association ends
 *   CLIENT_SIDE_ERROR naming the holder's `<mount>/<secret_name>` (rule 1). The first write of a
 *   name records whether Lanyard created it or found it (rule 2); a found (`pre_existing`) name is
 *   overwritten, as Vault does, but never deleted: unsyncing it only releases the claim.
 * - Drift repair (rule 3): a reconciliation that found names changed or deleted out of band bumps
 *   the generation and drives it with `repair`: that generation writes only those names (the plan
 *   keeps the others wanted, so nothing is released); a newer generation converges as usual.
 * - Failures are visible (rule 5): each outcome stamps `last_attempt_at`; a retryable failure
 *   records `next_retry_at` and the delay the caller must queue the retry with
 *   (`retryDelaySeconds`); a retryable failure that is final is a dead letter.
 */
import type { Db } from "../../core/db/client";
import type { SealKeys } from "../../core/db/seal";
import * as kvStore from "../kv";
import { isLive, type JsonObject } from "../kv";
import { finishRound, leaseAndLoad, markInFlight, markInFlightStatement, releaseLease, type Outcome } from "./association-runs";
import { getAssociation, type Association, type ExternalEntry } from "./association-store";
import { execute, type Ledger } from "./execute";
import { failureMessage, failureStatus, planOperation, type Plan } from "./plan";
import { ConnectorError, type ConnectorContext } from "./connectors/types";
import { digestContext, valueDigest } from "./digest";
import {
  associationLabel,
  claimStatements,
  externalSecretsStatement,
  heldRows,
  lostClaims,
  nameKey,
  recordWriteStatement,
  releaseAllExcept,
  releaseAllExceptStatement,
  releaseNames,
  type Ownership,
} from "./external-store";
import { backoffSeconds } from "./messages";
import { renderSecretName } from "./destinations/options";
import { providerOf } from "./providers/registry";
import { destinationOf, destinationStatement, getApp, getSyncConfig, type DestinationKey, type DestinationRecord } from "./store";

export interface EngineDeps {
  env: Env;
  db: Db;
  keys: SealKeys;
}

export type DriveResult =
  | { kind: "busy" }
  | { kind: "gone" }
  | { kind: "parked"; assoc: Association }
  | { kind: "done"; assoc: Association; retryable: boolean; retryAfter?: number; retryDelaySeconds?: number };

/** How long one worker may hold an association: enough for every provider call of a sync. */
const LEASE_MS = 120_000;
/** Rounds of "the generation moved while we worked, look again" before handing over. */
const MAX_ROUNDS = 4;

async function namespacePath(db: Db, id: string): Promise<string> {
  if (id === "root") return "";
  const r = await db.$client.prepare("SELECT path FROM namespaces WHERE id = ?").bind(id).first<{ path: string }>();
  return r?.path ?? "";
}

/**
 * The association's destination and the stored current version of its secret (when the intent
 * is to sync it), in one D1 round trip.
 */
async function loadRound(deps: EngineDeps, a: Association, key: DestinationKey): Promise<{ dest: DestinationRecord | null; version: kvStore.StoredVersion | null }> {
  const wantsData = a.desired === "synced";
  const [destRow, versionRow] = await deps.db.$client.batch([
    destinationStatement(deps.db, key),
    ...(wantsData ? [kvStore.currentVersionStatement(deps.db, a.mountId, a.secretName)] : []),
  ]);
  return { dest: await destinationOf(deps.keys, key, destRow), version: wantsData ? kvStore.currentVersionOf(versionRow) : null };
}

/** The live data of the secret's current version, or null (deleted, destroyed, never written). */
async function openSecret(deps: EngineDeps, a: Association, v: kvStore.StoredVersion | null): Promise<JsonObject | null> {
  if (!v || !isLive(v, Date.now())) return null;
  return kvStore.openVersionData(deps.keys, a.mountId, a.secretName, v);
}

async function externalNames(deps: EngineDeps, a: Association, dest: DestinationRecord, data: JsonObject | null): Promise<Record<string, string>> {
  const names: Record<string, string> = {};
  if (!data) return names;
  const def = providerOf(dest.type);
  const base = {
    destinationType: dest.type,
    destinationName: dest.name,
    namespacePath: await namespacePath(deps.db, a.namespaceId),
    namespaceId: a.namespaceId,
    mountPath: a.mountPath,
    mountAccessor: a.mountAccessor,
    secretPath: a.secretName,
  };
  const keys = dest.options.granularity === "secret-path" ? [""] : Object.keys(data);
  for (const k of keys) names[k] = await renderSecretName(def, dest.options, { ...base, secretKey: k });
  return names;
}

/**
 * Claims the names a plan writes (docs/secrets-sync.md "1. Collisions are refused, not fought over") and marks the generation in flight, in one D1
 * batch: the claims (one conditional upsert per name), the association's names as they stand
 * after them, and `markInFlight` (conditional on the generation). Names another association
 * holds are dropped from the plan; the message names the holder of the first one. Also returns
 * the ledger that records ownership and writes for this association, and whether the generation
 * was still current (false: nothing is to be sent, the caller looks again).
 */
async function claimAndLedger(
  deps: EngineDeps,
  a: Association,
  dest: DestinationRecord,
  roundStart: number,
  plan: Plan,
): Promise<{ plan: Plan; collision: string | null; ledger: Ledger; current: boolean }> {
  const key: DestinationKey = { namespaceId: dest.namespaceId, type: dest.type, name: dest.name };
  let collision: string | null = null;
  const claims = plan.puts.map((p) => ({ subKey: p.subKey, name: p.name }));
  const results = await deps.db.$client.batch([
    ...claimStatements(deps.db, key, a.id, claims, Date.now()),
    externalSecretsStatement(deps.db, a.id),
    markInFlightStatement(deps.db, a.id, a.generation, plan.target === "SYNCED" ? "SYNCING" : "UNSYNCING", Date.now()),
  ]);
  const lost = lostClaims(a.id, claims, results.slice(0, claims.length));
  const current = (results[claims.length + 1]?.meta.changes ?? 0) === 1;
  if (lost.length > 0) {
    const gone = new Set(lost.map((l) => l.name));
    plan = { ...plan, puts: plan.puts.filter((p) => !gone.has(p.name)) };
    const first = lost[0];
    if (first) {
      const more = lost.length > 1 ? ` (and ${lost.length - 1} more name${lost.length > 2 ? "s" : ""})` : "";
      collision =
        `the external secret "${first.name}"${more} is already synced to this destination by ${await associationLabel(deps.db, first.ownerId)}; ` +
        "it was not written. Change the secret name template or remove the other association, then set this one again";
    }
  }
  const held = new Map<string, Ownership | null>();
  const writtenAt = new Map<string, number | null>();
  const versions = new Map<string, string | null>();
  for (const r of heldRows(results[claims.length])) {
    held.set(r.nameKey, r.ownership);
    writtenAt.set(r.nameKey, r.writtenAt);
    versions.set(r.nameKey, r.providerVersion);
  }
  // Names this association wrote before ownership was recorded (rows synced before it was)
  // are Lanyard's, as they were then: they keep being deleted on unsync.
  const legacy = new Set(Object.values(a.external).map((e) => nameKey(key.type, e.name)));
  let records: D1PreparedStatement[] = [];
  const ledger: Ledger = {
    ownership(name) {
      const k = nameKey(key.type, name);
      const o = held.get(k);
      if (o) return o;
      return legacy.has(k) ? "created_by_lanyard" : undefined;
    },
    tagsCurrent(name) {
      const k = nameKey(key.type, name);
      const at = writtenAt.get(k);
      return Boolean(held.get(k)) && at !== undefined && at !== null && at > dest.updatedAt;
    },
    version(name) {
      return versions.get(nameKey(key.type, name)) ?? undefined;
    },
    async written(p, r) {
      const k = nameKey(key.type, p.name);
      // Objects under the name that Lanyard did not create make it pre-existing, whenever found.
      const ownership: Ownership = r.foreign ? "pre_existing" : (this.ownership(p.name) ?? (r.created ? "created_by_lanyard" : "pre_existing"));
      held.set(k, ownership);
      writtenAt.set(k, roundStart);
      versions.set(k, r.version ?? null);
      const valueHmac = await valueDigest(deps.keys, digestContext(key, p.name), p.value);
      const record = { ownership, forceOwnership: r.foreign === true, valueHmac, providerVersion: r.version ?? null, providerUpdatedAt: r.updatedAt ?? null };
      // written_at is the start of this round, before it read the destination (tagsCurrent).
      records.push(recordWriteStatement(deps.db, key, a.id, p.name, record, roundStart));
    },
    takeRecords() {
      const taken = records;
      records = [];
      return taken;
    },
    async released(name) {
      await releaseNames(deps.db, key, a.id, [name]);
    },
  };
  return { plan, collision, ledger, current };
}

/** A drift repair: in generation `generation`, write only `names` (the rest is as Lanyard left it). */
export interface Repair {
  generation: number;
  names: readonly string[];
}

/**
 * Converges one association to its latest intent. `finalOnRetryable` says whether a retryable
 * failure ends this generation (no more retries) or leaves it open for the caller to retry.
 * With `repair`, that generation writes only the repaired names; any newer one converges fully.
 */
export async function drive(deps: EngineDeps, id: string, opts: { finalOnRetryable: boolean; repair?: Repair }): Promise<DriveResult> {
  const token = crypto.randomUUID();
  // One round trip takes the lease and reads the row and the disabled switch (the first round's
  // reads); later rounds, after the generation moved, read them again.
  const start = await leaseAndLoad(deps.db, id, token, Date.now(), LEASE_MS);
  if (!start.assoc) return { kind: "gone" };
  if (!start.leased) return { kind: "busy" };
  let released = false;
  try {
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const a = round === 0 ? start.assoc : await getAssociation(deps.db, id);
      if (!a) return { kind: "gone" };
      if (a.doneGeneration >= a.generation) return { kind: "done", assoc: a, retryable: false };
      if (round === 0 ? start.disabled : (await getSyncConfig(deps.db)).disabled) {
        if (a.status !== "PENDING") await markInFlight(deps.db, id, a.generation, "PENDING", Date.now());
        return { kind: "parked", assoc: (await getAssociation(deps.db, id)) ?? a };
      }
      const only = opts.repair && opts.repair.generation === a.generation ? new Set(opts.repair.names) : undefined;
      const result = await runOnce(deps, a, token, opts.finalOnRetryable, only);
      if (result.current) {
        // The outcome's batch released the lease with it (./association-runs.ts finishRound).
        released = true;
        return { kind: "done", assoc: result.assoc ?? a, retryable: result.retryable, retryAfter: result.retryAfter, retryDelaySeconds: result.retryDelaySeconds };
      }
      // The generation moved while the provider call ran: look again with the newest intent.
    }
    return { kind: "busy" };
  } finally {
    if (!released) await releaseLease(deps.db, id, token);
  }
}

interface RoundResult {
  /** The outcome was recorded for the current generation (and the lease released with it). */
  current: boolean;
  /** The row after the outcome (when recorded). */
  assoc?: Association | null;
  retryable: boolean;
  retryAfter?: number;
  retryDelaySeconds?: number;
}

/** Most names one DELETE ... NOT IN (...) may keep: D1 binds at most 100 parameters per statement. */
const MAX_KEEP_IN_STATEMENT = 90;

async function runOnce(deps: EngineDeps, a: Association, token: string, finalOnRetryable: boolean, only?: ReadonlySet<string>): Promise<RoundResult> {
  const gen = a.generation;
  const roundStart = Date.now();
  const finish = async (o: Outcome, before: D1PreparedStatement[] = []) => {
    const r = await finishRound(deps.db, a.id, gen, o, Date.now(), token, before);
    return { current: r.current, assoc: r.assoc };
  };
  // Reading or preparing failed (D1, a stored value that does not open): retried with backoff.
  const prepareFailed = async (e: unknown): Promise<RoundResult> => {
    console.error(`sync: preparing association ${a.id} failed:`, e instanceof Error ? `${e.name}: ${e.message}` : "unknown error");
    const delay = backoffSeconds(a.attempts + 1);
    const o: Outcome = {
      status: "INTERNAL_VAULT_ERROR",
      external: a.external,
      lastError: failureMessage(e),
      done: finalOnRetryable,
      nextRetryAt: finalOnRetryable ? null : Date.now() + delay * 1000,
      deadLetter: finalOnRetryable,
    };
    return { ...(await finish(o)), retryable: !finalOnRetryable, retryDelaySeconds: delay };
  };
  const key: DestinationKey = { namespaceId: a.namespaceId, type: a.destinationType, name: a.destinationName };
  let loaded: Awaited<ReturnType<typeof loadRound>>;
  try {
    loaded = await loadRound(deps, a, key);
  } catch (e) {
    return prepareFailed(e);
  }
  const dest = loaded.dest;
  if (!dest) {
    const o: Outcome = { status: "INTERNAL_VAULT_ERROR", external: a.external, lastError: "the destination no longer exists", done: true, nextRetryAt: null, deadLetter: false };
    return { ...(await finish(o)), retryable: false };
  }
  let plan: Plan;
  let collision: string | null;
  let ledger: Ledger;
  let inFlight: boolean;
  try {
    const data = a.desired === "synced" ? await openSecret(deps, a, loaded.version) : null;
    const names = await externalNames(deps, a, dest, data);
    ({ plan, collision, ledger, current: inFlight } = await claimAndLedger(deps, a, dest, roundStart, planOperation(a.desired, data, dest.options.granularity, names, a.external)));
    if (only) plan = { ...plan, skip: new Set(plan.puts.map((p) => p.name).filter((n) => !only.has(n))) };
  } catch (e) {
    return prepareFailed(e);
  }
  // The generation moved before anything was sent (claimAndLedger's markInFlight): look again.
  if (!inFlight) return { current: false, retryable: false };
  const ctx: ConnectorContext = { env: deps.env, dest, loadApp: (name) => getApp(deps.db, deps.keys, a.namespaceId, name), limits: providerOf(dest.type).limits };
  const { external, error } = await execute(ctx, plan, a.external, ledger);
  // The records of what was written go in the outcome's batch, whatever the outcome.
  const before: D1PreparedStatement[] = ledger.takeRecords();
  if (error !== null) {
    const f = failedOutcome(a, error, external, finalOnRetryable);
    const r = await finish(f.outcome, before);
    return { ...r, retryable: f.retryable && !f.outcome.done, retryAfter: f.retryAfter, retryDelaySeconds: f.retryDelaySeconds };
  }
  // Every name the association no longer writes is released (gone, left, or never written):
  // in the outcome's batch, unless it keeps more names than one statement can bind.
  const keep = plan.target === "SYNCED" ? plan.puts.map((p) => p.name) : [];
  if (keep.length <= MAX_KEEP_IN_STATEMENT) before.push(releaseAllExceptStatement(deps.db, key, a.id, keep));
  else await releaseAllExcept(deps.db, key, a.id, keep);
  const outcome: Outcome = collision
    ? { status: "CLIENT_SIDE_ERROR", external, lastError: collision, done: true, nextRetryAt: null, deadLetter: false }
    : { status: plan.target, external, lastError: null, done: true, nextRetryAt: null, deadLetter: false };
  return { ...(await finish(outcome, before)), retryable: false };
}

/** The outcome of a plan that failed at the provider, and whether and when the queue retries it. */
function failedOutcome(
  a: Association,
  error: unknown,
  external: Record<string, ExternalEntry>,
  finalOnRetryable: boolean,
): { outcome: Outcome; retryable: boolean; retryAfter?: number; retryDelaySeconds?: number } {
  if (!(error instanceof ConnectorError)) {
    console.error(`sync: association ${a.id} failed:`, error instanceof Error ? `${error.name}: ${error.message}` : "unknown error");
  }
  const retryable = !(error instanceof ConnectorError) || error.retryable;
  const retryAfter = error instanceof ConnectorError ? error.retryAfter : undefined;
  const willRetry = retryable && !finalOnRetryable;
  const retryDelaySeconds = willRetry ? backoffSeconds(a.attempts + 1, retryAfter) : undefined;
  const outcome: Outcome = {
    status: failureStatus(error),
    external,
    lastError: failureMessage(error),
    done: !willRetry,
    nextRetryAt: retryDelaySeconds === undefined ? null : Date.now() + retryDelaySeconds * 1000,
    deadLetter: retryable && finalOnRetryable,
  };
  return { outcome, retryable, retryAfter, retryDelaySeconds };
}
