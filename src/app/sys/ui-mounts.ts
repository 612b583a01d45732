/**
 * sys/internal/ui/mounts[/:path] (Vault API: /sys/internal/ui/mounts): how `vault kv get/put/…` finds out
 * that a path is under a KV version 2 mount (it reads `data.options.version`, which must be the
 * string "2", and `data.path`, the mount prefix). Unauthenticated in Vault's routing, but the
 * handler looks at the token itself, so the routes are public with `publicSeesToken`.
 *
 * "Access" to a mount is, in Vault, any capability other than deny on the mount path or on any
 * ACL path under it. Handlers here can ask for capabilities on paths only (Req.capabilities), so
 * the check probes the paths such a policy names: the mount itself, the path asked for, and the
 * subtrees its engine declares (`policySubtrees`: KV-v2's `data/` and `metadata/`, which is what
 * `path "secret/data/*"` policies grant).
 */
import { permissionDenied, ApiError } from "../../core/errors";
import { defineFields } from "../../core/fields";
import { listMounts, findMountForPath, type MountRow } from "../../core/mount-store";
import { route, type Req } from "../../core/route";
import { mountView } from "./mounts";
import { authMountView, tokenMountView } from "./auth";
import { AUTH_PREFIX, isAuthMount } from "../../auth/methods/method";
import { mayLearnNamespace } from "./namespace-visibility";
import { MOUNT_ENGINES } from "../engines";

function hasAccess(req: Req, m: MountRow, rest: string): boolean {
  const probes = [m.path, `${m.path}${rest}`];
  const subtrees = isAuthMount(m) ? [] : (MOUNT_ENGINES[m.type]?.engine.mounts?.policySubtrees ?? []);
  for (const sub of subtrees) probes.push(`${m.path}${sub}`, `${m.path}${sub}${rest}`);
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
          for (const m of await listMounts(req.db, req.ns.id)) {
            if (!hasAccess(req, m, "")) continue;
            // Auth mounts ("auth/approle/") are listed under `auth`, keyed without the prefix.
            if (isAuthMount(m)) auth[m.path.slice(AUTH_PREFIX.length)] = authMountView(m);
            else secret[m.path] = mountView(m);
          }
          if (req.capabilities("auth/token/").size > 0 || req.capabilities("auth/token/lookup-self").size > 0) auth["token/"] = await tokenMountView(req.ns.id);
        }
        // An empty answer from another namespace would only tell that it exists.
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
          return { data: { ...(await tokenMountView(req.ns.id)), path: "auth/token/" } };
        }
        const m = await findMountForPath(req.db, req.ns.id, path);
        // No mount and no access look the same (403, not 404), so mount names cannot be probed;
        // in another namespace, the same as a missing namespace.
        if (!m || !hasAccess(req, m, path.slice(m.path.length))) throw mayLearnNamespace(req) ? preflightDenied(asked) : permissionDenied();
        return { data: { ...(isAuthMount(m) ? authMountView(m) : mountView(m)), path: m.path } };
      },
    },
  }),
];
