/** Turns the token a request presents into the caller's TokenEntry, or null when it is not valid. */
import type { Db } from "../core/db/client";
import { ROOT_NAMESPACE } from "../core/mount-store";
import { sha256Hex, timingSafeEqual } from "../core/encoding";
import { getTokenByHash, type TokenEntry, type TokenRow } from "./token-store";

/** The token of a request: `X-Service-Token`, else `Authorization: Bearer` (docs/http-conventions.md). */
export function presentedToken(headers: Headers): string | null {
  const direct = headers.get("x-service-token");
  if (direct) return direct.trim();
  const auth = headers.get("authorization");
  const m = auth ? /^Bearer\s+(.+)$/i.exec(auth) : null;
  if (m?.[1]) return m[1].trim();
  // Vault's own header, what every Vault client sends (docs/http-conventions.md: third in precedence).
  const vault = headers.get("x-vault-token");
  return vault ? vault.trim() : null;
}

/** The configured root token as a caller: root policy, root namespace, never expires. */
export function rootEntry(presented: string): TokenEntry {
  return {
    hash: "",
    accessor: "root",
    namespaceId: ROOT_NAMESPACE.id,
    parentAccessor: null,
    policies: ["root"],
    displayName: "root",
    meta: null,
    numUses: 0,
    usesLeft: 0,
    ttl: 0,
    explicitMaxTtl: 0,
    renewable: false,
    creationTime: 0,
    expireTime: null,
    maxExpireTime: null,
    path: "",
    period: 0,
    authMountId: null,
    roleName: "",
    boundCidrs: [],
    configuredRoot: true,
    presented,
  };
}

export async function authenticate(db: Db, rootToken: string, presented: string, now: number): Promise<TokenEntry | null> {
  if (presented === "") return null;
  if (isRootToken(rootToken, presented)) return rootEntry(presented);
  // The lookup is by SHA-256 of the token, so timing reveals nothing about stored tokens.
  return tokenEntryOf(await getTokenByHash(db, await sha256Hex(presented)), presented, now);
}

/** Whether the presented token is the configured ROOT_TOKEN (constant-time comparison). */
export function isRootToken(rootToken: string, presented: string): boolean {
  return rootToken !== "" && timingSafeEqual(presented, rootToken);
}

/** The caller for a stored token row looked up by hash; null when expired or out of uses. */
export function tokenEntryOf(row: TokenRow | null | undefined, presented: string, now: number): TokenEntry | null {
  if (!row) return null;
  if (row.expireTime !== null && row.expireTime <= now) return null;
  if (row.numUses > 0 && row.usesLeft <= 0) return null;
  return { ...row, configuredRoot: false, presented };
}
