/**
 * Auth-method configuration that anonymous logins replay (docs/security.md "Machine logins"):
 * forged JWTs cannot turn into fetches of the issuer's key set (at most one refetch a minute per
 * key-set URL, whatever the `kid`), and a configuration value that happens to look like a sealed
 * one (`bound_issuer: "sealed:…"`) is plain text: sealed values are told apart by the stored
 * document's structure, and documents written in the older format still open.
 */
import { env } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/core/config";
import { seal } from "../../src/core/db/seal";
import { api, read, write } from "../helpers/api";
import { FakeJwks } from "../helpers/fake-jwks";
import { installFakes } from "../helpers/fake-router";
import { FakeTokenReview, projectedJwt } from "../helpers/fake-tokenreview";
import { freshClaims, generateKey, signJwt, type TestKey } from "../helpers/jwt-issuer";

const ISSUER = "https://issuer.example";
const forgedIdp = new FakeJwks();
const idp = new FakeJwks();
const k8s = new FakeTokenReview();
const REVIEWER = k8s.addToken(projectedJwt({ namespace: "vault", name: "vault-auth", uid: "uid-reviewer" }), { namespace: "vault", name: "vault-auth", uid: "uid-reviewer" });
k8s.opts.reviewers = [REVIEWER];
const SA = { namespace: "apps", name: "web", uid: "uid-web" };
const SA_JWT = k8s.addToken(projectedJwt(SA), SA);
let key: TestKey;
let uninstall: () => void = () => {};

const login = (mount: string, body: Record<string, unknown>) => api("POST", `auth/${mount}/login`, { token: null, body });

async function mountId(path: string): Promise<string> {
  const row = await env.DB.prepare("SELECT id FROM mounts WHERE path = ?").bind(`${path}/`).first<{ id: string }>();
  if (!row) throw new Error(`no mount ${path}`);
  return row.id;
}

beforeAll(async () => {
  key = await generateKey("ES256");
  forgedIdp.keys = [key];
  idp.keys = [key];
  uninstall = installFakes([
    { hosts: ["forged.jwks.test"], fake: forgedIdp },
    { hosts: ["idp.jwks.test"], fake: idp },
    { hosts: ["api.k8s.test"], fake: k8s },
  ]);
});
afterAll(() => uninstall());

describe("JWKS refetches are limited per key-set URL, not per kid", () => {
  it("twenty forged logins with random kids cause at most one refetch; the real key keeps working", async () => {
    await write("sys/auth/jwt-forged", { type: "jwt" }, {}, 204);
    await write("auth/jwt-forged/config", { jwks_url: "https://forged.jwks.test/keys", bound_issuer: ISSUER }, {}, 204);
    await write("auth/jwt-forged/role/r", { role_type: "jwt", user_claim: "sub", bound_audiences: "lanyard" }, {}, 204);
    const claims = () => freshClaims({ iss: ISSUER, aud: "lanyard", sub: "svc" });
    expect((await login("jwt-forged", { role: "r", jwt: await signJwt(key, claims()) })).status).toBe(200);
    const before = forgedIdp.jwksFetches;
    const forgers = await Promise.all(Array.from({ length: 20 }, () => generateKey("ES256", crypto.randomUUID())));
    for (const forger of forgers) {
      const r = await login("jwt-forged", { role: "r", jwt: await signJwt(forger, claims()) });
      expect(r.status, r.text).toBe(400);
    }
    // And twenty more at once.
    const burst = await Promise.all(forgers.map(async (f) => login("jwt-forged", { role: "r", jwt: await signJwt(f, claims(), { header: { kid: crypto.randomUUID() } }) })));
    for (const r of burst) expect(r.status).toBe(400);
    expect(forgedIdp.jwksFetches - before).toBeLessThanOrEqual(1);
    expect((await login("jwt-forged", { role: "r", jwt: await signJwt(key, claims()) })).status).toBe(200);
  });
});

