/**
 * The sync engine: what to do for one association, and doing it (DESIGN.md "Queue sync",
 * issue 6 "The engine").
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
 *   trips (issue 14): lease + row + switch; destination + secret; claims + in flight; the write
 *   records + outcome + lease release. A write's record (ownership, digest) is therefore
 *   committed with the outcome, not right after the provider call: a crash in between leaves
 *   the claim without ownership, and the next round's write records it again (the ownership a
 *   re-write finds is then "pre_existing", the safe side: never deleted, rule 2).
 * - Ordering per external secret. The outcome of generation N is recorded only if N is still
 *   the current generation (checked before the provider call by `markInFlight`, and after it by
 *   `recordOutcome`). If the generation moved while the provider call ran (say a remove arrived
 *   during a sync), the loop runs again with the newest intent before releasing the lease, so
 *   a late sync can never leave behind a secret that was since removed.
 * - Idempotence. `done_generation` marks the last generation whose outcome is final; a
 *   redelivered message for it is a no-op. Provider calls are upserts and deletes that succeed
 *   when the secret is already gone.
 * - Nothing secret leaves this module: statuses and errors carry names and provider codes only.
 * - No harm at the destination (issue 15). Before writing, the association claims each external
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
import {
  finishRound,
  getAssociation,
  leaseAndLoad,
  markInFlight,
  markInFlightStatement,
  releaseLease,
  type Association,
  type Desired,
  type ExternalEntry,
  type Outcome,
  type SyncStatus,
} from "./association-store";
import { ConnectorError, type ConnectorContext, type PutResult } from "./connectors/types";
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
import type { Granularity } from "./destinations/types";
import { destinationOf, destinationStatement, getApp, getSyncConfig, type DestinationKey, type DestinationRecord } from "./store";

export interface EngineDeps {
  env: Env;
  db: Db;
  keys: SealKeys;
}

// ---------------------------------------------------------------------------------------------
// Deciding (pure)

export interface PlannedPut {
  subKey: string;
  name: string;
  value: string;
}

export interface Plan {
  puts: PlannedPut[];
  /**
   * Names among `puts` that are not written this time but stay wanted: a drift repair (issue 15
   * rule 3, ./reconcile.ts) rewrites only the names found changed or deleted out of band.
   */
  skip?: ReadonlySet<string>;
  /** External secrets to delete, by sub-key. */
  removes: { subKey: string; name: string }[];
  /** What the association is once the plan has run. */
  target: "SYNCED" | "UNSYNCED";
}

/** The value of one key under secret-key granularity: strings as they are, the rest as JSON. */
export function keyValue(v: unknown): string {
  return typeof v === "string" ? v : JSON.stringify(v);
}

/**
 * What to do for an association. `data` is the secret's current live data (null when it has no
 * live current version); `names` the external name per sub-key for that data; `previous` what
 * the provider holds now. A removed intent or a missing secret deletes everything; otherwise
 * every wanted entry is written and every entry no longer wanted (a removed key, a renamed
 * template) is deleted.
 */
export function planOperation(desired: Desired, data: JsonObject | null, granularity: Granularity, names: Record<string, string>, previous: Record<string, ExternalEntry>): Plan {
  if (desired === "unsynced" || data === null) {
    return { puts: [], removes: Object.entries(previous).map(([subKey, e]) => ({ subKey, name: e.name })), target: "UNSYNCED" };
  }
  const puts: PlannedPut[] = [];
  if (granularity === "secret-path") {
    const name = names[""];
    if (name !== undefined) puts.push({ subKey: "", name, value: JSON.stringify(data) });
  } else {
    for (const [k, v] of Object.entries(data)) {
      const name = names[k];
      if (name !== undefined) puts.push({ subKey: k, name, value: keyValue(v) });
    }
  }
  const wanted = new Set(puts.map((p) => p.name));
  const removes = Object.entries(previous)
    .filter(([, e]) => !wanted.has(e.name))
    .map(([subKey, e]) => ({ subKey, name: e.name }));
  return { puts, removes, target: "SYNCED" };
}

/** The sync status a failure maps to (reference §1.10). */
export function failureStatus(e: unknown): SyncStatus {
  if (e instanceof ConnectorError) return e.kind === "client" ? "CLIENT_SIDE_ERROR" : "EXTERNAL_SERVICE_ERROR";
  return "INTERNAL_VAULT_ERROR";
}

/** The stored error text of a failure: the provider's code and message, never a value. */
export function failureMessage(e: unknown): string {
  if (e instanceof ConnectorError) return `${e.code}: ${e.message}`;
  return "internal error while talking to the destination; see the service log";
}

// ---------------------------------------------------------------------------------------------
// Doing

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

