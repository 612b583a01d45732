/**
 * auth/token/*: create (also from a role), look up, renew and revoke tokens (the engine's token
 * store API, Vault API: /auth/token). Roles themselves are in ./token-role-routes.ts.
 */
import { ApiError, badRequest, permissionDenied } from "../core/errors";
import { defineFields } from "../core/fields";
import { route, type Req } from "../core/route";
import { sha256Hex } from "../core/encoding";
import { authenticate } from "./authenticate";
import { getNamespaceById } from "./namespace-store";
import {
  getTokenByAccessor,
  insertToken,
  revokeOrphan,
  listAccessors,
  revokeTree,
  setExpiry,
  type TokenEntry,
  type TokenRow,
} from "./token-store";
import { authBlock, childPolicies, lookupView, newAccessor, newTokenText, periodicLifetime, roleHasPolicyLists, rolePolicies, tokenLifetime } from "./tokens";
import { getTokenRole, type TokenRole } from "./token-role-store";
import { roleName, tokenRoleRoutes } from "./token-role-routes";

const createFields = defineFields({
  policies: { type: "comma-string-slice", description: "Policies of the new token (default: the parent's)." },
  ttl: { type: "duration", description: "Time to live (default 768h; none for root tokens)." },
  explicit_max_ttl: { type: "duration", description: "Hard limit the token can never be renewed past.", default: 0 },
  display_name: { type: "string", description: "Name shown in lookups (prefixed with \"token-\").", default: "" },
  num_uses: { type: "int", description: "Uses before the token is revoked (0 = unlimited).", default: 0 },
  meta: { type: "string-map", description: "Metadata echoed in lookups." },
  no_parent: { type: "bool", description: "Create an orphan (needs root or sudo).", default: false },
  no_default_policy: { type: "bool", description: "Do not attach the default policy.", default: false },
  renewable: { type: "bool", description: "Whether renew-self may extend it.", default: true },
  // Vault's Go client (TokenCreateRequest: Terraform's provider, the CLI) always sends "type",
  // empty when unset; empty means the default, as upstream's token store reads it.
  type: { type: "string", description: "Token type; only \"service\" (empty or \"default\" mean it).", default: "service", allowed: ["service", "default", ""] },
  // TokenCreateRequest's entity_alias has no omitempty either: the empty value asks for nothing.
  // Lanyard has no identity entities, so a value is refused rather than dropped.
  entity_alias: { type: "string", description: "Must be empty: Lanyard has no identity entities.", default: "" },
});

/**
 * Creates a child (or orphan) of the caller. With a role (auth/token/create/:role_name), Vault's
 * role rules apply: its policy lists replace the parent-subset rule, `orphan` makes an orphan
 * without sudo (and `no_parent` is ignored), `renewable:false`, `token_explicit_max_ttl`,
 * `token_num_uses` and `token_no_default_policy` bound what the request asks, `token_period`
 * makes the token periodic.
 */
