/**
 * The CRL auto-rebuild cron job (docs/pki-revocation-crl.md "When CRLs are rebuilt"; the PKI engine's cron hook, ../index.ts; runs every
 * minute): for each PKI mount with config/crl auto_rebuild, asks the mount's Authority to build
 * what is due (complete CRLs within auto_rebuild_grace_period of nextUpdate, or new issuers;
 * delta CRLs every delta_rebuild_interval when revocations arrived). The due check runs inside
 * the Authority, so it sees builds that other requests just finished.
 */
import { openDb } from "../../../core/db/client";
import { listAutoRebuildMounts } from "../storage/revocation-store";
import { authorityOf } from "../issuance/serials";

export async function pkiCrlAutoRebuildJob(env: Env): Promise<void> {
  const due = await listAutoRebuildMounts(openDb(env.DB));
  const results = await Promise.allSettled(due.map(({ mount, config }) => authorityOf(env, mount).crlAutoTick(mount, config)));
  results.forEach((r, i) => {
    const accessor = due[i]?.mount.accessor ?? "?";
    if (r.status === "rejected") {
      const e: unknown = r.reason;
      console.error(`CRL auto-rebuild on mount ${accessor} failed:`, e instanceof Error ? e.message : "unknown error");
      return;
    }
    const report = r.value;
    if (!report) return;
    console.log(`CRL auto-rebuild on mount ${accessor}: built ${report.built} CRLs${report.warnings.length ? `; warnings: ${report.warnings.join("; ")}` : ""}`);
    if (report.errors.length > 0) console.error(`CRL auto-rebuild on mount ${accessor}: ${report.errors.join("; ")}`);
  });
}
