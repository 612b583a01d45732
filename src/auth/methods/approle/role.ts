/**
 * The AppRole role: its settings, Vault's defaults, how it is stored (one JSON document in
 * `auth_roles.config`, through the framework's method-store.ts; the RoleID lives in its own
 * column so login can find the role by it) and the rules every write must keep
 * (Vault API: /auth/approle/role/:role_name; OpenBao builtin/credential/approle/path_role.go).
 */
import { authMountId } from "../method-routes";
import { ApiError, badRequest } from "../../../core/errors";
import type { Req } from "../../../core/route";
import { getRole, putRole } from "../method-store";
import type { SecretIdScope } from "./secret-id-store";
import { type TokenParams, tokenParamsOf } from "../token-params";

export interface AppRole {
  /** A SecretID is required at login (default true). */
  bindSecretId: boolean;
  /** Addresses logins (and SecretIDs' cidr_list) must come from; legacy name bound_cidr_list. */
  secretIdBoundCidrs: string[];
  /** Default and upper limit of a SecretID's uses; 0 = unlimited. */
  secretIdNumUses: number;
  /** Default and upper limit of a SecretID's TTL in seconds; 0 = no expiry. */
  secretIdTtl: number;
  /** Set at creation only; Lanyard has no replication, so it changes nothing but the reads. */
  localSecretIds: boolean;
  /** The common token fields (token_policies, token_ttl, …; src/auth/methods/token-params.ts). */
  token: TokenParams;
  /**
   * Random, made when the role is created and never shown: part of every SecretID's hash, so
   * the SecretIDs of a deleted role never work for a new role of the same name (Vault gets the
   * same from its per-role HMAC key).
   */
  secretIdSalt: string;
}

/** A loaded role: its lower-cased name, RoleID and settings. */
export interface LoadedRole {
  name: string;
  roleId: string;
  role: AppRole;
}

/** Vault caps role names, RoleIDs and SecretIDs at 4096 bytes (approle validation.go maxHmacInputLength). */
export const MAX_ID_LENGTH = 4096;

/** The response to any failed credential check at login (Vault's text, never more precise). */
export const INVALID_CREDENTIALS = "invalid role or secret ID";

/** Vault stores role names lower-cased (path_role.go LowerCaseRoleName). */
export function roleNameOf(raw: string | undefined): string {
  const name = (raw ?? "").trim().toLowerCase();
  if (name === "") throw badRequest("missing role_name");
  if (name.length > MAX_ID_LENGTH) throw badRequest(`role_name is longer than maximum of ${MAX_ID_LENGTH} bytes`);
  return name;
}

/** The auth mount's id: every AppRole route runs under an auth mount (the dispatcher sets it). */
export const mountIdOf = authMountId;

function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
}

function int(v: unknown, fallback: number): number {
  return typeof v === "number" && Number.isSafeInteger(v) ? v : fallback;
}

function bool(v: unknown, fallback: boolean): boolean {
  return typeof v === "boolean" ? v : fallback;
}

/** A stored document as a role (Vault's defaults for anything missing). */
export function decodeRole(config: Record<string, unknown>): AppRole {
  return {
    bindSecretId: bool(config.bind_secret_id, true),
    secretIdBoundCidrs: strings(config.secret_id_bound_cidrs),
    secretIdNumUses: int(config.secret_id_num_uses, 0),
    secretIdTtl: int(config.secret_id_ttl, 0),
    localSecretIds: bool(config.local_secret_ids, false),
    token: tokenParamsOf(config.token),
    secretIdSalt: typeof config.secret_id_salt === "string" ? config.secret_id_salt : "",
  };
}

function encodeRole(role: AppRole): Record<string, unknown> {
  return {
    bind_secret_id: role.bindSecretId,
    secret_id_bound_cidrs: role.secretIdBoundCidrs,
    secret_id_num_uses: role.secretIdNumUses,
    secret_id_ttl: role.secretIdTtl,
    local_secret_ids: role.localSecretIds,
    token: { ...role.token },
    secret_id_salt: role.secretIdSalt,
  };
}

/** Loads a role by name; null when it does not exist. */
export async function loadRole(req: Req, name: string): Promise<LoadedRole | null> {
  const found = await getRole(req.db, mountIdOf(req), name);
  if (!found) return null;
  return { name: found.name, roleId: found.roleId ?? "", role: decodeRole(found.config) };
}

/** Whose SecretIDs a loaded role's are (the key of their hashes, ./secret-id-store.ts). */
export function scopeOf(req: Req, loaded: LoadedRole): SecretIdScope {
  return { mountId: mountIdOf(req), roleName: loaded.name, salt: loaded.role.secretIdSalt };
}

/**
 * Like loadRole, for the SecretID endpoints: a missing role is 400 `role "x" does not exist`
 * (Vault answers the lookups and destroys with a 500; a missing role is the caller's mistake).
 */
export async function requireRole(req: Req, name: string): Promise<LoadedRole> {
  const loaded = await loadRole(req, name);
  if (!loaded) throw badRequest(`role "${name}" does not exist`);
  return loaded;
}

/**
 * Vault's validateRoleConstraints: a role must require a SecretID or bind logins to addresses,
 * or anyone knowing the (non-secret) RoleID could log in. Vault returns this as a Go error (a
 * 500); Lanyard answers a 400 that says which settings would satisfy it.
 */
export function checkConstraints(role: AppRole): void {
  if (role.bindSecretId || role.secretIdBoundCidrs.length > 0 || role.token.boundCidrs.length > 0) return;
  throw badRequest(
    "at least one constraint should be enabled on the role: bind_secret_id must be true, or secret_id_bound_cidrs or token_bound_cidrs must be set",
  );
}

/** The 400 for CIDR blocks of a SecretID outside the role's (Vault: a 500 with this text). */
export function subsetError(field: string, role: readonly string[], secret: readonly string[]): ApiError {
  return badRequest(
    `${field}: failed to verify subset relationship between CIDR blocks on the role [${role.join(" ")}] and CIDR blocks on the secret ID [${secret.join(" ")}]`,
  );
}

/** Saves a role after checking its constraints; the RoleID must be unique within the mount. */
export async function saveRole(req: Req, name: string, role: AppRole, roleId: string): Promise<void> {
  checkConstraints(role);
  if (roleId === "") throw new ApiError(400, "invalid role_id supplied, or failed to generate a role_id");
  await putRole(req.db, mountIdOf(req), name, encodeRole(role), roleId);
}
