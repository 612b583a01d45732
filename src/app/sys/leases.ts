/**
 * sys/leases/* (Vault API: /sys/leases): lookup, LIST lookup (sudo), renew, revoke, revoke-prefix
 * (sudo) and revoke-force (sudo), plus Vault's legacy sys/renew, sys/revoke, sys/revoke-prefix and
 * sys/revoke-force. Lease ids are relative to the request's namespace: a lease of team1 is found
 * only with team1 as the namespace (X-Vault-Namespace, or a team1/ path prefix), never from the
 * root namespace or a sibling.
 */
import { badRequest, notFound, permissionDenied } from "../../core/errors";
import { defineFields } from "../../core/fields";
import { getLease, leasesUnder } from "../../core/lease-store";
import { liveLease, type LeaseRow } from "../../core/leases";
import { route, type Req, type RouteDef } from "../../core/route";
import { revokeLeases } from "../leases";

const LEASE_ID_REQUIRED = "lease_id must be specified";

const lookupFields = defineFields({
  lease_id: { type: "string", description: "The lease to look up.", default: "" },
});

const renewFields = defineFields({
  lease_id: { type: "string", description: "The lease to renew.", default: "" },
  url_lease_id: { type: "string", description: "The lease to renew (in the path)." },
  increment: { type: "duration", description: "Requested extension (leases here are never renewable).", default: 0 },
});

const revokeFields = defineFields({
  lease_id: { type: "string", description: "The lease to revoke.", default: "" },
  url_lease_id: { type: "string", description: "The lease to revoke (in the path)." },
  // Vault's code defaults `sync` to true (its docs say false): 204 after revoking, 202 before.
  sync: { type: "bool", description: "Revoke before answering (204); false answers 202 at once.", default: true },
});

const prefixFields = defineFields({
  prefix: { type: "string", description: "Lease id prefix.", required: true },
  sync: { type: "bool", description: "Revoke before answering (204); false answers 202 at once.", default: true },
});

/** Vault's handleLeaseLookup `data`: RFC 3339 times, ttl in whole seconds. */
function lookupView(lease: LeaseRow, now: number): Record<string, unknown> {
  return {
    id: lease.id,
    issue_time: new Date(lease.issueTime).toISOString(),
    expire_time: new Date(lease.expireTime).toISOString(),
    last_renewal: null,
    renewable: false,
    ttl: Math.max(0, Math.round((lease.expireTime - now) / 1000)),
  };
}

/** LIST sys/leases/lookup/<prefix>: the next segment of every lease id under the prefix, folders with "/". */
async function listUnder(req: Req, rawPrefix: string) {
  const prefix = rawPrefix === "" || rawPrefix.endsWith("/") ? rawPrefix : `${rawPrefix}/`;
  const now = Date.now();
  const keys = new Set<string>();
  for (const lease of await leasesUnder(req.db, req.ns.id, prefix)) {
    if (lease.expireTime <= now) continue;
    const rest = lease.id.slice(prefix.length);
    const slash = rest.indexOf("/");
    keys.add(slash === -1 ? rest : rest.slice(0, slash + 1));
  }
  // An empty list is a 404, as for every LIST (the HTTP layer's answer to no keys).
  if (keys.size === 0) throw notFound();
  return { data: { keys: [...keys].sort() } };
}

/** 204 after revoking (sync), or 202 at once with the revocation continuing in the background. */
async function revokeReply(req: Req, sync: boolean, revoke: () => Promise<void>): Promise<Response | null> {
  if (sync) {
    await revoke();
    return null;
  }
  req.waitUntil(revoke().catch((e: unknown) => console.error("lease revocation failed:", e instanceof Error ? e.message : "unknown error")));
  return new Response(null, { status: 202, headers: { "x-request-id": req.requestId } });
}

/**
 * Leases for revoke-prefix: without a trailing "/", a lease with exactly that id is revoked alone
 * (Vault's revokePrefixCommon); otherwise every lease under `<prefix>/`.
 */
async function leasesForPrefix(req: Req, raw: string): Promise<LeaseRow[]> {
  if (!raw.endsWith("/")) {
    const exact = await liveLease(req.db, req.ns, raw);
    if (exact) return [exact];
  }
  return leasesUnder(req.db, req.ns.id, raw.endsWith("/") ? raw : `${raw}/`);
}

