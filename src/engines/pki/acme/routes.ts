/**
 * The ACME routes of a PKI mount (RFC 8555 §7; docs/pki-acme.md): every resource under each
 * of the four directory prefixes `acme/`, `issuer/:issuer_ref/acme/`, `roles/:role/acme/` and
 * `issuer/:issuer_ref/roles/:role/acme/`, all unauthenticated as Vault's are (route `public`)
 * and guarded by JWS instead (context.ts); `config/acme`; the EAB management routes (eab.ts).
 * ACME bodies are `application/jose+json`, so the POST routes keep the raw body (`rawBody`).
 * The resource URLs a directory advertises are `<config/cluster path>/<prefix>/<resource>`.
 */
import { defineFields } from "../../../core/fields";
import { route, type Req, type RouteDef } from "../../../core/route";
import { mountOf } from "../routes/common";
import { getAcmeConfigValue, putAcmeConfig } from "../storage/acme-store";
import { loadIssuanceState } from "../storage/store";
import { accountUpdate, keyChange, newAccount } from "./accounts";
import { authorization, challenge } from "./authz";
import { acmeConfigFields, decodeAcmeConfig, mergeAcmeConfig, type AcmeConfig } from "./config";
import { acmeGet, acmePost, type AcmeReply, type AcmeRequest } from "./context";
import { eabRoutes } from "./eab";
import { finalize, getOrder, listOrders, newOrder, orderCert } from "./orders";
import { AcmeError, problemResponse, toAcmeError } from "./problem";
import type { ApiError } from "../../../core/errors";
import { revokeCert } from "./revoke";
import { renewalInfo, renewalMarkRoutes } from "./ari";
import { profilesMeta } from "./profiles";

const PREFIXES = ["acme", "issuer/:issuer_ref/acme", "roles/:role/acme", "issuer/:issuer_ref/roles/:role/acme"];

async function directory(a: AcmeRequest): Promise<AcmeReply> {
  return {
    json: {
      newNonce: a.url("new-nonce"),
      newAccount: a.url("new-account"),
      newOrder: a.url("new-order"),
      revokeCert: a.url("revoke-cert"),
      keyChange: a.url("key-change"),
      // RFC 9773 §3: renewal information, unauthenticated GETs under this URL.
      renewalInfo: a.url("renewal-info"),
      meta: { externalAccountRequired: a.cfg.eab_policy !== "not-required", ...profilesEntry(a) },
    },
  };
}

/** draft-aaron-acme-profiles §3: meta.profiles, when the directory offers any. */
function profilesEntry(a: AcmeRequest): { profiles?: Record<string, string> } {
  const meta = profilesMeta(a);
  return meta ? { profiles: meta } : {};
}

/** RFC 8555 §7.2: GET new-nonce is 204, HEAD 200; the nonce in Replay-Nonce, never cached. */
async function nonce(a: AcmeRequest): Promise<AcmeReply> {
  return { status: a.req.method === "HEAD" ? 200 : 204 };
}

type Handler = (req: Req) => Promise<Response>;

/** The other method of a resource: a problem document too (405), not a Vault error body. */
const wrongMethod =
  (allowed: string): Handler =>
  async () =>
    problemResponse(new AcmeError("malformed", `this ACME resource answers ${allowed} only`, 405), { allow: allowed });

/** The dispatcher's refusals (a body over the limit, DELETE or PATCH…) as problem documents too. */
const refusal = (err: ApiError, requestId: string): Response =>
  problemResponse(toAcmeError(err, err.status === 403 ? "unauthorized" : "malformed", requestId), {});

/** One ACME resource under every directory prefix: `read` (GET) or `update` (POST). */
function resource(suffix: string, h: { read: Handler } | { update: Handler }): RouteDef[] {
  const handlers = "read" in h ? { read: h.read, update: wrongMethod("GET, HEAD") } : { read: wrongMethod("POST"), update: h.update };
  return PREFIXES.map((p) =>
    route({ pattern: `${p}/${suffix}`, handlers, public: ["read", "update"], rawBody: true, head: "read" in h, renderError: refusal }),
  );
}

function configReply(cfg: AcmeConfig): { data: Record<string, unknown> } {
  return { data: { ...cfg } };
}

const acmeConfigRoute = route({
  pattern: "config/acme",
  fields: defineFields({ ...acmeConfigFields }),
  handlers: {
    async read(req) {
      return configReply(decodeAcmeConfig(await getAcmeConfigValue(req.db, mountOf(req).id)));
    },
    async update(req) {
      const mount = mountOf(req);
      const [current, state] = await Promise.all([getAcmeConfigValue(req.db, mount.id).then(decodeAcmeConfig), loadIssuanceState(req.db, mount.id, null)]);
      const next = await mergeAcmeConfig(req as Req, mount.id, current, state, req.fields);
      await putAcmeConfig(req.db, mount.id, { ...next });
      return configReply(next);
    },
  },
});

export const acmeRoutes: RouteDef[] = [
  acmeConfigRoute,
  ...eabRoutes,
  ...renewalMarkRoutes,
  ...resource("directory", { read: acmeGet(directory, { nonce: false }) }),
  ...resource("new-nonce", { read: acmeGet(nonce, { nonce: true }) }),
  // `*certid`, not `:certid`: a route parameter must start and end with a word character (Vault's
  // GenericNameRegex), and a base64url certID may start or end with "-" (RFC 9773 §4.1; about
  // one certificate in fifty). parseCertId refuses anything that is not base64url "." base64url.
  ...resource("renewal-info/*certid", { read: renewalInfo }),
  ...resource("new-account", { update: acmePost(newAccount, "jwk") }),
  ...resource("account/:kid/orders", { update: acmePost(listOrders, "kid") }),
  ...resource("account/:kid", { update: acmePost(accountUpdate, "kid") }),
  ...resource("key-change", { update: acmePost(keyChange, "kid") }),
  ...resource("new-order", { update: acmePost(newOrder, "kid") }),
  ...resource("orders", { update: acmePost(listOrders, "kid") }),
  ...resource("order/:id/finalize", { update: acmePost(finalize, "kid", "badCSR") }),
  ...resource("order/:id/cert", { update: acmePost(orderCert, "kid") }),
  ...resource("order/:id", { update: acmePost(getOrder, "kid") }),
  ...resource("authorization/:id", { update: acmePost(authorization, "kid") }),
  ...resource("challenge/:authz/:type", { update: acmePost(challenge, "kid") }),
  ...resource("revoke-cert", { update: acmePost(revokeCert, "either") }),
];
