/**
 * AppRole role endpoints (Vault API: /auth/approle/role/:role_name): LIST `role`, `role/:role_name`
 * (read, create/update, delete) and `role/:role_name/role-id`. The single-field endpoints
 * (`role/:role_name/token-ttl`, …) are in ./role-field-routes.ts. Routes only coerce, check and
 * shape; the role's model and storage rules are in ./role.ts.
 */
import { roleListRoute } from "../method-routes";
import { parseCidrs } from "../../../core/cidr";
import { badRequest, notFound } from "../../../core/errors";
import { defineFields } from "../../../core/fields";
import { route, type Req } from "../../../core/route";
import { deleteRole, getRole } from "../method-store";
import { tokenParamFields, tokenParamsFrom, tokenParamsView } from "../token-params";
import { deleteRoleSecretIds } from "./secret-id-store";
import { type AppRole, decodeRole, loadRole, MAX_ID_LENGTH, mountIdOf, roleNameOf, saveRole } from "./role";

const roleNameField = defineFields({
  role_name: { type: "string", description: "Name of the role (stored lower-case).", required: true },
});

const roleFields = defineFields({
  ...tokenParamFields,
  ...roleNameField,
  role_id: { type: "string", description: "The RoleID; a random UUID when a role is created without one." },
  bind_secret_id: { type: "bool", description: "Require a SecretID at login (default true)." },
  secret_id_bound_cidrs: {
    type: "comma-string-slice",
    description: "CIDR blocks logins must come from; also the blocks a SecretID's cidr_list must lie within.",
  },
  bound_cidr_list: { type: "comma-string-slice", description: "Deprecated name of secret_id_bound_cidrs." },
  secret_id_num_uses: { type: "int", description: "Uses of each SecretID (0 = unlimited); also their upper limit." },
  secret_id_ttl: { type: "duration", description: "Lifetime of each SecretID (0 = none); also their upper limit." },
  local_secret_ids: { type: "bool", description: "SecretIDs are local to the cluster; settable at creation only." },
});

/** Vault's role read (path_role.go pathRoleRead). It never shows the RoleID: use role-id. */
export function roleView(role: AppRole): Record<string, unknown> {
  return {
    bind_secret_id: role.bindSecretId,
    // Vault reads a nil slice here, so null when unset.
    secret_id_bound_cidrs: role.secretIdBoundCidrs.length > 0 ? role.secretIdBoundCidrs : null,
    secret_id_num_uses: role.secretIdNumUses,
    secret_id_ttl: role.secretIdTtl,
    local_secret_ids: role.localSecretIds,
    ...tokenParamsView(role.token),
  };
}

/**
 * A create or update of `role/:role_name` (path_role.go pathRoleCreateUpdate): defaults on
 * create, and on update only the fields sent change.
 */
async function writeRole(req: Req<typeof roleFields>): Promise<null> {
  const f = req.fields;
  const name = roleNameOf(f.role_name);
  const existing = await getRole(req.db, mountIdOf(req), name);
  const prev = existing ? decodeRole(existing.config) : null;
  if (prev && req.has("local_secret_ids")) throw badRequest("local_secret_ids can only be modified during role creation");

  const role: AppRole = {
    bindSecretId: prev?.bindSecretId ?? true,
    secretIdBoundCidrs: prev?.secretIdBoundCidrs ?? [],
    secretIdNumUses: prev?.secretIdNumUses ?? 0,
    secretIdTtl: prev?.secretIdTtl ?? 0,
    localSecretIds: prev?.localSecretIds ?? f.local_secret_ids === true,
    token: tokenParamsFrom(req, prev?.token ?? null),
    secretIdSalt: prev ? prev.secretIdSalt : crypto.randomUUID(),
  };
  if (req.has("bind_secret_id")) role.bindSecretId = f.bind_secret_id === true;
  // The current name wins over the legacy one when both are sent (Vault's GetFirst).
  if (req.has("secret_id_bound_cidrs")) role.secretIdBoundCidrs = parseCidrs("secret_id_bound_cidrs", f.secret_id_bound_cidrs ?? []);
  else if (req.has("bound_cidr_list")) role.secretIdBoundCidrs = parseCidrs("bound_cidr_list", f.bound_cidr_list ?? []);
  if (req.has("secret_id_num_uses")) role.secretIdNumUses = f.secret_id_num_uses ?? 0;
  if (role.secretIdNumUses < 0) throw badRequest("secret_id_num_uses cannot be negative");
  if (req.has("secret_id_ttl")) role.secretIdTtl = f.secret_id_ttl ?? 0;

  let roleId = existing?.roleId ?? "";
  if (req.has("role_id")) roleId = checkRoleId(f.role_id ?? "", "invalid role_id supplied, or failed to generate a role_id");
  else if (!existing) roleId = crypto.randomUUID();
  await saveRole(req, name, role, roleId);
  return null;
}

/** A RoleID supplied by the caller: trimmed (login trims it too), not empty, at most 4096 bytes. */
function checkRoleId(raw: string, emptyMessage: string): string {
  const roleId = raw.trim();
  if (roleId === "") throw badRequest(emptyMessage);
  if (new TextEncoder().encode(roleId).length > MAX_ID_LENGTH) throw badRequest(`role_id is longer than maximum of ${MAX_ID_LENGTH} bytes`);
  return roleId;
}

export const roleRoutes = [
  roleListRoute(),
  route({
    pattern: "role/:role_name",
    fields: roleFields,
    // Create vs update for the ACL (Vault's existence check): a new name needs `create`.
    exists: async (req) => (await getRole(req.db, mountIdOf(req), roleNameOf(req.params.role_name))) !== null,
    handlers: {
      async read(req) {
        const loaded = await loadRole(req, roleNameOf(req.fields.role_name));
        if (!loaded) throw notFound();
        return { data: roleView(loaded.role) };
      },
      create: writeRole,
      update: writeRole,
      // 204 also when the role did not exist (Vault). The framework's deleteRole revokes the
      // role's tokens; its SecretIDs go after it (a SecretID generated in between cannot work
      // for a new role of the same name: the new role has a new salt, ./role.ts).
      async delete(req) {
        const name = roleNameOf(req.fields.role_name);
        await deleteRole(req.db, mountIdOf(req), name);
        await deleteRoleSecretIds(req.db, mountIdOf(req), name);
        return null;
      },
    },
  }),
  route({
    pattern: "role/:role_name/role-id",
    fields: defineFields({ ...roleNameField, role_id: { type: "string", description: "The new RoleID." } }),
    handlers: {
      async read(req) {
        const loaded = await loadRole(req, roleNameOf(req.fields.role_name));
        if (!loaded) throw notFound();
        return { data: { role_id: loaded.roleId } };
      },
      async update(req) {
        const name = roleNameOf(req.fields.role_name);
        const loaded = await loadRole(req, name);
        if (!loaded) throw notFound([`role "${name}" does not exist`]);
        const roleId = checkRoleId(req.fields.role_id ?? "", "missing role_id");
        await saveRole(req, name, loaded.role, roleId);
        return null;
      },
    },
  }),
];
