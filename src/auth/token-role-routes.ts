/**
 * auth/token/roles[/:role_name]: token roles, as Vault's token store has them
 * (Vault API: /auth/token). Tokens are created from a role by auth/token/create/:role_name
 * (./token-routes.ts). Vault's role fields are the `allowed_*`/`disallowed_*` policy lists and
 * globs, `orphan`, `renewable`, `path_suffix`, `allowed_entity_aliases` and the token fields
 * `token_period`, `token_explicit_max_ttl`, `token_no_default_policy`, `token_num_uses`,
 * `token_type`, `token_bound_cidrs` (legacy `period`, `explicit_max_ttl`, `bound_cidrs`). Vault's
 * roles take no `token_ttl`, `token_max_ttl` or `token_policies`: like any unknown field they are
 * ignored with the "unrecognized parameters" warning. `path_suffix` is appended to the tokens' path
 * (./token-routes.ts). Lanyard has no identity entities, so `allowed_entity_aliases` is stored and
 * read back but no token is ever created with an alias: an empty list (Terraform's provider always
 * sends one) passes silently, a value is answered with a warning naming the field.
 */
import { badRequest, notFound } from "../core/errors";
import { defineFields } from "../core/fields";
import { route, type Req } from "../core/route";
import { deleteTokenRole, getTokenRole, listTokenRoleNames, putTokenRole, ROLE_DEFAULTS, type TokenRole } from "./token-role-store";

const roleFields = defineFields({
  role_name: { type: "string", description: "Name of the role (stored lower-case).", required: true },
  allowed_policies: { type: "comma-string-slice", description: "Policies tokens of this role may have; without `policies`, what they get." },
  disallowed_policies: { type: "comma-string-slice", description: "Policies tokens of this role may never have." },
  allowed_policies_glob: { type: "comma-string-slice", description: "Glob patterns of allowed policies." },
  disallowed_policies_glob: { type: "comma-string-slice", description: "Glob patterns of disallowed policies." },
  orphan: { type: "bool", description: "Tokens are orphans (no sudo needed)." },
  renewable: { type: "bool", description: "Tokens may be renewed (default true)." },
  path_suffix: { type: "string", description: "Appended to the token's creation path." },
  allowed_entity_aliases: { type: "comma-string-slice", description: "Stored; Lanyard has no identity entities, so a value warns." },
  token_period: { type: "duration", description: "Tokens are periodic with this period." },
  period: { type: "duration", description: "Deprecated name of token_period." },
  token_explicit_max_ttl: { type: "duration", description: "Hard limit of the tokens' lifetime." },
  explicit_max_ttl: { type: "duration", description: "Deprecated name of token_explicit_max_ttl." },
  token_no_default_policy: { type: "bool", description: "Do not attach the default policy." },
  token_num_uses: { type: "int", description: "Uses of each token (0 = unlimited)." },
  token_type: { type: "string", description: "service or default-service (default); batch tokens are not supported." },
  token_bound_cidrs: { type: "comma-string-slice", description: "Not supported; must be empty." },
  bound_cidrs: { type: "comma-string-slice", description: "Deprecated name of token_bound_cidrs." },
});

export function roleName(raw: string): string {
  const name = raw.trim().toLowerCase();
  if (!/^[\w.-]+$/.test(name)) throw badRequest(`role_name: invalid role name "${raw}"`);
  return name;
}

/** Vault's role read: every field, the legacy names beside the token_* ones, and the name. */
function roleView(name: string, r: TokenRole): Record<string, unknown> {
  return {
    name,
    ...r,
    period: r.token_period,
    explicit_max_ttl: r.token_explicit_max_ttl,
    bound_cidrs: r.token_bound_cidrs,
  };
}

