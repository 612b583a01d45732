/** roles, roles/:name (Vault API /pki/roles/:name). */
import { badRequest, notFound } from "../../../core/errors";
import { parseFields } from "../../../core/fields";
import { route, type Req } from "../../../core/route";
import { resolveIssuerIn } from "../ca/issuers";
import { buildRole, roleFields, roleToFields, type Role, type RoleFieldValues } from "../policy/roles";
import { deleteRole, getAllConfig, getRole, listIssuers, listRoleNames, putRole } from "../storage/store";
import { mountOf, paginate } from "./common";

/** The warning for an issuer_ref that does not resolve now: accepted, but flagged (as upstream). */
async function issuerRefWarning(req: Req, ref: string): Promise<string | null> {
  const mount = mountOf(req);
  const [issuers, cfg] = await Promise.all([listIssuers(req.db, mount.id), getAllConfig(req.db, mount.id)]);
  try {
    resolveIssuerIn(issuers, cfg.issuers, ref);
    return null;
  } catch {
    if (ref.trim().toLowerCase() === "default") {
      return "Issuing Certificate was set to default, but no default issuing certificate (configurable at /config/issuers) is currently set";
    }
    return `Issuing Certificate was set to ${ref} but no issuing certificate currently has that name`;
  }
}

async function save(req: Req, name: string, values: Omit<RoleFieldValues, "name">) {
  const { role, warnings } = buildRole(values);
  const w = await issuerRefWarning(req, role.issuer_ref);
  if (w) warnings.push(w);
  await putRole(req.db, mountOf(req).id, name, role);
  return { data: role, warnings };
}

/** The stored role, decoded: a role written before a field existed reads with its default. */
export async function loadRole(req: Req, name: string): Promise<Role | null> {
  return getRole(req.db, mountOf(req).id, name);
}

export const roleRoutes = [
  route({
    pattern: "roles",
    handlers: {
      async list(req) {
        const keys = paginate(await listRoleNames(req.db, mountOf(req).id), req);
        if (keys.length === 0) throw notFound();
        return { data: { keys } };
      },
    },
  }),
  route({
    pattern: "roles/:name",
    fields: roleFields,
    handlers: {
      async read(req) {
        const role = await loadRole(req, req.fields.name);
        if (!role) throw notFound();
        return { data: role };
      },
      async update(req) {
        const { name, ...values } = req.fields;
        return save(req, name, values);
      },
      async patch(req) {
        const existing = await loadRole(req, req.fields.name);
        if (!existing) throw badRequest("Unable to fetch role entry to patch");
        // Overlay only the fields the client sent on the stored role (merge patch).
        const merged: Record<string, unknown> = { ...roleToFields(existing) };
        const parsed = parseFields(roleFields, req.body, req.params);
        for (const k of Object.keys(roleFields)) if (k !== "name" && parsed.has(k as keyof typeof roleFields & string)) merged[k] = parsed.values[k as keyof typeof roleFields];
        return save(req, req.fields.name, merged as Omit<RoleFieldValues, "name">);
      },
      async delete(req) {
        await deleteRole(req.db, mountOf(req).id, req.fields.name);
        return null;
      },
    },
  }),
];