async function createToken(req: Req<typeof createFields>, orphan: boolean, role: TokenRole | null = null, roleName = "") {
  const parent = req.token;
  if (!parent) throw permissionDenied();
  // Upstream's rule and wording (token_store.go handleCreateCommon, 400): a child, orphan or not,
  // would escape the parent's use count (without it, a num_uses=1 token could mint an
  // unlimited child). numUses is the limit the token was created with, not what is left of it.
  if (parent.numUses > 0) throw badRequest("restricted use token cannot generate child tokens");
  const f = req.fields;
  if (f.num_uses < 0) throw badRequest("num_uses: must be zero or positive");
  if (f.entity_alias.trim() !== "") throw badRequest("entity_alias: not supported; Lanyard has no identity entities or aliases");
  if (f.no_parent && !role) {
    // req.path is relative to the request's namespace; req.capabilities resolves it as the
    // dispatcher does (a token that is root only in a child namespace must not
    // make orphans there without sudo).
    if (!req.capabilities(req.path).has("sudo")) throw badRequest("no_parent: root or sudo privileges are required to create an orphan token");
  }
  const isOrphan = role ? role.orphan || parent.configuredRoot : orphan || f.no_parent || parent.configuredRoot;
  const noDefault = f.no_default_policy || role?.token_no_default_policy === true;
  const policies = role && roleHasPolicyLists(role) ? rolePolicies(parent, role, f.policies, noDefault) : childPolicies(parent, f.policies, noDefault);
  const explicitMax = role ? minNonZero(f.explicit_max_ttl, role.token_explicit_max_ttl) : f.explicit_max_ttl;
  const numUses = role && role.token_num_uses > 0 && (f.num_uses === 0 || f.num_uses > role.token_num_uses) ? role.token_num_uses : f.num_uses;
  const now = Date.now();
  const parentExpire = isOrphan ? null : parent.expireTime;
  const life =
    role && role.token_period > 0
      ? periodicLifetime(now, role.token_period, explicitMax, parentExpire)
      : tokenLifetime(now, policies, f.ttl, explicitMax, parentExpire);
  const text = newTokenText();
  const name = f.display_name.trim().replace(/[^\w.-]+/g, "-");
  const row: TokenRow = {
    hash: await sha256Hex(text),
    accessor: newAccessor(),
    namespaceId: req.ns.id,
    parentAccessor: isOrphan ? null : parent.accessor,
    policies,
    displayName: name ? `token-${name}` : "token",
    meta: f.meta ?? null,
    numUses,
    usesLeft: numUses,
    ttl: life.ttl,
    explicitMaxTtl: explicitMax,
    renewable: f.renewable && role?.renewable !== false && life.expireTime !== null,
    creationTime: now,
    expireTime: life.expireTime,
    maxExpireTime: life.maxExpireTime,
    // Vault's token paths: auth/token/create, create-orphan, create/<role>[/<path_suffix>].
    path: roleName ? rolePath(roleName, role?.path_suffix ?? "") : orphan ? "auth/token/create-orphan" : "auth/token/create",
    period: role && role.token_period > 0 ? role.token_period : 0,
    authMountId: null,
    roleName,
    boundCidrs: role?.token_bound_cidrs ?? [],
  };
  // A child is stored only if its parent is still valid at the instant of the insert: a
  // revocation that won the race leaves nothing behind (token-store.ts). The caller
  // is then a revoked token, so it gets what any revoked token gets.
  if (!(await insertToken(req.db, row, now))) throw permissionDenied();
  return { data: null, auth: authBlock(row, text, now), warnings: life.warnings };
}

/** A role's token path: Vault appends the role's path_suffix, so tokens can be revoked by prefix. */
const rolePath = (roleName: string, suffix: string): string => (suffix ? `auth/token/create/${roleName}/${suffix}` : `auth/token/create/${roleName}`);

const minNonZero = (a: number, b: number): number => (a > 0 && b > 0 ? Math.min(a, b) : a || b);

/** A token another request names, if it is valid and lives at or below the request's namespace. */
async function targetByText(req: Req, text: string): Promise<TokenEntry | null> {
  const t = await authenticate(req.db, req.env.ROOT_TOKEN ?? "", text, Date.now());
  if (!t || t.configuredRoot) return t;
  const ns = await getNamespaceById(req.db, t.namespaceId);
  return ns && ns.path.startsWith(req.ns.path) ? t : null;
}

async function targetByAccessor(req: Req, accessor: string): Promise<TokenRow | null> {
  const t = await getTokenByAccessor(req.db, accessor);
  if (!t) return null;
  const ns = await getNamespaceById(req.db, t.namespaceId);
  return ns && ns.path.startsWith(req.ns.path) ? t : null;
}

async function nsPath(req: Req, t: TokenRow): Promise<string> {
  return (await getNamespaceById(req.db, t.namespaceId))?.path ?? "";
}

async function renew(req: Req, t: TokenEntry, increment: number | undefined) {
  if (t.configuredRoot || t.expireTime === null) {
    return { data: null, auth: authBlock(t, t.presented, Date.now()), warnings: ["token has no expiry; nothing to renew"] };
  }
  if (!t.renewable) throw badRequest("token is not renewable");
  const now = Date.now();
  // A periodic token is extended by its period (Vault ignores the increment for those).
  const want = t.period > 0 ? t.period : increment && increment > 0 ? increment : t.ttl;
  let expire = now + want * 1000;
  const warnings: string[] = [];
  if (t.maxExpireTime !== null && expire > t.maxExpireTime) {
    expire = t.maxExpireTime;
    warnings.push("TTL of the renewal was capped by the token's maximum TTL");
  }
  await setExpiry(req.db, t.hash, t.ttl, expire);
  const updated = { ...t, expireTime: expire };
  return { data: null, auth: authBlock(updated, t.presented, now), warnings };
}

const tokenField = defineFields({ token: { type: "string", description: "The token.", required: true } });
const lookupField = defineFields({ token: { type: "string", description: "The token (default: the caller's)." } });
const accessorField = defineFields({ accessor: { type: "string", description: "The token's accessor.", required: true } });
const renewFields = defineFields({
  increment: { type: "duration", description: "Requested new TTL from now (default: the token's TTL)." },
});

