/**
 * Token rules, as plain functions: which policies a child may get, how long it lives, and the
 * read shapes (lookup data and the `auth` block). Storage is in token-store.ts.
 */
import { SYSTEM_MAX_TTL } from "../core/limits";
import { badRequest } from "../core/errors";
import type { AuthBlock } from "../core/route";
import { bytesToBase64Url } from "../core/encoding";
import type { TokenEntry, TokenRow } from "./token-store";
import { globMatch } from "../core/glob";
import type { TokenRole } from "./token-role-store";

export function newTokenText(): string {
  return `lys.${bytesToBase64Url(crypto.getRandomValues(new Uint8Array(24)))}`;
}

export function newAccessor(): string {
  return bytesToBase64Url(crypto.getRandomValues(new Uint8Array(18)));
}

/**
 * Most policies one token may carry, `default` included. Every request reads the
 * token's policies with one query per 90 names (policy-store.ts, D1 allows 100 bound parameters),
 * so without a bound a token with 99 policies made every request of its own fail; 64 is far
 * beyond any real use, and keeps the read to a single query.
 */
export const MAX_TOKEN_POLICIES = 64;

/**
 * Policies of a new token. Without `policies` the child inherits the parent's. A parent that is
 * not root may only hand out policies it has itself. `default` is added unless refused. At most
 * MAX_TOKEN_POLICIES distinct names.
 */
export function childPolicies(parent: TokenEntry, requested: string[] | undefined, noDefault: boolean): string[] {
  const parentIsRoot = parent.policies.includes("root");
  const policies = new Set((requested ?? parent.policies).map((p) => p.trim().toLowerCase()).filter((p) => p !== ""));
  if (!noDefault && !policies.has("root")) policies.add("default");
  if (noDefault) policies.delete("default");
  // Counted before the subset check, so a huge list costs one pass and a clear answer.
  if (policies.size > MAX_TOKEN_POLICIES) {
    throw badRequest(`policies: a token may have at most ${MAX_TOKEN_POLICIES} policies (including "default"); ${policies.size} were given`);
  }
  if (!parentIsRoot) {
    const extra = [...policies].filter((p) => p !== "default" && !parent.policies.includes(p));
    if (extra.length > 0) {
      throw badRequest(`policies: child policies must be a subset of the parent's policies; not allowed: ${extra.join(", ")}`);
    }
  }
  return [...policies].sort();
}

/** Whether a role restricts policies by lists or globs (then the parent-subset rule does not apply). */
export function roleHasPolicyLists(role: TokenRole): boolean {
  return role.allowed_policies.length + role.disallowed_policies.length + role.allowed_policies_glob.length + role.disallowed_policies_glob.length > 0;
}

/**
 * Policies of a token created from a role that sets allowed or disallowed lists (Vault's
 * handleCreateCommon): without `policies` the role's allowed_policies are used (the parent's when
 * the role has none); each requested policy must be allowed (by name or glob) and none may be
 * disallowed; the parent-subset rule is not applied, which is what roles are for. `default` is
 * added unless refused or disallowed.
 */
export function rolePolicies(parent: TokenEntry, role: TokenRole, requested: string[] | undefined, noDefault: boolean): string[] {
  const clean = (l: string[]) => [...new Set(l.map((p) => p.trim().toLowerCase()).filter((p) => p !== ""))];
  const base = requested && requested.length > 0 ? requested : role.allowed_policies.length > 0 ? role.allowed_policies : parent.policies;
  const asked = clean(base).filter((p) => p !== "default");
  const hasAllowed = role.allowed_policies.length + role.allowed_policies_glob.length > 0;
  if (hasAllowed) {
    const outside = asked.filter((p) => !role.allowed_policies.includes(p) && !role.allowed_policies_glob.some((g) => globMatch(g, p)));
    if (outside.length > 0) {
      throw badRequest(
        `token policies (${JSON.stringify(asked)}) must be subset of the role's allowed policies (${JSON.stringify(role.allowed_policies)}) or glob policies (${JSON.stringify(role.allowed_policies_glob)})`,
      );
    }
  }
  const disallowed = (p: string) => role.disallowed_policies.includes(p) || role.disallowed_policies_glob.some((g) => globMatch(g, p));
  for (const p of asked) if (disallowed(p)) throw badRequest(`token policy "${p}" is disallowed by this role`);
  if (asked.includes("root") && !parent.policies.includes("root")) throw badRequest("root tokens may not be created without parent token being root");
  const policies = new Set(asked);
  if (!noDefault && !policies.has("root") && !disallowed("default")) policies.add("default");
  if (policies.size > MAX_TOKEN_POLICIES) {
    throw badRequest(`policies: a token may have at most ${MAX_TOKEN_POLICIES} policies (including "default"); ${policies.size} were given`);
  }
  return [...policies].sort();
}

