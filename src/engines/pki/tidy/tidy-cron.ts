/**
 * The auto-tidy cron job (Vault API /pki/config/auto-tidy; the PKI engine's cron hook, ../index.ts; runs every minute): for
 * each PKI mount with auto-tidy enabled, asks the mount's Authority whether a tidy is due (now >
 * last tidy end + interval_duration; the mount's creation counts as a tidy end) and starts it.
 * The decision is the Authority's, so a manual tidy that is running, or that just ran, is seen.
 */
import { openDb } from "../../../core/db/client";
import { authorityOf } from "../issuance/serials";
import { listAutoTidyMounts } from "../storage/tidy-store";

export async function pkiAutoTidyJob(env: Env): Promise<void> {
  const due = await listAutoTidyMounts(openDb(env.DB));
  const results = await Promise.allSettled(due.map(({ mount, config }) => authorityOf(env, mount).tidyAutoTick(mount, config)));
  let started = 0;
  results.forEach((r, i) => {
    if (r.status === "fulfilled") {
      if (r.value) started++;
      return;
    }
    const e: unknown = r.reason;
    console.error(`auto-tidy on mount ${due[i]?.mount.accessor ?? "?"} failed:`, e instanceof Error ? e.message : "unknown error");
  });
  if (started > 0) console.log(`auto-tidy: started ${started} tidy operation(s)`);
}