export const tokenRoutes = [
  route({
    pattern: "create",
    fields: createFields,
    handlers: { update: (req) => createToken(req, false) },
  }),
  route({
    pattern: "create/:role_name",
    fields: defineFields({ ...createFields, role_name: { type: "string", description: "The token role.", required: true } }),
    handlers: {
      async update(req) {
        const name = roleName(req.fields.role_name);
        const role = await getTokenRole(req.db, req.ns.id, name);
        if (!role) throw badRequest(`unknown role ${name}`);
        return createToken(req, false, role, name);
      },
    },
  }),
  route({
    pattern: "create-orphan",
    fields: createFields,
    handlers: { update: (req) => createToken(req, true) },
  }),
  route({
    pattern: "lookup-self",
    handlers: {
      async read(req) {
        const t = req.token as TokenEntry;
        if (t.configuredRoot) return { data: { ...lookupView(t, t.presented, Date.now(), ""), orphan: true, path: "" } };
        return { data: lookupView(t, t.presented, Date.now(), await nsPath(req, t)) };
      },
    },
  }),
  route({
    pattern: "lookup",
    fields: lookupField,
    handlers: {
      async read(req) {
        return tokenLookup(req);
      },
      async update(req) {
        return tokenLookup(req);
      },
    },
  }),
  route({
    pattern: "lookup-accessor",
    fields: accessorField,
    handlers: {
      async update(req) {
        const t = await targetByAccessor(req, req.fields.accessor);
        if (!t) throw badRequest("accessor: invalid accessor");
        return { data: lookupView(t, "", Date.now(), await nsPath(req, t)) };
      },
    },
  }),
  route({
    pattern: "renew-self",
    fields: renewFields,
    handlers: { update: (req) => renew(req, req.token as TokenEntry, req.fields.increment) },
  }),
  route({
    pattern: "renew",
    fields: defineFields({ ...tokenField, ...renewFields }),
    handlers: {
      async update(req) {
        const t = await targetByText(req, req.fields.token);
        if (!t) throw badRequest("token: invalid token");
        return renew(req, t, req.fields.increment);
      },
    },
  }),
  route({
    pattern: "revoke-self",
    handlers: {
      async update(req) {
        const t = req.token as TokenEntry;
        if (t.configuredRoot) throw badRequest("the configured root token cannot be revoked; change ROOT_TOKEN instead");
        await revokeTree(req.db, t.accessor);
        return null;
      },
    },
  }),
  route({
    pattern: "revoke",
    fields: tokenField,
    handlers: {
      async update(req) {
        const t = await targetByText(req, req.fields.token);
        if (t?.configuredRoot) throw badRequest("the configured root token cannot be revoked; change ROOT_TOKEN instead");
        if (t) await revokeTree(req.db, t.accessor);
        return null;
      },
    },
  }),
  route({
    pattern: "revoke-accessor",
    fields: accessorField,
    handlers: {
      async update(req) {
        const t = await targetByAccessor(req, req.fields.accessor);
        // Vault: an unknown accessor is not an error, but a 200 with this warning.
        if (!t) return { data: null, warnings: ["No token found with this accessor"] };
        await revokeTree(req.db, t.accessor);
        return null;
      },
    },
  }),
  route({
    // Vault: revokes the token only; its children become orphans. Needs root or sudo.
    pattern: "revoke-orphan",
    fields: tokenField,
    handlers: {
      async update(req) {
        if (!req.capabilities(req.path).has("sudo")) throw badRequest("root or sudo privileges required to revoke and orphan");
        const t = await targetByText(req, req.fields.token);
        if (!t) throw badRequest("token to revoke not found");
        if (t.configuredRoot) throw badRequest("the configured root token cannot be revoked; change ROOT_TOKEN instead");
        await revokeOrphan(req.db, t.accessor);
        return null;
      },
    },
  }),
  ...tokenRoleRoutes,
  route({
    pattern: "accessors",
    sudo: ["list"],
    handlers: {
      async list(req) {
        const keys = await listAccessors(req.db, req.ns.id);
        return { data: { keys } };
      },
    },
  }),
];

/** Vault's lookup: the token in the body (or query), else the caller's; an unknown one is 403 `bad token`. */
async function tokenLookup(req: Req<typeof lookupField>) {
  const text = req.fields.token && req.fields.token !== "" ? req.fields.token : (req.token as TokenEntry).presented;
  const t = await targetByText(req, text);
  if (!t) throw new ApiError(403, "bad token");
  if (t.configuredRoot) return { data: { ...lookupView(t, t.presented, Date.now(), ""), orphan: true, path: "" } };
  return { data: lookupView(t, t.presented, Date.now(), await nsPath(req, t)) };
}