describe("a value that looks sealed is plain text", () => {
  it("JWT: bound_issuer \"sealed:…\" is stored, read back, and logins still work", async () => {
    const issuer = "sealed:v1:00000000:AAAA";
    await write("sys/auth/jwt-sealed", { type: "jwt" }, {}, 204);
    await write("auth/jwt-sealed/config", { jwks_url: "https://idp.jwks.test/keys", bound_issuer: issuer, default_role: "sealed:r" }, {}, 204);
    const cfg = await read("auth/jwt-sealed/config");
    expect(cfg.body.data).toMatchObject({ bound_issuer: issuer, default_role: "sealed:r" });
    await write("auth/jwt-sealed/role/r", { role_type: "jwt", user_claim: "sub", bound_audiences: "lanyard" }, {}, 204);
    const ok = await login("jwt-sealed", { role: "r", jwt: await signJwt(key, freshClaims({ iss: issuer, aud: "lanyard", sub: "svc" })) });
    expect(ok.status, ok.text).toBe(200);
    const wrong = await login("jwt-sealed", { role: "r", jwt: await signJwt(key, freshClaims({ iss: ISSUER, aud: "lanyard", sub: "svc" })) });
    expect(wrong.status).toBe(400);
  });

  it("Kubernetes: issuer \"sealed:…\" next to a sealed reviewer JWT", async () => {
    await write("sys/auth/k8s-sealed", { type: "kubernetes" }, {}, 204);
    const issuer = "sealed:https://kubernetes.default.svc.cluster.local";
    await write("auth/k8s-sealed/config", { kubernetes_host: "https://api.k8s.test", token_reviewer_jwt: REVIEWER, issuer }, {}, 204);
    const cfg = await read("auth/k8s-sealed/config");
    expect(cfg.body.data).toMatchObject({ issuer, token_reviewer_jwt_set: true });
    expect(cfg.text).not.toContain(REVIEWER);
    expect((await api("POST", "auth/k8s-sealed/role/web", { body: { bound_service_account_names: "web", bound_service_account_namespaces: "apps", audience: "https://kubernetes.default.svc.cluster.local" } })).status).toBeLessThan(300);
    const ok = await login("k8s-sealed", { role: "web", jwt: SA_JWT });
    expect(ok.status, ok.text).toBe(200);
    // The reviewer JWT is not in the stored document in the clear.
    const row = await env.DB.prepare("SELECT config FROM auth_configs WHERE mount_id = ?").bind(await mountId("auth/k8s-sealed")).first<{ config: string }>();
    expect(row?.config).not.toContain(REVIEWER);
    expect(row?.config).toContain(issuer);
  });

  it("a configuration stored in the older format (a \"sealed:\" prefix on the secret key) still opens", async () => {
    await write("sys/auth/k8s-old", { type: "kubernetes" }, {}, 204);
    expect((await api("POST", "auth/k8s-old/role/web", { body: { bound_service_account_names: "web", bound_service_account_namespaces: "apps", audience: "https://kubernetes.default.svc.cluster.local" } })).status).toBeLessThan(300);
    const id = await mountId("auth/k8s-old");
    const sealedReviewer = `sealed:${await seal(loadConfig(env).seal, REVIEWER, `auth-config:${id}:token_reviewer_jwt`)}`;
    const old = { kubernetes_host: "https://api.k8s.test", kubernetes_ca_cert: "", token_reviewer_jwt: sealedReviewer, pem_keys: [], issuer: "", disable_iss_validation: true, disable_local_ca_jwt: false, use_annotations_as_alias_metadata: false };
    await env.DB.prepare("INSERT INTO auth_configs (mount_id, config, updated_at) VALUES (?, ?, ?)").bind(id, JSON.stringify(old), Date.now()).run();
    const cfg = await read("auth/k8s-old/config");
    expect(cfg.body.data).toMatchObject({ kubernetes_host: "https://api.k8s.test", token_reviewer_jwt_set: true });
    const before = k8s.received.length;
    const ok = await login("k8s-old", { role: "web", jwt: SA_JWT });
    expect(ok.status, ok.text).toBe(200);
    // The review was made with the opened reviewer JWT.
    expect(k8s.received.slice(before).map((r) => r.authorization)).toEqual([`Bearer ${REVIEWER}`]);
  });
});