/** Applies a write to a role (defaults for a new one; on update only the fields sent change). */
function applyWrite(req: Req<typeof roleFields>, current: TokenRole): TokenRole {
  const f = req.fields;
  const next: TokenRole = { ...current };
  const lower = (l: string[] | undefined) => [...new Set((l ?? []).map((p) => p.trim().toLowerCase()).filter((p) => p !== ""))];
  if (req.has("allowed_policies")) next.allowed_policies = lower(f.allowed_policies);
  if (req.has("disallowed_policies")) next.disallowed_policies = lower(f.disallowed_policies);
  if (req.has("allowed_policies_glob")) next.allowed_policies_glob = lower(f.allowed_policies_glob);
  if (req.has("disallowed_policies_glob")) next.disallowed_policies_glob = lower(f.disallowed_policies_glob);
  if (req.has("allowed_entity_aliases")) {
    next.allowed_entity_aliases = f.allowed_entity_aliases ?? [];
    if (next.allowed_entity_aliases.length > 0) {
      req.warnings.push("allowed_entity_aliases: Lanyard has no identity entities; tokens of this role are never created with an entity alias");
    }
  }
  if (req.has("orphan")) next.orphan = f.orphan === true;
  if (req.has("renewable")) next.renewable = f.renewable === true;
  if (req.has("path_suffix")) {
    const suffix = (f.path_suffix ?? "").trim();
    // Vault refuses suffixes that are not path-safe; "." runs would read as a relative path.
    if (suffix !== "" && (!/^[\w-]+(?:[./][\w-]+)*$/.test(suffix) || suffix.includes(".."))) {
      throw badRequest("given role path suffix contains invalid characters; must match [a-zA-Z0-9_-] segments separated by '/' or '.'");
    }
    next.path_suffix = suffix;
  }
  // The token_* name wins over its legacy alias when both are sent (Vault's tokenutil).
  if (req.has("token_period")) next.token_period = f.token_period ?? 0;
  else if (req.has("period")) next.token_period = f.period ?? 0;
  if (req.has("token_explicit_max_ttl")) next.token_explicit_max_ttl = f.token_explicit_max_ttl ?? 0;
  else if (req.has("explicit_max_ttl")) next.token_explicit_max_ttl = f.explicit_max_ttl ?? 0;
  if (req.has("token_no_default_policy")) next.token_no_default_policy = f.token_no_default_policy === true;
  if (req.has("token_num_uses")) {
    const n = f.token_num_uses ?? 0;
    if (n < 0) throw badRequest("token_num_uses cannot be negative");
    next.token_num_uses = n;
  }
  if (req.has("token_type")) {
    const t = (f.token_type ?? "").trim().toLowerCase();
    if (t === "batch" || t === "default-batch") throw badRequest(`token_type: batch tokens are not supported; use "service" or "default-service"`);
    if (!["", "default", "service", "default-service"].includes(t)) throw badRequest("invalid 'token_type' value");
    next.token_type = t === "" || t === "default" ? "default-service" : t;
  }
  const cidrs = req.has("token_bound_cidrs") ? f.token_bound_cidrs : req.has("bound_cidrs") ? f.bound_cidrs : undefined;
  if (cidrs !== undefined) {
    // Accepting CIDRs Lanyard does not enforce would give a false sense of protection.
    if (cidrs.length > 0) throw badRequest("token_bound_cidrs: binding tokens to CIDR blocks is not supported");
    next.token_bound_cidrs = [];
  }
  if (next.token_period < 0 || next.token_explicit_max_ttl < 0) throw badRequest("token_period and token_explicit_max_ttl cannot be negative");
  return next;
}

export const tokenRoleRoutes = [
  route({
    pattern: "roles",
    handlers: {
      async list(req) {
        const keys = await listTokenRoleNames(req.db, req.ns.id);
        if (keys.length === 0) throw notFound();
        return { data: { keys } };
      },
    },
  }),
  route({
    pattern: "roles/:role_name",
    fields: roleFields,
    exists: async (req) => (await getTokenRole(req.db, req.ns.id, roleName(String(req.params.role_name ?? "")))) !== null,
    handlers: {
      async read(req) {
        const name = roleName(req.fields.role_name);
        const role = await getTokenRole(req.db, req.ns.id, name);
        if (!role) throw notFound();
        return { data: roleView(name, role) };
      },
      async create(req) {
        const name = roleName(req.fields.role_name);
        await putTokenRole(req.db, req.ns.id, name, applyWrite(req, { ...ROLE_DEFAULTS }));
        return null;
      },
      async update(req) {
        const name = roleName(req.fields.role_name);
        const current = (await getTokenRole(req.db, req.ns.id, name)) ?? { ...ROLE_DEFAULTS };
        await putTokenRole(req.db, req.ns.id, name, applyWrite(req, current));
        return null;
      },
      // 204, also when the role did not exist (Vault).
      async delete(req) {
        await deleteTokenRole(req.db, req.ns.id, roleName(req.fields.role_name));
        return null;
      },
    },
  }),
];