/**
 * Lifetime of a periodic token (a role's token_period): its TTL is the period, each renewal
 * extends it by the period again, and only an explicit max TTL (or, for a child, the parent's
 * expiry) bounds it, not the system maximum (Vault's periodic tokens).
 */
export function periodicLifetime(now: number, period: number, explicitMaxTtl: number, parentExpire: number | null): Lifetime {
  const warnings: string[] = [];
  let maxExpireTime: number | null = explicitMaxTtl > 0 ? now + explicitMaxTtl * 1000 : null;
  if (parentExpire !== null) maxExpireTime = maxExpireTime === null ? parentExpire : Math.min(maxExpireTime, parentExpire);
  let expireTime = now + period * 1000;
  if (maxExpireTime !== null && expireTime > maxExpireTime) {
    warnings.push("period exceeds the token's maximum lifetime; the TTL was capped");
    expireTime = maxExpireTime;
  }
  return { ttl: Math.round((expireTime - now) / 1000), expireTime, maxExpireTime, warnings };
}

export interface Lifetime {
  ttl: number;
  expireTime: number | null;
  maxExpireTime: number | null;
  warnings: string[];
}

/**
 * TTL of a new token: the request's ttl, else the system default (768h); a root-policy token
 * without a ttl never expires. explicit_max_ttl, the system maximum and (for a child) the
 * parent's expiry cap it.
 */
export function tokenLifetime(
  now: number,
  policies: string[],
  ttl: number | undefined,
  explicitMaxTtl: number,
  parentExpire: number | null,
): Lifetime {
  const warnings: string[] = [];
  const isRoot = policies.includes("root");
  if (isRoot && !ttl && !explicitMaxTtl) {
    return { ttl: 0, expireTime: parentExpire, maxExpireTime: parentExpire, warnings };
  }
  let want = ttl || SYSTEM_MAX_TTL;
  const caps = [SYSTEM_MAX_TTL];
  if (explicitMaxTtl > 0) caps.push(explicitMaxTtl);
  const cap = Math.min(...caps);
  if (want > cap) {
    warnings.push(`ttl of ${want}s exceeds the maximum of ${cap}s; it was capped`);
    want = cap;
  }
  let expireTime = now + want * 1000;
  let maxExpireTime = now + cap * 1000;
  if (parentExpire !== null) {
    if (expireTime > parentExpire) {
      warnings.push("ttl exceeds the parent token's remaining lifetime; it was capped");
      expireTime = parentExpire;
    }
    maxExpireTime = Math.min(maxExpireTime, parentExpire);
  }
  return { ttl: Math.round((expireTime - now) / 1000), expireTime, maxExpireTime, warnings };
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** The `data` of lookup and lookup-self. */
export function lookupView(t: TokenRow, id: string | null, now: number, nsPath: string): Record<string, unknown> {
  return {
    accessor: t.accessor,
    creation_time: Math.floor(t.creationTime / 1000),
    creation_ttl: t.ttl,
    display_name: t.displayName,
    entity_id: "",
    expire_time: iso(t.expireTime),
    explicit_max_ttl: t.explicitMaxTtl,
    ...(id !== null ? { id } : {}),
    issue_time: iso(t.creationTime),
    meta: t.meta,
    num_uses: t.numUses > 0 ? t.usesLeft : 0,
    orphan: t.parentAccessor === null,
    path: t.path,
    policies: t.policies,
    ...(t.period > 0 ? { period: t.period } : {}),
    ...(t.roleName ? { role: t.roleName } : {}),
    ...(t.boundCidrs.length > 0 ? { bound_cidrs: t.boundCidrs } : {}),
    renewable: t.renewable,
    ttl: t.expireTime === null ? 0 : Math.max(0, Math.floor((t.expireTime - now) / 1000)),
    type: "service",
    namespace_path: nsPath,
  };
}

export function authBlock(t: TokenRow, clientToken: string, now: number): AuthBlock {
  return {
    client_token: clientToken,
    accessor: t.accessor,
    policies: t.policies,
    token_policies: t.policies,
    identity_policies: null,
    metadata: t.meta,
    lease_duration: t.expireTime === null ? 0 : Math.max(0, Math.floor((t.expireTime - now) / 1000)),
    renewable: t.renewable,
    entity_id: "",
    token_type: "service",
    orphan: t.parentAccessor === null,
    mfa_requirement: null,
    num_uses: t.numUses,
  };
}
