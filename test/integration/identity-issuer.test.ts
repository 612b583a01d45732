/**
 * Lanyard as an OIDC issuer of its own identity tokens (docs/secrets-sync.md "Keyless
 * destinations", docs/security.md "The identity issuer's keys"): the discovery document and key
 * set at Vault's plugin-identity paths, public, per namespace through the path prefix or the
 * header; identity/oidc/config `issuer` (ACL-checked, URL validated); answers cached with ETags;
 * tokens checked by an independent verifier (test/helpers/fake-oidc-trust.ts: discovery and keys
 * fetched over HTTP, ES256 verified with WebCrypto); keys sealed in D1; rotation keeps the
 * previous key published until every token it signed has expired, then withdraws it.
 */
import { env, SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, read, tokenWithPolicy, write } from "../helpers/api";
import { isRefusal, OidcTrust } from "../helpers/fake-oidc-trust";
import { loadConfig } from "../../src/core/config";
import { openDb } from "../../src/core/db/client";
import { MAX_TOKEN_TTL_S, rotateIssuerKeys, signIdentityToken } from "../../src/engines/identity";

const BASE = "http://lanyard.test";
const ISSUER = `${BASE}/v1/identity/oidc/plugins`;
const trust = new OidcTrust((u) => SELF.fetch(u));
const db = () => openDb(env.DB);
const seal = () => loadConfig(env).seal;
const claimsOf = (jwt: string) => JSON.parse(atob((jwt.split(".")[1] ?? "").replace(/-/g, "+").replace(/_/g, "/"))) as Record<string, unknown>;
const headerOf = (jwt: string) => JSON.parse(atob((jwt.split(".")[0] ?? "").replace(/-/g, "+").replace(/_/g, "/"))) as Record<string, unknown>;

async function mint(audience = "sts.amazonaws.com", ttlSeconds = 300): Promise<string> {
  return signIdentityToken(db(), seal(), { issuer: ISSUER, subject: "plugin-identity:root:sync:cloudone-sm:test", audience, ttlSeconds, lanyard: {} });
}

async function publishedKids(): Promise<string[]> {
  const r = await api("GET", "identity/oidc/plugins/.well-known/keys", { token: null });
  return (r.body.keys as { kid: string }[]).map((k) => k.kid);
}

describe("identity/oidc/config", () => {
  it("issuer: set, read back, cleared; a bad URL is a 400 naming the field; the ACL applies", async () => {
    expect((await write("identity/oidc/config", { issuer: `${BASE}/` })).body.data.issuer).toBe(BASE);
    expect((await read("identity/oidc/config")).body.data.issuer).toBe(BASE);
    await write("identity/oidc/config", { issuer: "" });
    expect((await read("identity/oidc/config")).body.data.issuer).toBe("");
    for (const bad of ["not a url", "ftp://x.example", "https://x.example/?q=1", "https://u:p@x.example"]) {
      const r = await api("POST", "identity/oidc/config", { body: { issuer: bad } });
      expect(r.status, bad).toBe(400);
      expect(r.body.errors[0]).toMatch(/^issuer: /);
    }
    const reader = await tokenWithPolicy('path "identity/oidc/config" { capabilities = ["read"] }');
    expect((await api("GET", "identity/oidc/config", { token: reader })).status).toBe(200);
    expect((await api("POST", "identity/oidc/config", { token: reader, body: { issuer: "https://evil.example" } })).status).toBe(403);
    expect((await api("GET", "identity/oidc/config", { token: null })).status).toBe(403);
  });
});

describe("discovery and key set", () => {
  it("are public, name the namespace's issuer (prefix or header), and answer 304 to a current ETag", async () => {
    await write("identity/oidc/config", { issuer: BASE });
    const d = await api("GET", "identity/oidc/plugins/.well-known/openid-configuration", { token: null });
    expect(d.status).toBe(200);
    expect(d.body).toEqual({
      issuer: ISSUER,
      jwks_uri: `${ISSUER}/.well-known/keys`,
      response_types_supported: ["id_token"],
      subject_types_supported: ["public"],
      id_token_signing_alg_values_supported: ["ES256"],
    });
    const again = await api("GET", "identity/oidc/plugins/.well-known/openid-configuration", { token: null, headers: { "if-none-match": d.headers.get("etag") ?? "" } });
    expect(again.status).toBe(304);

    const ns = `idns${crypto.randomUUID().slice(0, 6)}`;
    await write(`sys/namespaces/${ns}`, {});
    const byPrefix = await api("GET", `${ns}/identity/oidc/plugins/.well-known/openid-configuration`, { token: null });
    expect(byPrefix.body.issuer).toBe(`${BASE}/v1/${ns}/identity/oidc/plugins`);
    const byHeader = await api("GET", "identity/oidc/plugins/.well-known/openid-configuration", { token: null, namespace: ns });
    expect(byHeader.body.issuer).toBe(`${BASE}/v1/${ns}/identity/oidc/plugins`);
    // The namespace's own setting wins over the root namespace's.
    await write("identity/oidc/config", { issuer: "https://team.example" }, { namespace: ns });
    const own = await api("GET", `${ns}/identity/oidc/plugins/.well-known/openid-configuration`, { token: null });
    expect(own.body.jwks_uri).toBe(`https://team.example/v1/${ns}/identity/oidc/plugins/.well-known/keys`);

    await mint();
    const keys = await api("GET", "identity/oidc/plugins/.well-known/keys", { token: null });
    expect(keys.status).toBe(200);
    for (const k of keys.body.keys as Record<string, unknown>[]) {
      expect(Object.keys(k).sort()).toEqual(["alg", "crv", "kid", "kty", "use", "x", "y"]);
      expect([k.kty, k.crv, k.alg, k.use]).toEqual(["EC", "P-256", "ES256", "sig"]);
    }
  });
});

