/**
 * Deciding what to do for one association (pure): the plan that converges the provider to the
 * association's intent, and the status and stored error a failure maps to. ./engine.ts runs it.
 */
import type { JsonObject } from "../kv";
import type { Desired, ExternalEntry, SyncStatus } from "./association-store";
import { ConnectorError } from "./connectors/types";
import type { Granularity } from "./destinations/types";

export interface PlannedPut {
  subKey: string;
  name: string;
  value: string;
}

export interface Plan {
  puts: PlannedPut[];
  /**
   * Names among `puts` that are not written this time but stay wanted: a drift repair
   * (docs/secrets-sync.md "3. Drift is detected and repaired", ./reconcile.ts) rewrites only the names found changed or deleted out of band.
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

/** The sync status a failure maps to (Vault API: sync_status). */
export function failureStatus(e: unknown): SyncStatus {
  if (e instanceof ConnectorError) return e.kind === "client" ? "CLIENT_SIDE_ERROR" : "EXTERNAL_SERVICE_ERROR";
  return "INTERNAL_VAULT_ERROR";
}

/** The stored error text of a failure: the provider's code and message, never a value. */
export function failureMessage(e: unknown): string {
  if (e instanceof ConnectorError) return `${e.code}: ${e.message}`;
  return "internal error while talking to the destination; see the service log";
}
