/**
 * The Kubernetes auth method through the Worker (Vault API: /auth/kubernetes) against a fake
 * TokenReview API (test/helpers/fake-tokenreview.ts): config (the reviewer JWT is never read
 * back), roles and their binding rules, and logins: a good one gives a working token whose
 * lookup shows path auth/kubernetes/login and the service-account metadata; wrong name or
 * namespace, a token the cluster refuses, an audience mismatch → 403; a TokenReview API that is
 * down → 502; bad input → 400 naming the field. No JWT ever appears in an answer.
 */
import * as x509 from "@peculiar/x509";
import { exportSPKI, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, del, list, read, write, type ApiResult } from "../helpers/api";
import { installFakes } from "../helpers/fake-router";
import { DEFAULT_API_AUDIENCES, FakeTokenReview, legacyJwt, projectedJwt } from "../helpers/fake-tokenreview";

x509.cryptoProvider.set(crypto);

const fake = new FakeTokenReview();
const selfFake = new FakeTokenReview({ selfReview: true });
const REVIEWER = fake.addToken(projectedJwt({ namespace: "vault", name: "vault-auth", uid: "uid-reviewer" }), { namespace: "vault", name: "vault-auth", uid: "uid-reviewer" });
fake.opts.reviewers = [REVIEWER];

const CM = { namespace: "cert-manager", name: "cert-manager", uid: "0f6b5f1e-cm" };
const CM_JWT = fake.addToken(projectedJwt(CM), CM);
const OTHER_NS = { namespace: "default", name: "cert-manager", uid: "uid-other-ns" };
const OTHER_NS_JWT = fake.addToken(projectedJwt(OTHER_NS), OTHER_NS);
const OTHER_NAME = { namespace: "cert-manager", name: "webhook", uid: "uid-webhook" };
const OTHER_NAME_JWT = fake.addToken(projectedJwt(OTHER_NAME), OTHER_NAME);
const LEGACY = { namespace: "cert-manager", name: "cert-manager", uid: "0f6b5f1e-cm" };
const LEGACY_JWT = fake.addToken(legacyJwt({ ...LEGACY, secretName: "cert-manager-token-x7k2p" }), LEGACY);
const REVOKED = { namespace: "cert-manager", name: "cert-manager", uid: "0f6b5f1e-cm", authenticated: false };
const REVOKED_JWT = fake.addToken(projectedJwt(REVOKED), REVOKED);
const UNKNOWN_JWT = projectedJwt(CM);
const VAULT_AUD = { ...CM, audiences: ["vault"] };
const VAULT_AUD_JWT = fake.addToken(projectedJwt(VAULT_AUD), VAULT_AUD);
const EXPIRED_JWT = fake.addToken(projectedJwt({ ...CM, exp: Math.floor(Date.now() / 1000) - 3600, iat: Math.floor(Date.now() / 1000) - 7200 }), CM);
// The cluster knows the token under another uid than its claims say (a recreated service account).
const STALE_JWT = fake.addToken(projectedJwt(CM), { ...CM, uid: "uid-recreated" });

const ALL_JWTS = [REVIEWER, CM_JWT, OTHER_NS_JWT, OTHER_NAME_JWT, LEGACY_JWT, REVOKED_JWT, UNKNOWN_JWT, VAULT_AUD_JWT, EXPIRED_JWT, STALE_JWT];

let caPem = "";
let uninstall: () => void = () => {};

function expectNoJwt(r: ApiResult): void {
  for (const jwt of ALL_JWTS) expect(r.text).not.toContain(jwt);
  for (const jwt of ALL_JWTS) expect(r.text).not.toContain(jwt.split(".")[1]);
}

const login = (role: unknown, jwt: unknown, mount = "kubernetes", headers: Record<string, string> = {}) =>
  api("POST", `auth/${mount}/login`, { token: null, body: { role, jwt }, headers });

function expectError(r: ApiResult, status: number, message: string): void {
  expect(r.status, r.text).toBe(status);
  expect(r.body.errors).toEqual([message]);
  expectNoJwt(r);
}

