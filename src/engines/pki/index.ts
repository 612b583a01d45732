/**
 * The PKI engine's one face: the engine value the app registers (src/app/engines.ts) with its
 * routes, scheduled jobs (auto-tidy, CRL auto-rebuild), mount purge, the lease revoke hook
 * (certificates of generate_lease roles) and the `Authority` Durable Object, one per mount.
 * Nothing outside src/engines/pki/ imports any other module of it.
 */
import type { Engine } from "../../core/engine";
import { ACME_QUEUE_NAME, handleAcmeValidationBatch } from "./acme/patient";
import { Authority } from "./authority/authority";
import { purgePkiMount } from "./purge";
import { pkiCrlAutoRebuildJob } from "./revocation/crl-cron";
import { revokeCertLease } from "./revocation/lease";
import { pkiRoutes } from "./routes";
import { pkiMetrics } from "./storage/metrics-store";
import { pkiAutoTidyJob } from "./tidy/tidy-cron";

export const pkiEngine = {
  name: "pki",
  sealedColumns: [{ table: "pki_keys", column: "sealed_private_key" }],
  mounts: {
    types: ["pki"],
    routes: pkiRoutes,
    purge: (db, mount, env) => purgePkiMount(db, env, mount),
  },
  cron: [
    { name: "pki-auto-tidy", run: (env) => pkiAutoTidyJob(env) },
    { name: "pki-crl-auto-rebuild", run: (env) => pkiCrlAutoRebuildJob(env) },
  ],
  // sys/leases/revoke and lease expiry revoke a generate_lease certificate as POST revoke does.
  revokeLease: ({ db, env }, mount, lease) => revokeCertLease({ db, env, mount }, lease),
  // ACME challenge attempts after the first (acme/patient.ts).
  queues: { [ACME_QUEUE_NAME]: handleAcmeValidationBatch },
  // wrangler.toml binds AUTHORITY to class_name "Authority": the name must not change.
  durableObjects: { Authority },
  // sys/metrics: certificates by expiry, revocations, issuer expiry, CRL age.
  metrics: (ctx) => pkiMetrics(ctx),
} satisfies Engine;

export { Authority };
