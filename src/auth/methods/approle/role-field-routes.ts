/**
 * AppRole's single-field role endpoints (Vault API: /auth/approle/role/:role_name; OpenBao
 * builtin/credential/approle/path_role.go): `role/:role_name/<field>` reads one setting (GET),
 * sets it (POST, the field is required: 400 `missing <field>`) or puts back its default
 * (DELETE). Vault's rules apply: a missing role is 404 on read, 404 on write, 204 on delete; a
 * write that would leave the role without a constraint is refused (./role.ts checkConstraints).
 */
import { parseCidrs } from "../../../core/cidr";
import { badRequest, notFound } from "../../../core/errors";
import { defineFields, type FieldSchema } from "../../../core/fields";
import { route, type Req, type RouteDef } from "../../../core/route";
import { tokenParamFields, tokenParamsFrom, tokenParamsView } from "../token-params";
import { type AppRole, loadRole, roleNameOf, saveRole } from "./role";

const roleNameField = defineFields({
  role_name: { type: "string", description: "Name of the role (stored lower-case).", required: true },
});

interface FieldEndpoint {
  /** The path segment after role/:role_name/. */
  suffix: string;
  /** The fields a write takes; the first one names the 400 when none is sent. */
  fields: FieldSchema;
  /** What a read answers. */
  view(role: AppRole): Record<string, unknown>;
  /** A write's new role (only called when one of `fields` was sent). */
  write?(req: Req, role: AppRole): AppRole;
  /** The role with the setting back at its default. */
  reset?(role: AppRole): AppRole;
  /** The text of the 400 when a write sends none of the fields (default `missing <first field>`). */
  missing?: string;
  readWarning?: string;
}

/** Keys of the role read's token fields (token_* and the legacy names) that a read shows. */
function tokenView(role: AppRole, keys: readonly string[]): Record<string, unknown> {
  const all = tokenParamsView(role.token);
  const out: Record<string, unknown> = {};
  for (const k of keys) if (k in all) out[k] = all[k];
  return out;
}

/** A single-field endpoint over common token fields: the framework's parsing does the work. */
function tokenEndpoint(suffix: string, names: readonly (keyof typeof tokenParamFields & string)[], reset: (r: AppRole) => AppRole, missing?: string): FieldEndpoint {
  const fields: FieldSchema = {};
  for (const n of names) fields[n] = tokenParamFields[n];
  return {
    suffix,
    fields,
    view: (role) => tokenView(role, names),
    write: (req, role) => ({ ...role, token: tokenParamsFrom(req, role.token) }),
    reset,
    missing,
  };
}

function cidrWrite(field: string): (req: Req, role: AppRole) => AppRole {
  return (req, role) => {
    const cidrs = parseCidrs(field, Array.isArray(req.fields[field]) ? (req.fields[field] as string[]) : []);
    // Vault: an empty list is refused here; DELETE clears the binding.
    if (cidrs.length === 0) throw badRequest("missing bound_cidr_list");
    return { ...role, secretIdBoundCidrs: cidrs };
  };
}

