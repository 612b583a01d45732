/**
 * Storage of auth-method roles and configuration (issue 13): the only module that touches the
 * `auth_roles` and `auth_configs` tables (src/core/db/schema/auth.ts). Roles and configs are one
 * JSON document each, always read and written whole. Configuration values that are secrets
 * (token_reviewer_jwt, oidc_client_secret) are sealed with the service's SEAL_KEY, bound to the
 * mount, so a database read never shows them.
 */
import { and, eq } from "drizzle-orm";
import { loadConfig } from "../../core/config";
import type { Db } from "../../core/db/client";
import { authConfigs, authRoles } from "../../core/db/schema";
import { seal, unseal } from "../../core/db/seal";
import { badRequest } from "../../core/errors";
import { isUniqueViolation } from "../../core/lifecycle";
import { revokeIssuedBy } from "../token-store";

export interface StoredRole {
  name: string;
  roleId: string | null;
  config: Record<string, unknown>;
}

const roleOf = (r: typeof authRoles.$inferSelect): StoredRole => ({ name: r.name, roleId: r.roleId, config: r.config });

export async function getRole(db: Db, mountId: string, name: string): Promise<StoredRole | null> {
  const rows = await db.select().from(authRoles).where(and(eq(authRoles.mountId, mountId), eq(authRoles.name, name)));
  return rows[0] ? roleOf(rows[0]) : null;
}

export async function getRoleByRoleId(db: Db, mountId: string, roleId: string): Promise<StoredRole | null> {
  const rows = await db.select().from(authRoles).where(and(eq(authRoles.mountId, mountId), eq(authRoles.roleId, roleId)));
  return rows[0] ? roleOf(rows[0]) : null;
}

/** Creates or replaces a role. A RoleID another role of the mount has → 400 `role_id already in use`. */
export async function putRole(db: Db, mountId: string, name: string, config: Record<string, unknown>, roleId: string | null): Promise<void> {
  const updatedAt = Date.now();
  try {
    await db
      .insert(authRoles)
      .values({ mountId, name, roleId, config, updatedAt })
      .onConflictDoUpdate({ target: [authRoles.mountId, authRoles.name], set: { config, roleId, updatedAt } });
  } catch (e) {
    if (isUniqueViolation(e)) throw badRequest("role_id already in use");
    throw e;
  }
}

/**
 * Deletes a role and revokes every token issued through it (issue 13: deleting a role stops its
 * tokens). The role goes first. A login racing it stores its token either before the delete (the
 * revocation that follows removes it) or after, where migrations/0009's trigger refuses a token
 * of a role that no longer exists (login.ts answers that 403), so no token outlives its role.
 */
export async function deleteRole(db: Db, mountId: string, name: string): Promise<void> {
  await db.delete(authRoles).where(and(eq(authRoles.mountId, mountId), eq(authRoles.name, name)));
  await revokeIssuedBy(db, mountId, name);
}

export async function listRoles(db: Db, mountId: string): Promise<string[]> {
  const rows = await db.select({ name: authRoles.name }).from(authRoles).where(eq(authRoles.mountId, mountId)).orderBy(authRoles.name);
  return rows.map((r) => r.name);
}

const SEALED = "sealed:";
const sealContext = (mountId: string, key: string) => `auth-config:${mountId}:${key}`;

/** The method's configuration with its sealed values opened; null when never written. */
export async function getMethodConfig(db: Db, env: Env, mountId: string): Promise<Record<string, unknown> | null> {
  const rows = await db.select().from(authConfigs).where(eq(authConfigs.mountId, mountId));
  const row = rows[0];
  if (!row) return null;
  const keys = loadConfig(env).seal;
  const out: Record<string, unknown> = { ...row.config };
  for (const [k, v] of Object.entries(out)) {
    if (typeof v === "string" && v.startsWith(SEALED)) out[k] = await unseal(keys, v.slice(SEALED.length), sealContext(mountId, k));
  }
  return out;
}

/** Replaces the method's configuration; the values of `sealedKeys` are sealed (non-empty strings only). */
export async function putMethodConfig(db: Db, env: Env, mountId: string, config: Record<string, unknown>, sealedKeys: readonly string[]): Promise<void> {
  const keys = loadConfig(env).seal;
  const stored: Record<string, unknown> = { ...config };
  for (const k of sealedKeys) {
    const v = stored[k];
    if (typeof v === "string" && v !== "") stored[k] = SEALED + (await seal(keys, v, sealContext(mountId, k)));
  }
  const updatedAt = Date.now();
  await db.insert(authConfigs).values({ mountId, config: stored, updatedAt }).onConflictDoUpdate({ target: authConfigs.mountId, set: { config: stored, updatedAt } });
}

/** Removes the roles and configuration of an auth mount that is being disabled (idempotent). */
export async function purgeMethodRows(db: Db, mountId: string): Promise<void> {
  await db.batch([db.delete(authRoles).where(eq(authRoles.mountId, mountId)), db.delete(authConfigs).where(eq(authConfigs.mountId, mountId))]);
}
