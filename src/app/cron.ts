/**
 * Scheduled jobs (wrangler.toml [triggers] crons), run by the Worker's `scheduled` handler: every
 * registered engine's `cron` jobs (src/app/engines.ts; PKI: auto-tidy and CRL auto-rebuild, sync:
 * reconciliation), the auth methods' (AppRole: expired SecretIDs) and the expiry of leases (./leases.ts). Each job runs on its own: one failing job
 * is logged and does not stop the others.
 */
import { serviceProblem } from "../core/config";
import type { CronJob } from "../core/engine";
import { AUTH_METHODS } from "./auth-methods";
import { ENGINES } from "./engines";
import { leaseExpiryJob } from "./leases";

export type { CronJob };

// One method can serve two types (jwt and oidc): its jobs are collected once.
const authJobs = [...new Set(Object.values(AUTH_METHODS).map((r) => r.method))].flatMap((m) => m.cron ?? []);

export const JOBS: readonly CronJob[] = [...ENGINES.flatMap((e) => e.cron ?? []), ...authJobs, leaseExpiryJob];

export async function runScheduled(controller: ScheduledController, env: Env): Promise<void> {
  // Sealed or unconfigured: nothing may be written (src/core/db/seal-canary.ts). The next run checks again.
  const problem = await serviceProblem(env);
  if (problem) {
    console.error(`scheduled jobs skipped: ${problem}`);
    return;
  }
  const results = await Promise.allSettled(JOBS.map((j) => j.run(env, controller)));
  results.forEach((r, i) => {
    if (r.status === "rejected") {
      const e: unknown = r.reason;
      console.error(`cron job ${JOBS[i]?.name ?? i} failed:`, e instanceof Error ? `${e.name}: ${e.message}` : "unknown error");
    }
  });
}
