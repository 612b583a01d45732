/**
 * Storage of auth-method roles and configuration: the only module that touches the
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
 * Deletes a role and revokes every token issued through it (deleting a role stops its
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

/**
 * How a sealed value sits in the stored document: an object `{ "$sealed": "<seal output>" }` at
 * one of the method's secret keys. Sealed values are recognised by that structure, and only at
 * the keys the method declares secret: every other value is the caller's and stays as written, so
 * `bound_issuer: "sealed:…"` is an ordinary string and a `provider_config` map that happens to
 * hold a "$sealed" key is an ordinary map. The secret keys take strings only (their fields are
 * declared `string`), so a caller cannot store an envelope there either.
 */
const ENVELOPE_KEY = "$sealed";
/** The format written before the envelope: the seal's output behind this prefix, at a secret key. */
const LEGACY_PREFIX = "sealed:";
const sealContext = (mountId: string, key: string) => `auth-config:${mountId}:${key}`;

/** The sealed text of a stored secret value, or null for a value that was stored unsealed (""). */
function sealedText(v: unknown): string | null {
  if (typeof v === "object" && v !== null && !Array.isArray(v)) {
    const inner = (v as Record<string, unknown>)[ENVELOPE_KEY];
    return typeof inner === "string" ? inner : null;
  }
  // Documents written before the envelope: putMethodConfig sealed every non-empty value of a
  // secret key, so at these keys (and only these) the prefix cannot be a caller's text.
  if (typeof v === "string" && v.startsWith(LEGACY_PREFIX)) return v.slice(LEGACY_PREFIX.length);
  return null;
}

/** The method's configuration with its sealed values (at `sealedKeys`) opened; null when never written. */
export async function getMethodConfig(db: Db, env: Env, mountId: string, sealedKeys: readonly string[]): Promise<Record<string, unknown> | null> {
  const rows = await db.select().from(authConfigs).where(eq(authConfigs.mountId, mountId));
  const row = rows[0];
  if (!row) return null;
  const keys = loadConfig(env).seal;
  const out: Record<string, unknown> = { ...row.config };
  for (const k of sealedKeys) {
    if (!(k in out)) continue;
    const text = sealedText(out[k]);
    out[k] = text === null ? (typeof out[k] === "string" ? out[k] : "") : await unseal(keys, text, sealContext(mountId, k));
  }
  return out;
}

/** Replaces the method's configuration; the values of `sealedKeys` are sealed (non-empty strings only). */
export async function putMethodConfig(db: Db, env: Env, mountId: string, config: Record<string, unknown>, sealedKeys: readonly string[]): Promise<void> {
  const keys = loadConfig(env).seal;
  const stored: Record<string, unknown> = { ...config };
  for (const k of sealedKeys) {
    const v = stored[k];
    if (typeof v === "string" && v !== "") stored[k] = { [ENVELOPE_KEY]: await seal(keys, v, sealContext(mountId, k)) };
  }
  const updatedAt = Date.now();
  await db.insert(authConfigs).values({ mountId, config: stored, updatedAt }).onConflictDoUpdate({ target: authConfigs.mountId, set: { config: stored, updatedAt } });
}

/** Removes the roles and configuration of an auth mount that is being disabled (idempotent). */
export async function purgeMethodRows(db: Db, mountId: string): Promise<void> {
  await db.batch([db.delete(authRoles).where(eq(authRoles.mountId, mountId)), db.delete(authConfigs).where(eq(authConfigs.mountId, mountId))]);
}
