/**
 * The end of every successful login (Vault API: the login endpoints of /auth/approle, /auth/jwt, /auth/kubernetes): checks the client
 * address against the role's token CIDRs, stores an orphan service token for the auth mount and
 * answers Vault's `auth` block. TTLs follow Vault's CalculateTTL: the role's token_ttl, else the
 * mount's (tuned) default; capped by the role's token_max_ttl, the mount's maximum and the
 * explicit max; a periodic token lives one period and is not bound by the maxima, only by the
 * explicit max.
 *
 * The token row records the mount and role (tokens.auth_mount_id, role_name), so deleting the
 * role or disabling the mount revokes it (method-store.ts deleteRole, src/app/sys/auth.ts).
 * A login racing a disable cannot leave a token behind: migrations/0009's trigger refuses a
 * token of a mount that is being disabled.
 */
import { ipInCidrs } from "../../core/cidr";
import { sha256Hex } from "../../core/encoding";
import { badRequest, permissionDenied } from "../../core/errors";
import { effectiveTtls, type MountRow } from "../../core/mount-store";
import type { JsonReply, Req } from "../../core/route";
import { insertToken, type TokenRow } from "../token-store";
import { authBlock, newAccessor, newTokenText } from "../tokens";
import { authMountName } from "./method";
import type { TokenParams } from "./token-params";

/** The RAISE message of migrations/0009's tokens_auth_role_exists_insert trigger. */
const ROLE_DELETED = "auth role was deleted";

function messageOf(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) parts.push(e.message);
  return parts.join(" | ");
}

export interface LoginGrant {
  roleName: string;
  params: TokenParams;
  /** Appended to the mount name for the token's display_name; "" for the mount name alone. */
  displayName: string;
  metadata: Record<string, string>;
  /** CIDRs that replace params.boundCidrs (AppRole: the SecretID's token_bound_cidrs). */
  boundCidrs?: string[];
}

/**
 * The client's address: Cloudflare's `CF-Connecting-IP`, which the edge sets and a client cannot
 * forge there. `X-Forwarded-For` and `X-Real-IP` are client-controlled and never trusted.
 */
export function clientAddress(req: Req): string | null {
  const ip = req.headers.get("cf-connecting-ip")?.trim();
  return ip ? ip : null;
}

/** Vault's rule for bound CIDRs: none means anywhere; otherwise the client must be inside one. */
export function addressAllowed(req: Req, cidrs: readonly string[]): boolean {
  if (cidrs.length === 0) return true;
  const ip = clientAddress(req);
  return ip !== null && ipInCidrs(ip, [...cidrs]);
}

export interface LoginLifetime {
  ttl: number;
  expireTime: number;
  maxExpireTime: number | null;
  warnings: string[];
}

/** Vault's CalculateTTL for a login token (see the module comment). Pure. */
export function loginLifetime(now: number, p: TokenParams, mount: MountRow): LoginLifetime {
  const warnings: string[] = [];
  const { defaultTtl: mountDefault, maxTtl: mountMax } = effectiveTtls(mount);
  const explicitEnd = p.explicitMaxTtl > 0 ? now + p.explicitMaxTtl * 1000 : null;
  if (p.period > 0) {
    let ttl = p.period;
    if (p.explicitMaxTtl > 0 && ttl > p.explicitMaxTtl) {
      warnings.push("period exceeds the explicit max TTL; the TTL was capped");
      ttl = p.explicitMaxTtl;
    }
    return { ttl, expireTime: now + ttl * 1000, maxExpireTime: explicitEnd, warnings };
  }
  let max = p.maxTtl > 0 ? Math.min(p.maxTtl, mountMax) : mountMax;
  if (p.explicitMaxTtl > 0) max = Math.min(max, p.explicitMaxTtl);
  let ttl = p.ttl > 0 ? p.ttl : mountDefault;
  if (ttl > max) {
    warnings.push(`TTL of "${ttl}s" exceeded the effective max_ttl of "${max}s"; TTL value is capped accordingly`);
    ttl = max;
  }
  return { ttl, expireTime: now + ttl * 1000, maxExpireTime: now + max * 1000, warnings };
}

/**
 * Policies of a login token: the role's, plus `default` unless token_no_default_policy. Never
 * `root`: role writes refuse it (token-params.ts sanitizePolicies), and a role stored before that
 * rule, or edited behind the API, is refused here with Vault's 400 for the same case.
 */
export function loginPolicies(p: TokenParams): string[] {
  const set = new Set(p.policies.map((name) => name.trim().toLowerCase()));
  if (set.has("root")) throw badRequest("auth methods cannot create root tokens");
  if (!p.noDefaultPolicy) set.add("default");
  return [...set].sort();
}

export async function loginReply(req: Req, grant: LoginGrant): Promise<JsonReply> {
  const mount = req.mount;
  // Only auth mounts route to login handlers (src/app/dispatch.ts); a missing mount is a bug.
  if (!mount) throw new Error("loginReply: the request has no auth mount");
  const policies = loginPolicies(grant.params);
  const cidrs = grant.boundCidrs && grant.boundCidrs.length > 0 ? grant.boundCidrs : grant.params.boundCidrs;
  if (!addressAllowed(req, cidrs)) throw permissionDenied();
  const now = Date.now();
  const life = loginLifetime(now, grant.params, mount);
  const text = newTokenText();
  const name = authMountName(mount);
  const row: TokenRow = {
    hash: await sha256Hex(text),
    accessor: newAccessor(),
    namespaceId: mount.namespaceId,
    parentAccessor: null,
    policies,
    displayName: grant.displayName ? `${name}-${grant.displayName}` : name,
    meta: grant.metadata,
    numUses: grant.params.numUses,
    usesLeft: grant.params.numUses,
    ttl: life.ttl,
    explicitMaxTtl: grant.params.explicitMaxTtl,
    renewable: true,
    creationTime: now,
    expireTime: life.expireTime,
    maxExpireTime: life.maxExpireTime,
    path: `${mount.path}login`,
    period: grant.params.period,
    authMountId: mount.id,
    roleName: grant.roleName,
    boundCidrs: [...cidrs],
  };
  try {
    await insertToken(req.db, row, now);
  } catch (e) {
    // migrations/0009: the role was deleted between reading it and storing its token.
    if (messageOf(e).includes(ROLE_DELETED)) throw permissionDenied();
    throw e;
  }
  return { data: null, auth: authBlock(row, text, now), warnings: life.warnings };
}
