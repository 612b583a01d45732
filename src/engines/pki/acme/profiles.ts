/**
 * ACME profiles (draft-aaron-acme-profiles, now draft-ietf-acme-profiles; docs/pki-acme.md
 * "Profiles"): config/acme `profiles` maps a profile name to a role of the mount. The directories
 * whose path names no role (`acme/`, `issuer/:ref/acme/`) list them in `meta.profiles`, and a
 * new-order `profile` picks that role for the order's names and its certificate (TTLs, key
 * rules); the order echoes it. A profile not offered is `invalidProfile`; no profile is the
 * directory's own role or policy, as before. A role directory (`roles/:role/acme/`) fixes its
 * role and offers none. The issuer stays the directory's.
 */
import type { Role } from "../policy/roles";
import { getRole } from "../storage/store";
import type { AcmeRequest, SignedRequest } from "./context";
import { acmeError } from "./problem";

/** The profiles a directory offers (name → role); empty for a role directory. */
export function offeredProfiles(a: AcmeRequest): Record<string, string> {
  return a.req.params.role === undefined ? a.cfg.profiles : {};
}

/** meta.profiles: name → a human-readable description. */
export function profilesMeta(a: AcmeRequest): Record<string, string> | null {
  const offered = Object.entries(offeredProfiles(a));
  if (offered.length === 0) return null;
  return Object.fromEntries(offered.map(([name, role]) => [name, `Certificates issued under role "${role}" of this mount`]));
}

export interface OrderRole {
  profile: string;
  roleName: string;
  role: Role | null;
}

/** The role a new order uses: its profile's, or the directory's. */
export async function orderRole(s: SignedRequest, profile: unknown): Promise<OrderRole> {
  if (profile === undefined) return { profile: "", roleName: s.dir.roleName, role: s.dir.role };
  if (typeof profile !== "string") throw acmeError("malformed", "'profile' must be a string");
  const roleName = offeredProfiles(s)[profile];
  if (roleName === undefined) {
    const names = Object.keys(offeredProfiles(s));
    throw acmeError("invalidProfile", `profile ${JSON.stringify(profile.slice(0, 64))} is not offered by this directory${names.length ? `; offered: ${names.join(", ")}` : ""}`);
  }
  const role = await getRole(s.ctx.db, s.ctx.mount.id, roleName);
  if (!role) throw acmeError("invalidProfile", `profile ${profile}: its role ${roleName} no longer exists`);
  return { profile, roleName, role };
}

/** The role a finalize issues under: the order's, which is the directory's unless a profile chose it. */
export async function roleOfOrder(a: AcmeRequest, order: { role: string; profile: string }): Promise<Role | null> {
  if (order.profile === "" || order.role === a.dir.roleName) return a.dir.role;
  const role = await getRole(a.ctx.db, a.ctx.mount.id, order.role);
  // draft-ietf-acme-profiles §4: a profile the CA no longer issues fails the finalize.
  if (!role) throw acmeError("invalidProfile", `profile ${order.profile}: its role ${order.role} no longer exists`);
  return role;
}