beforeAll(async () => {
  uninstall = installFakes([
    { hosts: ["k8s.test"], fake },
    { hosts: ["k8s-self.test"], fake: selfFake },
  ]);
  const keys = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])) as CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: "01",
    name: "CN=kubernetes",
    notBefore: new Date("2024-01-01T00:00:00Z"),
    notAfter: new Date("2034-01-01T00:00:00Z"),
    keys,
    signingAlgorithm: { name: "ECDSA", hash: "SHA-256" },
  });
  caPem = cert.toString("pem");
  await write("sys/auth/kubernetes", { type: "kubernetes" }, {}, 204);
  // 200: the write warns that kubernetes_ca_cert is stored, not used (the platform trust store is).
  await write("auth/kubernetes/config", { kubernetes_host: "https://k8s.test/", kubernetes_ca_cert: caPem, token_reviewer_jwt: REVIEWER }, {}, 200);
  await write("auth/kubernetes/role/cert-manager", { bound_service_account_names: "cert-manager", bound_service_account_namespaces: "cert-manager", token_policies: "pki-issuer", token_ttl: "20m" });
});
afterAll(() => uninstall());

describe("config", () => {
  it("reads back every field but the reviewer JWT, which shows only as token_reviewer_jwt_set", async () => {
    const r = await read("auth/kubernetes/config");
    expect(r.body.data).toEqual({
      kubernetes_host: "https://k8s.test/",
      kubernetes_ca_cert: caPem.trim(),
      pem_keys: [],
      issuer: "",
      disable_iss_validation: true,
      disable_local_ca_jwt: false,
      token_reviewer_jwt_set: true,
      use_annotations_as_alias_metadata: false,
    });
    expectNoJwt(r);
  });

  it("a write replaces the whole config; disable_local_ca_jwt is stored", async () => {
    await write("sys/auth/k8s-replace", { type: "kubernetes" }, {}, 204);
    await write("auth/k8s-replace/config", { kubernetes_host: "https://k8s.test", kubernetes_ca_cert: caPem, token_reviewer_jwt: REVIEWER, issuer: "x" }, {}, 200);
    await write("auth/k8s-replace/config", { kubernetes_host: "https://k8s.test", disable_local_ca_jwt: true }, {}, 204);
    const r = await read("auth/k8s-replace/config");
    expect(r.body.data).toMatchObject({ kubernetes_ca_cert: "", issuer: "", token_reviewer_jwt_set: false, disable_local_ca_jwt: true });
  });

  it("refuses bad input with 400 naming the field, never echoing a JWT", async () => {
    await write("sys/auth/k8s-bad", { type: "kubernetes" }, {}, 204);
    const cfg = (body: Record<string, unknown>) => api("POST", "auth/k8s-bad/config", { body });
    expectError(await cfg({}), 400, "no host provided");
    expectError(await cfg({ kubernetes_host: "https://k8s.test", kubernetes_ca_cert: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----" }), 400, "The provided CA PEM data contains no valid certificates");
    expectError(await cfg({ kubernetes_host: "https://k8s.test", kubernetes_ca_cert: "garbage" }), 400, "The provided CA PEM data contains no valid certificates");
    const plain = await cfg({ kubernetes_host: "http://k8s.test" });
    expect(plain.status).toBe(400);
    expect(plain.body.errors[0]).toMatch(/^kubernetes_host: must be an https:\/\/ URL/);
    const badJwt = await cfg({ kubernetes_host: "https://k8s.test", token_reviewer_jwt: "not-a-jwt-secret-value" });
    expect(badJwt.status).toBe(400);
    expect(badJwt.body.errors[0]).toMatch(/^token_reviewer_jwt: /);
    expect(badJwt.text).not.toContain("not-a-jwt-secret-value");
    expectError(await cfg({ kubernetes_host: "https://k8s.test", pem_keys: "nope" }), 400, "data does not contain any valid RSA or ECDSA public keys");
    await read("auth/k8s-bad/config", {}, 404);
  });
});

describe("roles", () => {
  it("refuses bad roles with Vault's messages", async () => {
    const w = (body: Record<string, unknown>) => api("POST", "auth/kubernetes/role/bad", { body });
    expectError(await w({ bound_service_account_namespaces: "a" }), 400, '"bound_service_account_names" can not be empty');
    expectError(await w({ bound_service_account_names: "*,x", bound_service_account_namespaces: "a" }), 400, 'can not mix "*" with values');
    expectError(await w({ bound_service_account_names: "x" }), 400, '"bound_service_account_namespaces" can not be empty if "bound_service_account_namespace_selector" is not set');
    expectError(await w({ bound_service_account_names: "x", bound_service_account_namespaces: "*,a" }), 400, 'can not mix "*" with values');
    expectError(await w({ bound_service_account_names: "x", bound_service_account_namespaces: "a", alias_name_source: "pod" }), 400, 'invalid alias_name_source "pod", must be one of: serviceaccount_uid, serviceaccount_name');
    expectError(await w({ bound_service_account_names: "x", bound_service_account_namespaces: "a", token_ttl: "2h", token_max_ttl: "1h" }), 400, "'token_ttl' cannot be greater than 'token_max_ttl'");
    const sel = await w({ bound_service_account_names: "x", bound_service_account_namespace_selector: '{"matchLabels":{"a":"b"}}' });
    expect(sel.status).toBe(400);
    expect(sel.body.errors[0]).toMatch(/^bound_service_account_namespace_selector: /);
    await read("auth/kubernetes/role/bad", {}, 404);
  });

  it("creates (warning without audience), reads in Vault's shape, updates only what is sent, lists and deletes", async () => {
    const created = await write("auth/kubernetes/role/Web-App", { bound_service_account_names: ["web", "web-*"], bound_service_account_namespaces: "apps,apps-*", policies: "web" });
    expect(created.body.warnings).toEqual(["This role does not specify an audience. In a future version of Vault, specifying an audience will be required."]);
    let r = await read("auth/kubernetes/role/web-app");
    expect(r.body.data).toMatchObject({
      bound_service_account_names: ["web", "web-*"],
      bound_service_account_namespaces: ["apps", "apps-*"],
      bound_service_account_namespace_selector: "",
      alias_name_source: "serviceaccount_uid",
      token_policies: ["web"],
      policies: ["web"],
      token_ttl: 0,
      token_bound_cidrs: [],
    });
    expect(r.body.data.audience).toBeUndefined();
    const updated = await write("auth/kubernetes/role/web-app", { audience: "vault", alias_name_source: "serviceaccount_name" }, {}, 204);
    expect(updated.status).toBe(204);
    r = await read("auth/kubernetes/role/web-app");
    expect(r.body.data).toMatchObject({ audience: "vault", alias_name_source: "serviceaccount_name", bound_service_account_names: ["web", "web-*"], token_policies: ["web"] });
    expect((await list("auth/kubernetes/role")).body.data.keys).toEqual(["cert-manager", "web-app"]);
    await del("auth/kubernetes/role/web-app");
    await read("auth/kubernetes/role/web-app", {}, 404);
  });
});

describe("login", () => {
  it("logs in; the token works and lookup-self shows the login path and the service account", async () => {
    const before = fake.received.length;
    const r = await login("cert-manager", CM_JWT);
    expect(r.status, r.text).toBe(200);
    expectNoJwt(r);
    const auth = r.body.auth;
    expect(auth.policies).toEqual(["default", "pki-issuer"]);
    expect(auth.token_policies).toEqual(["default", "pki-issuer"]);
    expect(auth.lease_duration).toBe(1200);
    expect(auth.renewable).toBe(true);
    expect(auth.metadata).toEqual({
      service_account_uid: CM.uid,
      service_account_name: "cert-manager",
      service_account_namespace: "cert-manager",
      service_account_secret_name: "",
      role: "cert-manager",
    });
    const self = await read("auth/token/lookup-self", { token: auth.client_token });
    expect(self.body.data).toMatchObject({ path: "auth/kubernetes/login", display_name: "kubernetes-cert-manager-cert-manager", meta: auth.metadata, policies: ["default", "pki-issuer"] });

    // The TokenReview request, exactly as Vault sends it.
    expect(fake.received.length).toBe(before + 1);
    const sent = fake.received[before];
    expect(sent?.authorization).toBe(`Bearer ${REVIEWER}`);
    expect(sent?.body).toEqual({ metadata: { creationTimestamp: null }, spec: { token: CM_JWT, audiences: DEFAULT_API_AUDIENCES }, status: { user: {} } });
    expect(fake.problems).toEqual([]);
  });

  it("a legacy secret-based token: the secret name lands in the metadata, no audiences are sent", async () => {
    const before = fake.received.length;
    const r = await login("cert-manager", LEGACY_JWT);
    expect(r.status, r.text).toBe(200);
    expect(r.body.auth.metadata.service_account_secret_name).toBe("cert-manager-token-x7k2p");
    expect(fake.received[before]?.body).toEqual({ metadata: { creationTimestamp: null }, spec: { token: LEGACY_JWT }, status: { user: {} } });
  });

  it("bad input: 400 with Vault's messages", async () => {
    expectError(await login("", CM_JWT), 400, "missing role");
    expectError(await login("cert-manager", ""), 400, "missing jwt");
    expectError(await login("nope", CM_JWT), 400, 'invalid role name "nope"');
    const typed = await login({ a: 1 }, CM_JWT);
    expect(typed.status).toBe(400);
    expect(typed.body.errors[0]).toContain('"role"');
    expectNoJwt(typed);
  });

  it("a service account outside the role's bindings: 403 naming which, before any TokenReview", async () => {
    const before = fake.received.length;
    expectError(await login("cert-manager", OTHER_NS_JWT), 403, "namespace not authorized");
    expectError(await login("cert-manager", OTHER_NAME_JWT), 403, "service account name not authorized");
    expect(fake.received.length).toBe(before);
    await write("auth/kubernetes/role/globbed", { bound_service_account_names: "web-*,cert-*", bound_service_account_namespaces: "*" });
    expect((await login("globbed", OTHER_NS_JWT)).status).toBe(200);
    expectError(await login("globbed", OTHER_NAME_JWT), 403, "service account name not authorized");
  });

  it("tokens the cluster refuses, malformed or expired JWTs: 403", async () => {
    expectError(await login("cert-manager", REVOKED_JWT), 403, "permission denied");
    expectError(await login("cert-manager", UNKNOWN_JWT), 403, "permission denied");
    expectError(await login("cert-manager", STALE_JWT), 403, "permission denied");
    expectError(await login("cert-manager", "not.a.jwt"), 403, "permission denied");
    expectError(await login("cert-manager", `${CM_JWT.split(".").slice(0, 2).join(".")}.`), 403, "permission denied");
    expectError(await login("cert-manager", EXPIRED_JWT), 403, "invalid expiration time (exp) claim: token is expired");
  });

  it("audience: the JWT and the TokenReview must carry the role's audience", async () => {
    await write("auth/kubernetes/role/aud", { bound_service_account_names: "cert-manager", bound_service_account_namespaces: "cert-manager", audience: "vault" }, {}, 204);
    expectError(await login("aud", CM_JWT), 403, "invalid audience (aud) claim: audience claim does not match any expected audience");
    const before = fake.received.length;
    const r = await login("aud", VAULT_AUD_JWT);
    expect(r.status, r.text).toBe(200);
    expect(fake.received[before]?.body).toMatchObject({ spec: { audiences: ["vault"] } });
    // The JWT claims the audience but the cluster issued it for another one.
    const lying = fake.addToken(projectedJwt(VAULT_AUD), CM);
    expectError(await login("aud", lying), 403, "permission denied");
  });

  it("a TokenReview API that is down: 502 saying so, not 403 or 500", async () => {
    for (const mode of ["status", "connection", "timeout"] as const) {
      fake.down = mode;
      try {
        const r = await login("cert-manager", CM_JWT);
        expect(r.status, `${mode}: ${r.text}`).toBe(502);
        expect(r.body.errors[0]).toMatch(/^error reaching the Kubernetes TokenReview API: /);
        expectNoJwt(r);
      } finally {
        fake.down = null;
      }
    }
    expect((await login("cert-manager", CM_JWT)).status).toBe(200);
  });

  it("a reviewer JWT the cluster does not let review: 403", async () => {
    await write("sys/auth/k8s-noreview", { type: "kubernetes" }, {}, 204);
    await write("auth/k8s-noreview/config", { kubernetes_host: "https://k8s.test", token_reviewer_jwt: CM_JWT }, {}, 204);
    await write("auth/k8s-noreview/role/r", { bound_service_account_names: "*", bound_service_account_namespaces: "*" });
    expectError(await login("r", CM_JWT, "k8s-noreview"), 403, "permission denied");
  });

  it("without token_reviewer_jwt the client's own JWT is the bearer", async () => {
    const jwt = selfFake.addToken(projectedJwt(CM), CM);
    await write("sys/auth/k8s-self", { type: "kubernetes" }, {}, 204);
    await write("auth/k8s-self/config", { kubernetes_host: "https://k8s-self.test" }, {}, 204);
    await write("auth/k8s-self/role/r", { bound_service_account_names: "cert-manager", bound_service_account_namespaces: "cert-manager" });
    const r = await login("r", jwt, "k8s-self");
    expect(r.status, r.text).toBe(200);
    expect(selfFake.received.at(-1)?.authorization).toBe(`Bearer ${jwt}`);
    expect(selfFake.problems).toEqual([]);
  });

  it("token_bound_cidrs: the login must come from inside them (CF-Connecting-IP only)", async () => {
    await write("auth/kubernetes/role/cidr", { bound_service_account_names: "cert-manager", bound_service_account_namespaces: "cert-manager", token_bound_cidrs: "10.0.0.0/8" });
    expectError(await login("cidr", CM_JWT), 403, "permission denied");
    expectError(await login("cidr", CM_JWT, "kubernetes", { "x-forwarded-for": "10.1.2.3", "cf-connecting-ip": "192.0.2.1" }), 403, "permission denied");
    expect((await login("cidr", CM_JWT, "kubernetes", { "cf-connecting-ip": "10.1.2.3" })).status).toBe(200);
  });

  it("deleting the role stops its tokens", async () => {
    await write("auth/kubernetes/role/temp", { bound_service_account_names: "cert-manager", bound_service_account_namespaces: "cert-manager" });
    const token = (await login("temp", CM_JWT)).body.auth.client_token as string;
    await read("auth/token/lookup-self", { token });
    await del("auth/kubernetes/role/temp");
    expect((await api("GET", "auth/token/lookup-self", { token })).status).toBe(403);
  });

  it("pem_keys: the signature is checked locally", async () => {
    const { publicKey, privateKey } = await generateKeyPair("RS256");
    const pem = await exportSPKI(publicKey);
    await write("sys/auth/k8s-keys", { type: "kubernetes" }, {}, 204);
    await write("auth/k8s-keys/config", { kubernetes_host: "https://k8s.test", token_reviewer_jwt: REVIEWER, pem_keys: [pem] }, {}, 204);
    expect((await read("auth/k8s-keys/config")).body.data.pem_keys).toEqual([pem.trim()]);
    await write("auth/k8s-keys/role/r", { bound_service_account_names: "cert-manager", bound_service_account_namespaces: "cert-manager" });
    const signed = await new SignJWT({ "kubernetes.io": { namespace: CM.namespace, serviceaccount: { name: CM.name, uid: CM.uid } }, aud: DEFAULT_API_AUDIENCES })
      .setProtectedHeader({ alg: "RS256" })
      .setIssuedAt()
      .setExpirationTime("1h")
      .sign(privateKey);
    fake.addToken(signed, CM);
    const ok = await login("r", signed, "k8s-keys");
    expect(ok.status, ok.text).toBe(200);
    const forged = fake.addToken(projectedJwt(CM), CM);
    expectError(await login("r", forged, "k8s-keys"), 403, "permission denied");
  });
});
