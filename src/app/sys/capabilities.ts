/** sys/capabilities-self and sys/capabilities: what a token may do on given paths. */
import { capabilitiesFor, nsRelativePath } from "../../auth/acl";
import { authenticate } from "../../auth/authenticate";
import { aclFor } from "../../auth/policies";
import { badRequest } from "../../core/errors";
import { defineFields } from "../../core/fields";
import { route, type Req } from "../../core/route";
import { getNamespaceById } from "../../auth/namespace-store";

/**
 * The answer for each path, as Vault shapes it ("deny" when nothing is granted). Paths are
 * relative to the request's namespace, as in Vault; `capsOf` resolves them for the token asked
 * about (never against the root namespace by mistake).
 */
function answer(capsOf: (path: string) => Set<string>, paths: string[]): Record<string, unknown> {
  const data: Record<string, unknown> = {};
  for (const p of paths) {
    const caps = [...capsOf(p.replace(/^\//, ""))].sort();
    data[p] = caps.length ? caps : ["deny"];
  }
  if (paths.length === 1) data.capabilities = data[paths[0] as string];
  return data;
}

function pathsOf(req: Req<typeof selfFields>): string[] {
  const paths = [...(req.fields.paths ?? []), ...(req.fields.path ? [req.fields.path] : [])];
  if (paths.length === 0) throw badRequest("paths: at least one path is required");
  return paths;
}

const selfFields = defineFields({
  paths: { type: "comma-string-slice", description: "Paths to check." },
  path: { type: "string", description: "A single path to check (older form)." },
});

const otherFields = defineFields({
  ...selfFields,
  token: { type: "string", description: "The token to check.", required: true },
});

export const capabilityRoutes = [
  route({
    pattern: "capabilities-self",
    fields: selfFields,
    handlers: {
      async update(req) {
        return { data: answer((p) => req.capabilities(p), pathsOf(req)) };
      },
    },
  }),
  route({
    pattern: "capabilities",
    fields: otherFields,
    handlers: {
      async update(req) {
        const target = await authenticate(req.db, req.env.ROOT_TOKEN ?? "", req.fields.token, Date.now());
        if (!target) throw badRequest("token: invalid token");
        const acl = await aclFor(req.db, target.namespaceId, target.policies);
        const targetNs = target.configuredRoot ? "" : ((await getNamespaceById(req.db, target.namespaceId))?.path ?? null);
        // The target's policies see only its own namespace and those below it.
        const capsOf = (p: string) =>
          targetNs !== null && req.ns.path.startsWith(targetNs) ? capabilitiesFor(acl, nsRelativePath(targetNs, req.ns.path, p)) : new Set<string>();
        return { data: answer(capsOf, pathsOf(req)) };
      },
    },
  }),
];
