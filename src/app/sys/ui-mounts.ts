/**
 * sys/internal/ui/mounts[/:path] (vault-ecosystem.md §2.5): how `vault kv get/put/…` finds out
 * that a path is under a KV version 2 mount (it reads `data.options.version`, which must be the
 * string "2", and `data.path`, the mount prefix). Unauthenticated in Vault's routing, but the
 * handler looks at the token itself, so the routes are public with `publicSeesToken`.
 *
 * "Access" to a mount is, in Vault, any capability other than deny on the mount path or on any
 * ACL path under it. Handlers here can ask for capabilities on paths only (Req.capabilities), so
 * the check probes the paths such a policy names: the mount itself, the path asked for, and for
 * KV-v2 its `data/` and `metadata/` trees (which is what `path "secret/data/*"` policies grant).
 */
import { permissionDenied, ApiError } from "../../core/errors";
import { defineFields } from "../../core/fields";
import { listMounts, findMountForPath, type MountRow } from "../../core/mount-store";
import { route, type Req } from "../../core/route";
import { mountView } from "./mounts";
import { mayLearnNamespace } from "./namespace-visibility";

/** The built-in token auth method, as Vault lists it under `auth`. */
const TOKEN_AUTH_MOUNT = {
  type: "token",
  description: "token based credentials",
  accessor: "auth_token_00000000",
  uuid: "",
  config: { default_lease_ttl: 0, max_lease_ttl: 0, force_no_cache: false, token_type: "default-service" },
  options: null,
  local: false,
  seal_wrap: false,
  external_entropy_access: false,
  plugin_version: "",
  running_plugin_version: "",
  running_sha256: "",
};

function hasAccess(req: Req, m: MountRow, rest: string): boolean {
  const probes = [m.path, `${m.path}${rest}`];
  if (m.type === "kv") probes.push(`${m.path}data/`, `${m.path}metadata/`, `${m.path}data/${rest}`, `${m.path}metadata/${rest}`);
  return probes.some((p) => req.capabilities(p).size > 0);
}

function preflightDenied(path: string): ApiError {
  return new ApiError(403, `preflight capability check returned 403, please ensure client's policies grant access to path "${path}"`);
}

const pathFields = defineFields({ path: { type: "string", description: "A path under a mount.", required: true } });

export const uiMountRoutes = [
  route({
    pattern: "internal/ui/mounts",
    public: ["read"],
    publicSeesToken: true,
    handlers: {
      async read(req) {
        // Without a token Vault lists only mounts tuned `listing_visibility: unauth`; Lanyard has
        // no such tuning, so that list is empty.
        const secret: Record<string, unknown> = {};
        const auth: Record<string, unknown> = {};
        if (req.token) {
          for (const m of await listMounts(req.db, req.ns.id)) if (hasAccess(req, m, "")) secret[m.path] = mountView(m);
          if (req.capabilities("auth/token/").size > 0 || req.capabilities("auth/token/lookup-self").size > 0) auth["token/"] = TOKEN_AUTH_MOUNT;
        }
        // An empty answer from another namespace would only tell that it exists (issue 18 #12).
        if (Object.keys(secret).length === 0 && Object.keys(auth).length === 0 && !mayLearnNamespace(req)) throw permissionDenied();
        return { data: { secret, auth } };
      },
    },
  }),
  route({
    pattern: "internal/ui/mounts/*path",
    fields: pathFields,
    public: ["read"],
    publicSeesToken: true,
    handlers: {
      async read(req) {
        // Vault needs a token here despite the path being unauthenticated.
        if (!req.token) throw permissionDenied();
        const path = req.fields.path.replace(/^\/+/, "");
        const asked = path.endsWith("/") ? path : `${path}/`;
        if (path === "auth/token" || path.startsWith("auth/token/")) {
          return { data: { ...TOKEN_AUTH_MOUNT, path: "auth/token/" } };
        }
        const m = await findMountForPath(req.db, req.ns.id, path);
        // No mount and no access look the same (403, not 404), so mount names cannot be probed;
        // in another namespace, the same as a missing namespace (issue 18 #12).
        if (!m || !hasAccess(req, m, path.slice(m.path.length))) throw mayLearnNamespace(req) ? preflightDenied(asked) : permissionDenied();
        return { data: { ...mountView(m), path: m.path } };
      },
    },
  }),
];
