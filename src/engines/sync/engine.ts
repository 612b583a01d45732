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
 * - Ordering per external secret. The outcome of generation N is recorded only if N is still
 *   the current generation (checked before the provider call by `markInFlight`, and after it by
 *   `recordOutcome`). If the generation moved while the provider call ran (say a remove arrived
 *   during a sync), the loop runs again with the newest intent before releasing the lease, so
 *   a late sync can never leave behind a secret that was since removed.
 * - Idempotence. `done_generation` marks the last generation whose outcome is final; a
 *   redelivered message for it is a no-op. Provider calls are upserts and deletes that succeed
 *   when the secret is already gone.
 * - Nothing secret leaves this module: statuses and errors carry names and provider codes only.
 */
import type { Db } from "../../core/db/client";
import type { SealKeys } from "../../core/db/seal";
import * as kvStore from "../kv";
import { isLive, type JsonObject } from "../kv";
import {
  acquireLease,
  getAssociation,
  markInFlight,
  recordOutcome,
  releaseLease,
  type Association,
  type Desired,
  type ExternalEntry,
  type Outcome,
  type SyncStatus,
} from "./association-store";
import { CONNECTORS } from "./connectors/registry";
import { ConnectorError, type ConnectorContext } from "./connectors/types";
import { renderSecretName } from "./destinations/options";
import { DESTINATIONS } from "./destinations/registry";
import type { Granularity } from "./destinations/types";
import { getApp, getDestination, getSyncConfig, type DestinationRecord } from "./store";

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
  | { kind: "done"; assoc: Association; retryable: boolean; retryAfter?: number };

/** How long one worker may hold an association: enough for every provider call of a sync. */
const LEASE_MS = 120_000;
/** Rounds of "the generation moved while we worked, look again" before handing over. */
const MAX_ROUNDS = 4;

async function namespacePath(db: Db, id: string): Promise<string> {
  if (id === "root") return "";
  const r = await db.$client.prepare("SELECT path FROM namespaces WHERE id = ?").bind(id).first<{ path: string }>();
  return r?.path ?? "";
}

/** The live data of the secret's current version, or null (deleted, destroyed, never written). */
async function loadSecret(deps: EngineDeps, a: Association): Promise<JsonObject | null> {
  const meta = await kvStore.getMetadata(deps.db, a.mountId, a.secretName);
  if (!meta || meta.currentVersion === 0) return null;
  const v = await kvStore.getVersion(deps.db, a.mountId, a.secretName, meta.currentVersion);
  if (!v || !isLive(v, Date.now())) return null;
  return kvStore.openVersionData(deps.keys, a.mountId, a.secretName, v);
}

async function externalNames(deps: EngineDeps, a: Association, dest: DestinationRecord, data: JsonObject | null): Promise<Record<string, string>> {
  const names: Record<string, string> = {};
  if (!data) return names;
  const def = DESTINATIONS[dest.type];
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

/** Runs a plan; stops at the first failure. Returns what the provider holds afterwards. */
async function execute(ctx: ConnectorContext, plan: Plan, previous: Record<string, ExternalEntry>): Promise<{ external: Record<string, ExternalEntry>; error: unknown }> {
  const connector = CONNECTORS[ctx.dest.type];
  const external: Record<string, ExternalEntry> = { ...previous };
  try {
    for (const p of plan.puts) {
      // A rename under the same sub-key keeps the old name on record (key "<sub>\0old") until
      // the removes below delete it at the provider, so a failure in between orphans nothing.
      await connector.put(ctx, { name: p.name, value: p.value });
      const old = external[p.subKey];
      if (old && old.name !== p.name) external[`${p.subKey}\u0000old`] = old;
      external[p.subKey] = { name: p.name, status: "SYNCED", updatedAt: Date.now() };
    }
    for (const r of plan.removes) {
      await connector.remove(ctx, r.name);
      // r.name is not wanted any more, so no entry written above carries it.
      for (const [k, e] of Object.entries(external)) if (e.name === r.name) delete external[k];
    }
    for (const k of Object.keys(external)) if (k.endsWith("\u0000old")) delete external[k];
    return { external, error: null };
  } catch (e) {
    return { external, error: e };
  }
}

/**
 * Converges one association to its latest intent. `finalOnRetryable` says whether a retryable
 * failure ends this generation (no more retries) or leaves it open for the caller to retry.
 */
export async function drive(deps: EngineDeps, id: string, opts: { finalOnRetryable: boolean }): Promise<DriveResult> {
  const token = crypto.randomUUID();
  if (!(await acquireLease(deps.db, id, token, Date.now(), LEASE_MS))) {
    return (await getAssociation(deps.db, id)) ? { kind: "busy" } : { kind: "gone" };
  }
  try {
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const a = await getAssociation(deps.db, id);
      if (!a) return { kind: "gone" };
      if (a.doneGeneration >= a.generation) return { kind: "done", assoc: a, retryable: false };
      if ((await getSyncConfig(deps.db)).disabled) {
        if (a.status !== "PENDING") await markInFlight(deps.db, id, a.generation, "PENDING", Date.now());
        return { kind: "parked", assoc: (await getAssociation(deps.db, id)) ?? a };
      }
      const result = await runOnce(deps, a, opts.finalOnRetryable);
      if (result.current) {
        const after = (await getAssociation(deps.db, id)) ?? a;
        return { kind: "done", assoc: after, retryable: result.retryable, retryAfter: result.retryAfter };
      }
      // The generation moved while the provider call ran: look again with the newest intent.
    }
    return { kind: "busy" };
  } finally {
    await releaseLease(deps.db, id, token);
  }
}