const ENDPOINTS: FieldEndpoint[] = [
  tokenEndpoint("policies", ["token_policies", "policies"], (r) => ({ ...r, token: { ...r.token, policies: [] } }), "missing token_policies"),
  tokenEndpoint("token-num-uses", ["token_num_uses"], (r) => ({ ...r, token: { ...r.token, numUses: 0 } })),
  tokenEndpoint("token-ttl", ["token_ttl"], (r) => ({ ...r, token: { ...r.token, ttl: 0 } })),
  tokenEndpoint("token-max-ttl", ["token_max_ttl"], (r) => ({ ...r, token: { ...r.token, maxTtl: 0 } })),
  tokenEndpoint("period", ["token_period", "period"], (r) => ({ ...r, token: { ...r.token, period: 0 } }), "missing period"),
  tokenEndpoint("token-bound-cidrs", ["token_bound_cidrs"], (r) => ({ ...r, token: { ...r.token, boundCidrs: [] } })),
  {
    suffix: "secret-id-num-uses",
    fields: defineFields({ secret_id_num_uses: { type: "int", description: "Uses of each SecretID (0 = unlimited)." } }),
    view: (r) => ({ secret_id_num_uses: r.secretIdNumUses }),
    write: (req, r) => {
      const n = typeof req.fields.secret_id_num_uses === "number" ? req.fields.secret_id_num_uses : 0;
      if (n < 0) throw badRequest("secret_id_num_uses cannot be negative");
      return { ...r, secretIdNumUses: n };
    },
    reset: (r) => ({ ...r, secretIdNumUses: 0 }),
  },
  {
    suffix: "secret-id-ttl",
    fields: defineFields({ secret_id_ttl: { type: "duration", description: "Lifetime of each SecretID (0 = none)." } }),
    view: (r) => ({ secret_id_ttl: r.secretIdTtl }),
    write: (req, r) => ({ ...r, secretIdTtl: typeof req.fields.secret_id_ttl === "number" ? req.fields.secret_id_ttl : 0 }),
    reset: (r) => ({ ...r, secretIdTtl: 0 }),
  },
  {
    suffix: "bind-secret-id",
    fields: defineFields({ bind_secret_id: { type: "bool", description: "Require a SecretID at login." } }),
    view: (r) => ({ bind_secret_id: r.bindSecretId }),
    write: (req, r) => ({ ...r, bindSecretId: req.fields.bind_secret_id === true }),
    reset: (r) => ({ ...r, bindSecretId: true }),
  },
  {
    suffix: "secret-id-bound-cidrs",
    fields: defineFields({ secret_id_bound_cidrs: { type: "comma-string-slice", description: "CIDR blocks logins must come from." } }),
    view: (r) => ({ secret_id_bound_cidrs: r.secretIdBoundCidrs.length > 0 ? r.secretIdBoundCidrs : null }),
    write: cidrWrite("secret_id_bound_cidrs"),
    reset: (r) => ({ ...r, secretIdBoundCidrs: [] }),
  },
  {
    suffix: "bound-cidr-list",
    fields: defineFields({ bound_cidr_list: { type: "comma-string-slice", description: "Deprecated name of secret_id_bound_cidrs." } }),
    view: (r) => ({ bound_cidr_list: r.secretIdBoundCidrs.length > 0 ? r.secretIdBoundCidrs : null }),
    write: cidrWrite("bound_cidr_list"),
    reset: (r) => ({ ...r, secretIdBoundCidrs: [] }),
    readWarning: 'The "bound_cidr_list" field is deprecated and will be removed. Please use "secret_id_bound_cidrs" instead.',
  },
  {
    // GET only: the setting is fixed when the role is created.
    suffix: "local-secret-ids",
    fields: {},
    view: (r) => ({ local_secret_ids: r.localSecretIds }),
  },
];

function nameOf(req: Req): string {
  return roleNameOf(typeof req.fields.role_name === "string" ? req.fields.role_name : "");
}

function endpointRoute(e: FieldEndpoint): RouteDef {
  const names = Object.keys(e.fields);
  const { write, reset } = e;
  return route({
    pattern: `role/:role_name/${e.suffix}`,
    fields: { ...e.fields, ...roleNameField },
    handlers: {
      async read(req) {
        const loaded = await loadRole(req, nameOf(req));
        if (!loaded) throw notFound();
        return { data: e.view(loaded.role), warnings: e.readWarning ? [e.readWarning] : [] };
      },
      ...(write
        ? {
            async update(req: Req) {
              const name = nameOf(req);
              const loaded = await loadRole(req, name);
              if (!loaded) throw notFound([`role "${name}" does not exist`]);
              if (!names.some((n) => req.has(n))) throw badRequest(e.missing ?? `missing ${names[0] ?? "value"}`);
              await saveRole(req, name, write(req, loaded.role), loaded.roleId);
              return null;
            },
          }
        : {}),
      ...(reset
        ? {
            async delete(req: Req) {
              const name = nameOf(req);
              const loaded = await loadRole(req, name);
              if (!loaded) return null;
              await saveRole(req, name, reset(loaded.role), loaded.roleId);
              return null;
            },
          }
        : {}),
    },
  });
}

export const roleFieldRoutes: RouteDef[] = ENDPOINTS.map(endpointRoute);
