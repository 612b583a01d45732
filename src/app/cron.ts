/**
 * Scheduled jobs (wrangler.toml [triggers] crons), run by the Worker's `scheduled` handler. Each
 * job runs on its own: one failing job is logged and does not stop the others. Engines add
 * their jobs to JOBS (the PKI engine: CRL rebuild, tidy).
 */
import { pkiCrlAutoRebuildJob } from "../engines/pki/revocation/crl-cron";
import { pkiAutoTidyJob } from "../engines/pki/tidy/tidy-cron";
import { syncReconcileJob } from "../engines/sync/cron";

export interface CronJob {
  name: string;
  run(env: Env, controller: ScheduledController): Promise<void>;
}

export const JOBS: CronJob[] = [
  { name: "sync-reconcile", run: (env) => syncReconcileJob(env) },
  { name: "pki-auto-tidy", run: (env) => pkiAutoTidyJob(env) },
  { name: "pki-crl-auto-rebuild", run: (env) => pkiCrlAutoRebuildJob(env) },
];

export async function runScheduled(controller: ScheduledController, env: Env): Promise<void> {
  const results = await Promise.allSettled(JOBS.map((j) => j.run(env, controller)));
  results.forEach((r, i) => {
    if (r.status === "rejected") {
      const e: unknown = r.reason;
      console.error(`cron job ${JOBS[i]?.name ?? i} failed:`, e instanceof Error ? `${e.name}: ${e.message}` : "unknown error");
    }
  });
}
