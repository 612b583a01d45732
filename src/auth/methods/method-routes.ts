/**
 * What every auth method's routes share: the auth mount a request runs under, and `LIST role`
 * (Vault answers 404 for an empty list, as for any empty LIST).
 */
import { notFound } from "../../core/errors";
import { route, type Req, type RouteDef } from "../../core/route";
import { listRoles } from "./method-store";

/** The auth mount's id: only auth mounts route to a method (src/app/dispatch.ts), so none is a bug. */
export function authMountId(req: Req): string {
  if (!req.mount) throw new Error(`auth method route ${req.path} reached without an auth mount`);
  return req.mount.id;
}

/** `LIST role`: the mount's role names, sorted. */
export function roleListRoute(): RouteDef {
  return route({
    pattern: "role",
    handlers: {
      async list(req) {
        const keys = await listRoles(req.db, authMountId(req));
        if (keys.length === 0) throw notFound();
        return { data: { keys } };
      },
    },
  });
}