describe("identity tokens", () => {
  it("carry iss, sub, aud, iat, exp (minutes) and jti, verify independently, and the private key is sealed in D1", async () => {
    await write("identity/oidc/config", { issuer: BASE });
    const t = await mint("api://AzureADTokenExchange", 300);
    const c = claimsOf(t);
    expect(headerOf(t)).toMatchObject({ alg: "ES256", typ: "JWT" });
    expect(c).toMatchObject({ iss: ISSUER, sub: "plugin-identity:root:sync:cloudone-sm:test", aud: "api://AzureADTokenExchange" });
    expect(Number(c.exp) - Number(c.iat)).toBe(300);
    expect(c.jti).toMatch(/^[0-9a-f-]{36}$/);
    expect(claimsOf(await mint()).jti).not.toBe(c.jti);
    const v = await trust.verify(t, ISSUER, ["api://AzureADTokenExchange"]);
    expect(isRefusal(v) ? v.message : v.sub).toBe("plugin-identity:root:sync:cloudone-sm:test");
    expect(isRefusal(await trust.verify(t, ISSUER, ["sts.amazonaws.com"]))).toBe(true);
    // A TTL above the maximum is capped.
    const long = claimsOf(await mint("x", 10 * 3600));
    expect(Number(long.exp) - Number(long.iat)).toBe(MAX_TOKEN_TTL_S);

    const rows = (await env.DB.prepare("SELECT sealed_private_key, public_jwk FROM identity_keys").all<{ sealed_private_key: string; public_jwk: string }>()).results;
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) {
      expect(r.sealed_private_key).toMatch(/^v1:[^:]+:[A-Za-z0-9+/=]+$/);
      expect(Object.keys(JSON.parse(r.public_jwk) as object)).not.toContain("d");
    }
  });

  it("rotation: the previous key verifies until withdrawn; nothing signed by a withdrawn key verifies", async () => {
    await write("identity/oidc/config", { issuer: BASE });
    const before = await mint();
    const oldKid = String(headerOf(before).kid);
    expect(await publishedKids()).toContain(oldKid);
    // Not due yet: nothing changes.
    expect((await rotateIssuerKeys(db(), seal(), Date.now())).rotated).toBe(false);

    const rotatedAt = Date.now() + 24 * 3600_000 + 1000;
    expect((await rotateIssuerKeys(db(), seal(), rotatedAt)).rotated).toBe(true);
    const after = await mint();
    const newKid = String(headerOf(after).kid);
    expect(newKid).not.toBe(oldKid);
    expect(await publishedKids()).toEqual(expect.arrayContaining([oldKid, newKid]));
    expect(isRefusal(await trust.verify(before, ISSUER, ["sts.amazonaws.com"]))).toBe(false);
    expect(isRefusal(await trust.verify(after, ISSUER, ["sts.amazonaws.com"]))).toBe(false);

    // Still published just before the longest token it signed (plus skew) has expired …
    await rotateIssuerKeys(db(), seal(), rotatedAt + MAX_TOKEN_TTL_S * 1000);
    expect(await publishedKids()).toContain(oldKid);
    // … withdrawn after: gone from the key set and from D1; its tokens no longer verify.
    const r = await rotateIssuerKeys(db(), seal(), rotatedAt + MAX_TOKEN_TTL_S * 1000 + 6 * 60_000);
    expect(r.deleted).toBeGreaterThanOrEqual(1);
    expect(await publishedKids()).not.toContain(oldKid);
    const refused = await trust.verify(before, ISSUER, ["sts.amazonaws.com"]);
    expect(isRefusal(refused) && refused.kind).toBe("unknown-key");
    expect(isRefusal(await trust.verify(after, ISSUER, ["sts.amazonaws.com"]))).toBe(false);
    expect((await env.DB.prepare("SELECT count(*) AS n FROM identity_keys WHERE kid = ?").bind(oldKid).first<{ n: number }>())?.n).toBe(0);
  });
});
