/**
 * Storage of token roles (auth/token/roles/:name): the only module that touches the
 * `token_roles` table. A role is stored as one JSON document in its read form (Vault's field
 * names), since it is always read and written whole.
 */
import { and, eq, inArray } from "drizzle-orm";
import type { Db } from "../core/db/client";
import { tokenRoles } from "../core/db/schema";

/** A role's settings, with Vault's names (Vault API: /auth/token/roles/:role_name). */
export interface TokenRole {
  allowed_policies: string[];
  disallowed_policies: string[];
  allowed_policies_glob: string[];
  disallowed_policies_glob: string[];
  orphan: boolean;
  renewable: boolean;
  path_suffix: string;
  allowed_entity_aliases: string[];
  token_period: number;
  token_explicit_max_ttl: number;
  token_no_default_policy: boolean;
  token_num_uses: number;
  token_type: string;
  token_bound_cidrs: string[];
}

/** Vault's defaults for a new role. */
export const ROLE_DEFAULTS: TokenRole = {
  allowed_policies: [],
  disallowed_policies: [],
  allowed_policies_glob: [],
  disallowed_policies_glob: [],
  orphan: false,
  renewable: true,
  path_suffix: "",
  allowed_entity_aliases: [],
  token_period: 0,
  token_explicit_max_ttl: 0,
  token_no_default_policy: false,
  token_num_uses: 0,
  token_type: "default-service",
  token_bound_cidrs: [],
};

/** A stored document as a role: defaults fill members an older document lacks. */
function asRole(config: Record<string, unknown>): TokenRole {
  return { ...ROLE_DEFAULTS, ...(config as Partial<TokenRole>) };
}

export async function getTokenRole(db: Db, nsId: string, name: string): Promise<TokenRole | null> {
  const rows = await db.select().from(tokenRoles).where(and(eq(tokenRoles.namespaceId, nsId), eq(tokenRoles.name, name)));
  const row = rows[0];
  return row ? asRole(row.config) : null;
}

export async function putTokenRole(db: Db, nsId: string, name: string, role: TokenRole): Promise<void> {
  const config = { ...role } as Record<string, unknown>;
  const updatedAt = Date.now();
  await db
    .insert(tokenRoles)
    .values({ namespaceId: nsId, name, config, updatedAt })
    .onConflictDoUpdate({ target: [tokenRoles.namespaceId, tokenRoles.name], set: { config, updatedAt } });
}

export async function deleteTokenRole(db: Db, nsId: string, name: string): Promise<void> {
  await db.delete(tokenRoles).where(and(eq(tokenRoles.namespaceId, nsId), eq(tokenRoles.name, name)));
}

export async function listTokenRoleNames(db: Db, nsId: string): Promise<string[]> {
  const rows = await db.select({ name: tokenRoles.name }).from(tokenRoles).where(eq(tokenRoles.namespaceId, nsId));
  return rows.map((r) => r.name).sort();
}

export async function deleteNamespaceTokenRoles(db: Db, nsIds: string[]): Promise<void> {
  if (nsIds.length === 0) return;
  await db.delete(tokenRoles).where(inArray(tokenRoles.namespaceId, nsIds));
}
