/**
 * Serial numbers come from the mount's Authority Durable Object (src/engines/pki/authority/authority.ts),
 * which guarantees uniqueness across every issuer of the mount.
 *
 * Reservation is batched per isolate (worth it because a benchmark shows the round trip
 * matters: `npm run bench` measured the DO call as the longest step of an issue). Invariants:
 * - Every serial handed out was returned by the Authority's `reserveSerials`, which never returns
 *   a serial twice for a mount; so serials stay unique across isolates and across issuers.
 * - Within an isolate a pooled serial is removed from its pool (a synchronous `pop`) before it
 *   is used, so two requests in the same isolate never share one.
 * - A pooled serial that is never used (the isolate is evicted, the mount is removed) is a gap,
 *   which the Authority's invariants already allow; nothing is ever put back into a pool.
 * - Pools are keyed by the mount accessor, the Authority's name: a removed mount's accessor is
 *   never reused, so its leftovers are unreachable.
 * - No promise is shared between requests (workerd ties I/O to the request that started it): a
 *   request that finds its pool empty makes its own Authority call and leaves the surplus.
 * The D1 unique index on (mount, serial) in pki_certs remains the second guard.
 */
import { BoundedCache } from "../../../core/bounded-cache";
import type { MountRow } from "../../../core/mount-store";

/** Serials fetched per Authority call when a pool runs dry. */
export const SERIAL_BATCH = 128;

/** Pools are small; the bound is how many mounts one isolate keeps a pool for. */
const pools = new BoundedCache<string[]>("pki.serialPools", 256);

export function authorityOf(env: Env, mount: MountRow) {
  return env.AUTHORITY.getByName(mount.accessor);
}

/** One fresh serial, as minimal big-endian hex. */
export async function reserveSerial(env: Env, mount: MountRow): Promise<string> {
  const pooled = pools.get(mount.accessor)?.pop();
  if (pooled) return pooled;
  const fresh = await authorityOf(env, mount).reserveSerials(mount.accessor, SERIAL_BATCH);
  const hex = fresh.pop();
  if (!hex) throw new Error("the Authority returned no serial");
  if (fresh.length > 0) {
    const pool = pools.get(mount.accessor);
    if (pool) pool.push(...fresh);
    else pools.set(mount.accessor, fresh);
  }
  return hex;
}