async function runOnce(deps: EngineDeps, a: Association, finalOnRetryable: boolean): Promise<{ current: boolean; retryable: boolean; retryAfter?: number }> {
  const gen = a.generation;
  const dest = await getDestination(deps.db, deps.keys, { namespaceId: a.namespaceId, type: a.destinationType, name: a.destinationName });
  if (!dest) {
    const o: Outcome = { status: "INTERNAL_VAULT_ERROR", external: a.external, lastError: "the destination no longer exists", done: true, nextRetryAt: null, deadLetter: false };
    return { current: await recordOutcome(deps.db, a.id, gen, o, Date.now()), retryable: false };
  }
  let plan: Plan;
  try {
    const data = a.desired === "synced" ? await loadSecret(deps, a) : null;
    const names = await externalNames(deps, a, dest, data);
    plan = planOperation(a.desired, data, dest.options.granularity, names, a.external);
  } catch (e) {
    console.error(`sync: preparing association ${a.id} failed:`, e instanceof Error ? `${e.name}: ${e.message}` : "unknown error");
    const o: Outcome = { status: "INTERNAL_VAULT_ERROR", external: a.external, lastError: failureMessage(e), done: finalOnRetryable, nextRetryAt: null, deadLetter: finalOnRetryable };
    return { current: await recordOutcome(deps.db, a.id, gen, o, Date.now()), retryable: true };
  }
  if (!(await markInFlight(deps.db, a.id, gen, plan.target === "SYNCED" ? "SYNCING" : "UNSYNCING", Date.now()))) {
    return { current: false, retryable: false };
  }
  const ctx: ConnectorContext = { env: deps.env, dest, loadApp: (name) => getApp(deps.db, deps.keys, a.namespaceId, name) };
  const { external, error } = await execute(ctx, plan, a.external);
  let outcome: Outcome;
  let retryable = false;
  let retryAfter: number | undefined;
  if (error === null) {
    outcome = { status: plan.target, external, lastError: null, done: true, nextRetryAt: null, deadLetter: false };
  } else {
    if (!(error instanceof ConnectorError)) {
      console.error(`sync: association ${a.id} failed:`, error instanceof Error ? `${error.name}: ${error.message}` : "unknown error");
    }
    retryable = !(error instanceof ConnectorError) || error.retryable;
    retryAfter = error instanceof ConnectorError ? error.retryAfter : undefined;
    outcome = {
      status: failureStatus(error),
      external,
      lastError: failureMessage(error),
      done: !retryable || finalOnRetryable,
      nextRetryAt: null,
      deadLetter: retryable && finalOnRetryable,
    };
  }
  const current = await recordOutcome(deps.db, a.id, gen, outcome, Date.now());
  return { current, retryable: retryable && !outcome.done, retryAfter };
}
