/**
 * The sync engine's scheduled job, on every minute's cron: the retry reconciliation
 * (./operations.ts reconcile: stuck and failed associations, unfinished purges) and, every
 * `reconcile_interval`, the drift pass (./reconcile.ts, docs/secrets-sync.md "3. Drift is detected and repaired").
 */
import { loadConfig } from "../../core/config";
import { openDb } from "../../core/db/client";
import { reconcile } from "./operations";
import { startDriftPass } from "./reconcile";

export async function syncReconcileJob(env: Env, controller?: ScheduledController): Promise<void> {
  const deps = { env, db: openDb(env.DB), keys: loadConfig(env).seal };
  const r = await reconcile(deps);
  if (r.associations + r.purges > 0) console.log(`sync reconcile: re-queued ${r.associations} association(s), ${r.purges} purge(s)`);
  if (await startDriftPass(deps, controller?.scheduledTime ?? Date.now())) console.log("sync reconcile: drift pass queued");
}
