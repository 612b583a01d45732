/**
 * The secrets-sync engine's one face: the engine value the app registers (src/app/engines.ts).
 * It serves no mount; its routes live under sys/sync/. It adds the reconciliation cron job, the
 * consumer of the sync queue, the SyncGate Durable Object (provider rate limits, ./limits.ts),
 * and two lifecycle hooks: a KV mount being disabled unsyncs its
 * secrets' associations, and a namespace is deletable only without sync destinations or
 * repohost apps (what remains of its associations goes with it). It follows KV-v2 changes
 * through `syncKvFollower`, which the engine registry subscribes. Nothing outside
 * src/engines/sync/ imports any other module of it.
 */
import { loadConfig } from "../../core/config";
import type { Engine } from "../../core/engine";
import { handleSyncBatch } from "./consumer";
import { syncMetrics } from "./metrics-store";
import { syncReconcileJob } from "./cron";
import { SyncGate } from "./gate";
import { syncKvFollower } from "./kv-listener";
import { unsyncMount } from "./operations";
import { syncRoutes } from "./routes";
import { deleteNamespaceSyncRows, syncObjectsInNamespace } from "./store";

/** The rate-limit gate of provider requests (./limits.ts), exported for the Worker entry. */
export { SyncGate };

/** How the engine follows KV-v2 changes; subscribed by the engine registry (src/app/engines.ts). */
export { syncKvFollower };

/** The queue wrangler.toml's [[queues.consumers]] names for sync messages. */
export const SYNC_QUEUE_NAME = "lanyard-sync";

/** "sync destinations (a/b, ...) and repohost apps (x)": names only, at most five of each. */
function leftovers(left: { destinations: string[]; apps: string[] }): string | null {
  const names = (xs: string[]) => `${xs.slice(0, 5).join(", ")}${xs.length > 5 ? `, and ${xs.length - 5} more` : ""}`;
  const parts: string[] = [];
  if (left.destinations.length > 0) parts.push(`sync destinations (${names(left.destinations)})`);
  if (left.apps.length > 0) parts.push(`repohost apps (${names(left.apps)})`);
  return parts.length > 0 ? parts.join(" and ") : null;
}

export const syncEngine = {
  name: "sync",
  sysRoutes: syncRoutes,
  cron: [{ name: "sync-reconcile", run: (env, controller) => syncReconcileJob(env, controller) }],
  queues: { [SYNC_QUEUE_NAME]: handleSyncBatch },
  durableObjects: { SyncGate },
  // Its secrets are going away: unsync them (through the queue), so no provider copy outlives
  // the mount and no association stays SYNCED.
  async onMountDisable({ env, db }, mount) {
    if (mount.type === "kv") await unsyncMount({ env, db, keys: loadConfig(env).seal }, mount.id);
  },
  // The rows namespaceLeftovers names; a namespace with any of them is not deleted.
  namespaceTables: ["sync_destinations", "sync_repohost_apps"],
  sealedColumns: [{ table: "sync_destinations", column: "sealed_credentials" }],
  namespaceLeftovers: async (db, namespaceId) => leftovers(await syncObjectsInNamespace(db, namespaceId)),
  purgeNamespace: (db, namespaceId) => deleteNamespaceSyncRows(db, namespaceId),
  // sys/metrics: associations by status, drift, dead letters, pending work, the queue's backlog.
  metrics: (ctx) => syncMetrics(ctx, SYNC_QUEUE_NAME),
} satisfies Engine;
