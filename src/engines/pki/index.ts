/**
 * The PKI engine's one face: the engine value the app registers (src/app/engines.ts) with its
 * routes, scheduled jobs (auto-tidy, CRL auto-rebuild, the inventory backfill, expiry notifications), mount purge, the lease revoke hook
 * (certificates of generate_lease roles) and the `Authority` Durable Object, one per mount.
 * Nothing outside src/engines/pki/ imports any other module of it.
 */
import type { Engine } from "../../core/engine";
import { Authority } from "./authority/authority";
import { backfillInventory } from "./inventory/backfill";
import { consumeNotifications } from "./notify/deliver";
import { notifyScanJob } from "./notify/scan";
import { purgePkiMount } from "./purge";
import { pkiCrlAutoRebuildJob } from "./revocation/crl-cron";
import { revokeCertLease } from "./revocation/lease";
import { pkiRoutes } from "./routes";
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
    { name: "pki-inventory-backfill", run: async (env) => void (await backfillInventory(env)) },
    { name: "pki-expiry-notify", run: async (env) => void (await notifyScanJob(env)) },
  ],
  // wrangler.toml [[queues.consumers]] lanyard-notify: expiry notifications (docs/pki-notifications.md).
  queues: { "lanyard-notify": consumeNotifications },
  // sys/leases/revoke and lease expiry revoke a generate_lease certificate as POST revoke does.
  revokeLease: ({ db, env }, mount, lease) => revokeCertLease({ db, env, mount }, lease),
  // wrangler.toml binds AUTHORITY to class_name "Authority": the name must not change.
  durableObjects: { Authority },
} satisfies Engine;

export { Authority };
