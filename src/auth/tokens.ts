/**
 * Token rules, as plain functions: which policies a child may get, how long it lives, and the
 * read shapes (lookup data and the `auth` block). Storage is in token-store.ts.
 */
import { SYSTEM_MAX_TTL } from "../sys/limits";
import { badRequest } from "../http/errors";
import type { AuthBlock } from "../http/route";
import { bytesToBase64Url } from "../util/encoding";
import type { TokenEntry, TokenRow } from "./token-store";

export function newTokenText(): string {
  return `lys.${bytesToBase64Url(crypto.getRandomValues(new Uint8Array(24)))}`;
}

export function newAccessor(): string {
  return bytesToBase64Url(crypto.getRandomValues(new Uint8Array(18)));
}

/**
 * Policies of a new token. Without `policies` the child inherits the parent's. A parent that is
 * not root may only hand out policies it has itself. `default` is added unless refused.
 */
export function childPolicies(parent: TokenEntry, requested: string[] | undefined, noDefault: boolean): string[] {
  const parentIsRoot = parent.policies.includes("root");
  let policies = (requested ?? parent.policies).map((p) => p.trim().toLowerCase()).filter((p) => p !== "");
  if (!parentIsRoot) {
    const extra = policies.filter((p) => p !== "default" && !parent.policies.includes(p));
    if (extra.length > 0) {
      throw badRequest(`policies: child policies must be a subset of the parent's policies; not allowed: ${extra.join(", ")}`);
    }
  }
  if (!noDefault && !policies.includes("root") && !policies.includes("default")) policies.push("default");
  if (noDefault) policies = policies.filter((p) => p !== "default");
  return [...new Set(policies)].sort();
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
    path: "auth/token/create",
    policies: t.policies,
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
