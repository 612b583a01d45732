/** The sync engine's scheduled job: reconciliation (./operations.ts reconcile). */
import { loadConfig } from "../../core/config";
import { openDb } from "../../core/db/client";
import { reconcile } from "./operations";

export async function syncReconcileJob(env: Env): Promise<void> {
  const r = await reconcile({ env, db: openDb(env.DB), keys: loadConfig(env).seal });
  if (r.associations + r.purges > 0) console.log(`sync reconcile: re-queued ${r.associations} association(s), ${r.purges} purge(s)`);
}
