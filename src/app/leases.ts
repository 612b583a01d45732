/**
 * Revoking leases (Vault's expiration manager; Vault API: /sys/leases): the secret goes back
 * to the engine that owns the lease's mount (its Engine value's `revokeLease`), then the lease row
 * is deleted. sys/leases/revoke, revoke-prefix, revoke-force (src/app/sys/leases.ts) and the
 * expiry job below use it; leases themselves are registered by engines through src/core/leases.ts.
 */
import type { CronJob, EngineHookContext } from "../core/engine";
import { openDb } from "../core/db/client";
import { deleteLease, expiredLeases, type LeaseRow } from "../core/lease-store";
import { getMountsByIds, type MountRow } from "../core/mount-store";
import { MOUNT_ENGINES } from "./engines";

/** Leases the expiry job handles per run; more wait for the next trigger. */
const EXPIRY_BATCH = 50;

async function mountsOf(ctx: EngineHookContext, rows: LeaseRow[]): Promise<Map<string, MountRow>> {
  const mounts = await getMountsByIds(ctx.db, [...new Set(rows.map((l) => l.mountId))]);
  return new Map(mounts.map((m) => [m.id, m]));
}

async function revokeOne(ctx: EngineHookContext, lease: LeaseRow, mount: MountRow | undefined): Promise<void> {
  // A mount being disabled is purged with its leases (src/app/sys/mounts.ts): nothing to revoke.
  if (mount && mount.state === "active") await MOUNT_ENGINES[mount.type]?.engine.revokeLease?.(ctx, mount, lease);
  await deleteLease(ctx.db, lease.namespaceId, lease.id);
}

/**
 * Revokes the leases in order. `force` is Vault's revoke-force: the engine's errors are ignored
 * and every lease is forgotten anyway. Otherwise the first error stops and is thrown, leaving that
 * lease (and the rest) in place, as Vault keeps a lease whose revocation failed.
 */
export async function revokeLeases(ctx: EngineHookContext, rows: LeaseRow[], force = false): Promise<void> {
  if (rows.length === 0) return;
  const mounts = await mountsOf(ctx, rows);
  for (const lease of rows) {
    try {
      await revokeOne(ctx, lease, mounts.get(lease.mountId));
    } catch (e) {
      if (!force) throw e;
      console.error(`revoke-force: lease ${lease.id}:`, e instanceof Error ? e.message : "unknown error");
      await deleteLease(ctx.db, lease.namespaceId, lease.id);
    }
  }
}

/**
 * Leases expire with their secret (Vault revokes a lease at its expire time): every run revokes
 * up to EXPIRY_BATCH expired leases through their engine and forgets them. For a certificate
 * whose lease ran to its notAfter that is a no-op; a lease capped by the mount's max lease TTL
 * revokes a still valid certificate, as upstream. A lease whose revocation fails stays and is
 * tried again on the next run; lookups already answer "invalid lease" for it.
 */
export const leaseExpiryJob: CronJob = {
  name: "lease-expiry",
  async run(env) {
    const db = openDb(env.DB);
    const ctx = { env, db };
    const rows = await expiredLeases(db, Date.now(), EXPIRY_BATCH);
    const mounts = await mountsOf(ctx, rows);
    for (const lease of rows) {
      try {
        await revokeOne(ctx, lease, mounts.get(lease.mountId));
      } catch (e) {
        console.error(`lease expiry: lease ${lease.id}:`, e instanceof Error ? e.message : "unknown error");
      }
    }
  },
};
