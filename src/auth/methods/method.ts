/**
 * What an auth method is to the app (Vault API: /auth/approle, /auth/jwt, /auth/kubernetes): a mount type and the
 * routes it serves under "auth/<path>/". Methods live in src/auth/methods/<type>/ and export one
 * AuthMethod from their index.ts; src/app/engines.ts registers them, sys/auth enables them, and
 * the dispatcher routes "auth/<path>/…" to the mount's method (src/app/dispatch.ts).
 */
import type { Db } from "../../core/db/client";
import type { CronJob } from "../../core/engine";
import type { MountRow } from "../../core/mount-store";
import type { RouteDef } from "../../core/route";
import { trimEndChar } from "../../core/text";

export interface AuthMethod {
  /** The sys/auth `type` ("approle", "jwt", "kubernetes"). */
  type: string;
  /** Routes relative to the mount: "login", "role/:name", "config"… Login routes are public. */
  routes: readonly RouteDef[];
  /**
   * Removes the method's own rows beyond roles and config (AppRole's SecretIDs) when the mount is
   * disabled; the framework removes roles, config and the mount's tokens itself.
   */
  purge?(db: Db, mount: MountRow): Promise<void>;
  /** Scheduled jobs (src/app/cron.ts runs them with the engines'). */
  cron?: readonly CronJob[];
}

/** Auth mounts are rows of `mounts` under this prefix: "auth/approle/". */
export const AUTH_PREFIX = "auth/";

export function isAuthMount(m: MountRow): boolean {
  return m.path.startsWith(AUTH_PREFIX);
}

/** The mount's name as Vault shows it in display names: "approle", "team-jwt" for auth/team/jwt/. */
export function authMountName(m: MountRow): string {
  return trimEndChar(m.path.slice(AUTH_PREFIX.length), "/").replace(/\//g, "-");
}