/** What the engine records about each external name while it runs a plan (./external-store.ts). */
interface Ledger {
  /** The recorded ownership of a name; undefined before its first write. */
  ownership(name: string): Ownership | undefined;
  /**
   * Whether the name's tags are as a write now would set them: its ownership is known and its
   * last write was made in a round that read the destination after its last change (written_at
   * is that round's start, below), so the custom tags it set are the current ones.
   */
  tagsCurrent(name: string): boolean;
  /** What the name's last write recorded as the provider's version; undefined before it. */
  version(name: string): string | undefined;
  written(p: PlannedPut, r: PutResult): Promise<void>;
  /**
   * The records of the writes made so far, as statements for the round's outcome batch
   * (./association-store.ts finishRound runs them whatever the outcome): one round trip fewer
   * per written name (issue 14). Taking them empties the list.
   */
  takeRecords(): D1PreparedStatement[];
  /** The name is gone from the provider, or (pre-existing) left there: its claim is released. */
  released(name: string): Promise<void>;
}

/**
 * Runs a plan; stops at the first failure. Returns what the provider holds afterwards, and the
 * pre-existing names it left in place instead of deleting them.
 */
async function execute(
  ctx: ConnectorContext,
  plan: Plan,
  previous: Record<string, ExternalEntry>,
  ledger: Ledger,
): Promise<{ external: Record<string, ExternalEntry>; error: unknown; left: string[] }> {
  const connector = providerOf(ctx.dest.type).connector;
  const external: Record<string, ExternalEntry> = { ...previous };
  const left: string[] = [];
  try {
    for (const p of plan.puts) {
      if (plan.skip?.has(p.name)) continue;
      // A rename under the same sub-key keeps the old name on record (key "<sub>\0old") until
      // the removes below delete it at the provider, so a failure in between orphans nothing.
      const ownership = ledger.ownership(p.name);
      const version = ledger.version(p.name);
      const r = await connector.put(
        ctx,
        ownership === undefined
          ? { name: p.name, value: p.value }
          : { name: p.name, value: p.value, ownership, tagsCurrent: ledger.tagsCurrent(p.name), ...(version === undefined ? {} : { version }) },
      );
      await ledger.written(p, r);
      const old = external[p.subKey];
      if (old && old.name !== p.name) external[`${p.subKey}\u0000old`] = old;
      external[p.subKey] = { name: p.name, status: "SYNCED", updatedAt: Date.now() };
    }
    for (const r of plan.removes) {
      // Never delete what Lanyard did not create (issue 15 rule 2): a pre-existing secret stays.
      // A connector whose names are several objects deletes only the ones Lanyard recorded.
      const ownership = ledger.ownership(r.name);
      const version = ledger.version(r.name);
      if (ownership === "pre_existing") left.push(r.name);
      if (ownership !== "pre_existing" || connector.removesOnlyOwnParts) await connector.remove(ctx, r.name, { ownership, ...(version === undefined ? {} : { version }) });
      await ledger.released(r.name);
      // r.name is not wanted any more, so no entry written above carries it.
      for (const [k, e] of Object.entries(external)) if (e.name === r.name) delete external[k];
    }
    for (const k of Object.keys(external)) if (k.endsWith("\u0000old")) delete external[k];
    return { external, error: null, left };
  } catch (e) {
    return { external, error: e, left };
  }
}

/**
 * Claims the names a plan writes (issue 15 rule 1) and marks the generation in flight, in one D1
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
  // Names this association wrote before ownership was recorded (rows synced before issue 15)
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
        // The outcome's batch released the lease with it (./association-store.ts finishRound).
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
  let outcome: Outcome;
  let retryable = false;
  let retryAfter: number | undefined;
  let retryDelaySeconds: number | undefined;
  // The records of what was written go in the outcome's batch, whatever the outcome.
  const before: D1PreparedStatement[] = ledger.takeRecords();
  if (error === null) {
    // Every name the association no longer writes is released (gone, left, or never written):
    // in the outcome's batch, unless it keeps more names than one statement can bind.
    const keep = plan.target === "SYNCED" ? plan.puts.map((p) => p.name) : [];
    if (keep.length <= MAX_KEEP_IN_STATEMENT) before.push(releaseAllExceptStatement(deps.db, key, a.id, keep));
    else await releaseAllExcept(deps.db, key, a.id, keep);
    outcome = collision
      ? { status: "CLIENT_SIDE_ERROR", external, lastError: collision, done: true, nextRetryAt: null, deadLetter: false }
      : { status: plan.target, external, lastError: null, done: true, nextRetryAt: null, deadLetter: false };
  } else {
    if (!(error instanceof ConnectorError)) {
      console.error(`sync: association ${a.id} failed:`, error instanceof Error ? `${error.name}: ${error.message}` : "unknown error");
    }
    retryable = !(error instanceof ConnectorError) || error.retryable;
    retryAfter = error instanceof ConnectorError ? error.retryAfter : undefined;
    const willRetry = retryable && !finalOnRetryable;
    if (willRetry) retryDelaySeconds = backoffSeconds(a.attempts + 1, retryAfter);
    outcome = {
      status: failureStatus(error),
      external,
      lastError: failureMessage(error),
      done: !willRetry,
      nextRetryAt: retryDelaySeconds === undefined ? null : Date.now() + retryDelaySeconds * 1000,
      deadLetter: retryable && finalOnRetryable,
    };
  }
  const r = await finish(outcome, before);
  return { ...r, retryable: retryable && !outcome.done, retryAfter, retryDelaySeconds };
}