type LeaseIdFields = { lease_id: string; url_lease_id?: string };

/**
 * The lease a renew or revoke acts on, which the caller must have been allowed. Vault's handlers
 * let the body's lease_id win over the path's, so the dispatcher's check of
 * `sys/leases/revoke/<lease in the path>` would say nothing about the lease acted on: a token
 * allowed only `sys/leases/revoke/pki/issue/a/*` could revoke team b's certificate. Here a lease
 * id in the path is the one acted on and a body naming another is a 400; a lease named only in
 * the body (hvac's revoke_lease and renew_lease post to the bare path) is checked as its path
 * form `<aclBase>/<lease_id>` would be, with the same `update` capability (docs/security.md).
 */
function leaseIdOf(req: Req, fields: LeaseIdFields, aclBase: string): string {
  const inPath = req.params.url_lease_id ?? "";
  if (inPath !== "") {
    if (fields.lease_id !== "" && fields.lease_id !== inPath) {
      throw badRequest("lease_id: names another lease than the request path; send the lease in one place only");
    }
    return inPath;
  }
  // A body's url_lease_id is body data too: it is held to the same check.
  const id = fields.lease_id || fields.url_lease_id || "";
  if (id === "") throw badRequest(LEASE_ID_REQUIRED);
  if (!req.capabilities(`${aclBase}/${id}`).has("update")) throw permissionDenied();
  return id;
}

function renewRoute(pattern: string, aclBase: string): RouteDef {
  return route({
    pattern,
    fields: renewFields,
    handlers: {
      async update(req) {
        const id = leaseIdOf(req, req.fields, aclBase);
        // Vault's leaseEntry.renewable(): unknown → not found; past expiry → expired; PKI
        // certificates have no Renew callback → not renewable.
        const lease = await getLease(req.db, req.ns.id, id);
        if (!lease) throw badRequest("lease not found");
        if (lease.expireTime <= Date.now()) throw badRequest("lease expired");
        throw badRequest("lease is not renewable");
      },
    },
  });
}

function revokeRoute(pattern: string, aclBase: string): RouteDef {
  return route({
    pattern,
    fields: revokeFields,
    handlers: {
      async update(req) {
        const id = leaseIdOf(req, req.fields, aclBase);
        // An unknown lease is still a 204 (Revoke of a missing entry is no error).
        const lease = await getLease(req.db, req.ns.id, id);
        return revokeReply(req, req.fields.sync, () => revokeLeases({ env: req.env, db: req.db }, lease ? [lease] : []));
      },
    },
  });
}

function revokePrefixRoute(pattern: string, force: boolean): RouteDef {
  return route({
    pattern,
    fields: prefixFields,
    sudo: ["update"],
    handlers: {
      async update(req) {
        const rows = await leasesForPrefix(req, req.fields.prefix);
        const sync = force || req.fields.sync;
        return revokeReply(req, sync, () => revokeLeases({ env: req.env, db: req.db }, rows, force));
      },
    },
  });
}

export const leaseRoutes: RouteDef[] = [
  route({
    pattern: "leases/lookup",
    fields: lookupFields,
    sudo: ["list"],
    handlers: {
      async update(req) {
        if (req.fields.lease_id === "") throw badRequest(LEASE_ID_REQUIRED);
        const now = Date.now();
        const lease = await liveLease(req.db, req.ns, req.fields.lease_id, now);
        if (!lease) throw badRequest("invalid lease");
        return { data: lookupView(lease, now) };
      },
      list: (req) => listUnder(req, ""),
    },
  }),
  route({
    pattern: "leases/lookup/*prefix",
    sudo: ["list"],
    handlers: { list: (req) => listUnder(req, req.params.prefix ?? "") },
  }),
  ...["leases/", ""].flatMap((base) => [
    renewRoute(`${base}renew`, `sys/${base}renew`),
    renewRoute(`${base}renew/*url_lease_id`, `sys/${base}renew`),
    revokeRoute(`${base}revoke`, `sys/${base}revoke`),
    revokeRoute(`${base}revoke/*url_lease_id`, `sys/${base}revoke`),
    revokePrefixRoute(`${base}revoke-prefix/*prefix`, false),
    revokePrefixRoute(`${base}revoke-force/*prefix`, true),
  ]),
];
