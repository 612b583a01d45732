/**
 * Serial numbers come from the mount's Authority Durable Object (src/authority/authority.ts),
 * which guarantees uniqueness across every issuer of the mount.
 */
import type { MountRow } from "../sys/mount-store";

export function authorityOf(env: Env, mount: MountRow) {
  return env.AUTHORITY.getByName(mount.accessor);
}

/** One fresh serial, as minimal big-endian hex. */
export async function reserveSerial(env: Env, mount: MountRow): Promise<string> {
  const [hex] = await authorityOf(env, mount).reserveSerials(1);
  if (!hex) throw new Error("the Authority returned no serial");
  return hex;
}
