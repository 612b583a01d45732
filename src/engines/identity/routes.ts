/**
 * The identity backend's routes (relative to "identity/"): the plugin-identity issuer's discovery
 * document and key set, public (Vault API: GET /identity/oidc/plugins/.well-known/openid-configuration
 * and /identity/oidc/plugins/.well-known/keys, unauthenticated), and identity/oidc/config with its
 * `issuer` (Vault API: /identity/oidc/config), per namespace through the namespace prefix or header.
 *
 * The two public GETs are served like the PKI's public reads (docs/architecture.md "Every
 * cache"): rendered once per CACHE_TTL_MS per isolate (`identity.answers`, area "identity", which
 * every write of ./store.ts invalidates) and handed to layer 0 (src/core/public-answers.ts), with
 * ETag, Last-Modified and 304s. A discovery document made without an `issuer` setting names the
 * request's own host over https (as Vault falls back to its api_addr) and is not cached.
 */
import { bytesToHex, sha256 } from "../../core/encoding";
import { badRequest } from "../../core/errors";
import { defineFields } from "../../core/fields";
import { rememberAnswer, renderAnswer, type PublicAnswer } from "../../core/public-answers";
import { generationOf, ReadCache } from "../../core/read-cache";
import { route, type Req } from "../../core/route";
import { issuerBase, issuerPath } from "./issuer";
import { ALGORITHM } from "./keys";
import { getIssuerSetting, publishedKeys, putIssuerSetting } from "./store";

interface Entry {
  answer: PublicAnswer;
  readAt: number;
}

const answers = new ReadCache<Entry>("identity.answers", "identity", 256);

async function jsonAnswer(body: unknown, lastModified: number): Promise<PublicAnswer> {
  const bytes = new Uint8Array(new TextEncoder().encode(JSON.stringify(body)));
  return { body: bytes, contentType: "application/json", lastModified, etag: `"${bytesToHex(await sha256(bytes))}"` };
}

/** One public read through the isolate's cache and layer 0; `load` returns null for "do not cache". */
async function serve(req: Req, key: string, load: () => Promise<{ answer: PublicAnswer; cache: boolean }>): Promise<Response> {
  const now = Date.now();
  let entry = answers.get(key, now);
  if (!entry) {
    const generation = generationOf("identity");
    const readAt = Date.now();
    const loaded = await load();
    entry = { answer: loaded.answer, readAt };
    if (loaded.cache) {
      answers.set(key, entry, readAt, generation);
      if (req.answerSlot) rememberAnswer(req.answerSlot, entry.answer, readAt);
    }
  } else if (req.answerSlot) {
    rememberAnswer(req.answerSlot, entry.answer, entry.readAt);
  }
  return renderAnswer(entry.answer, entry.readAt, req.headers, Date.now());
}

async function discovery(req: Req): Promise<Response> {
  return serve(req, `discovery:${req.ns.id}`, async () => {
    const base = await issuerBase(req.db, req.ns);
    const issuer = `${(base ?? `https://${req.headers.get("host") ?? "lanyard.invalid"}`).replace(/\/+$/, "")}${issuerPath(req.ns)}`;
    const doc = {
      issuer,
      jwks_uri: `${issuer}/.well-known/keys`,
      response_types_supported: ["id_token"],
      subject_types_supported: ["public"],
      id_token_signing_alg_values_supported: [ALGORITHM],
    };
    return { answer: await jsonAnswer(doc, 0), cache: base !== null };
  });
}

async function keySet(req: Req): Promise<Response> {
  return serve(req, "keys", async () => {
    const keys = await publishedKeys(req.db, Date.now());
    const body = { keys: keys.map((k) => JSON.parse(k.publicJwk) as unknown) };
    return { answer: await jsonAnswer(body, Math.max(0, ...keys.map((k) => k.rotatedAt ?? k.createdAt))), cache: true };
  });
}

/**
 * An issuer URL as Vault takes it: scheme, host, optional port and path; no query, fragment or
 * credentials. https only, as the clouds require; http only in development (tests, the fakes).
 */
function checkIssuer(raw: string, env: Env): string {
  if (raw === "") return "";
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw badRequest("issuer: must be an absolute URL such as https://lanyard.example.com");
  }
  const development = env.ENVIRONMENT === "development";
  if (u.protocol !== "https:" && !(development && u.protocol === "http:")) throw badRequest(`issuer: the scheme must be https${development ? " (or http in development)" : ""}`);
  if (u.search !== "" || u.hash !== "" || u.username !== "" || u.password !== "") throw badRequest("issuer: must not have a query, fragment or credentials");
  if (raw.length > 1024) throw badRequest("issuer: must be at most 1024 characters");
  return raw.replace(/\/+$/, "");
}

const configFields = defineFields({
  issuer: { type: "string", description: "Public URL of this service, used in the iss claim of identity tokens (a deployment's custom domain)." },
});

export const identityRoutes = [
  route({ pattern: "oidc/plugins/.well-known/openid-configuration", public: ["read"], handlers: { read: discovery } }),
  route({ pattern: "oidc/plugins/.well-known/keys", public: ["read"], handlers: { read: keySet } }),
  route({
    pattern: "oidc/config",
    fields: configFields,
    handlers: {
      async read(req) {
        return { data: { issuer: (await getIssuerSetting(req.db, req.ns.id)) ?? "" } };
      },
      async update(req) {
        const issuer = checkIssuer((req.fields.issuer ?? "").trim(), req.env);
        await putIssuerSetting(req.db, req.ns.id, issuer, Date.now());
        return { data: { issuer } };
      },
    },
  }),
];
