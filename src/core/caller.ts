/**
 * Who is calling and what they may do: the types every layer shares. The auth layer fills them
 * (src/auth/: token storage, policy parsing, the ACL); core and the engines only read them, so
 * they live here and the dependency rule `core ← auth ← engines ← app` holds.
 */
/** Capabilities a policy rule can grant (the engine's policy syntax). */
export const CAPABILITIES = ["create", "read", "update", "patch", "delete", "list", "sudo", "deny"] as const;
export type Capability = (typeof CAPABILITIES)[number];

/** What a request does, after verb mapping (`LIST`/`?list=true` → list, POST/PUT → update…). */
export type Operation = "read" | "list" | "create" | "update" | "patch" | "delete";

/**
 * A stored token, as the `tokens` table holds it (src/core/db/schema/core.ts). Declared here, not
 * inferred from the schema, so that nothing outside storage reads the schema; the token store
 * (src/auth/token-store.ts) checks at type level that the two stay the same.
 */
export interface TokenRow {
  /** SHA-256 of the token, hex. The token itself is never stored. */
  hash: string;
  accessor: string;
  namespaceId: string;
  /** Accessor of the parent token; null for orphans and for children of the configured root token. */
  parentAccessor: string | null;
  policies: string[];
  displayName: string;
  meta: Record<string, string> | null;
  numUses: number;
  /** Uses left when numUses > 0; decremented atomically on each use. */
  usesLeft: number;
  ttl: number;
  explicitMaxTtl: number;
  renewable: boolean;
  creationTime: number;
  expireTime: number | null;
  /** Hard limit from explicit_max_ttl or the parent's expiry; renewals never pass it. */
  maxExpireTime: number | null;
  /** The path that created it, as lookup shows it: "auth/token/create", "auth/approle/login". */
  path: string;
  /** Seconds; > 0 makes the token periodic (each renewal extends it by the period). */
  period: number;
  /** The auth mount that issued it at login; null for tokens of auth/token/. */
  authMountId: string | null;
  /** The role it was created or logged in through; "" when none. */
  roleName: string;
  /** CIDR blocks the token may be used from (token_bound_cidrs); empty = anywhere. */
  boundCidrs: string[];
}

/** The authenticated caller. `configuredRoot` is the ROOT_TOKEN itself. */
export interface TokenEntry extends TokenRow {
  configuredRoot: boolean;
  /** The token text as presented, kept only for this request (lookup-self returns it as `id`). */
  presented: string;
}
