/**
 * Stored URL configuration replayed by later requests (docs/security.md "Input limits" and
 * "Linear matching"): a URL field is at most 2048 bytes at write time (400 naming the field), and
 * the requests that read a stored value back (anonymous ACME directories and logins, issuance with
 * AIA templating) stay linear in it. A regex such as `/\/+$/` costs quadratic time on a long
 * inner run of "/" (or `/\{\{[^}]*\}\}/` on a run of "{"), so the test stores such runs: one of
 * 2048 bytes through the API, and one of 100,000 characters straight into D1 (a value written
 * before the cap existed), and each replay must answer within a wall-clock budget far below what
 * the quadratic patterns cost (about 8 s for 100,000 characters) yet generous for a loaded machine.
 */
import { env } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, write, type ApiResult } from "../helpers/api";
import { FakeJwks } from "../helpers/fake-jwks";
import { installFakes } from "../helpers/fake-router";
import { FakeTokenReview, projectedJwt } from "../helpers/fake-tokenreview";
import { freshClaims, generateKey, signJwt, type TestKey } from "../helpers/jwt-issuer";
import { pkiWithRoot } from "../helpers/pki";

const CAP = 2048;
const LEGACY_RUN = 100_000;
const BUDGET_MS = 2000;

/** `prefix`, then a run of `ch`, then "x": exactly `total` characters (the run is inside, not trailing). */
const hostile = (prefix: string, ch: string, total: number): string => `${prefix}${ch.repeat(total - prefix.length - 1)}x`;

/** Runs a request and fails when it takes longer than the budget. */
async function within(label: string, f: () => Promise<ApiResult>): Promise<ApiResult> {
  const started = Date.now();
  const r = await f();
  const ms = Date.now() - started;
  expect(ms, `${label} took ${ms} ms (status ${r.status})`).toBeLessThan(BUDGET_MS);
  return r;
}

async function mountId(path: string): Promise<string> {
  const row = await env.DB.prepare("SELECT id FROM mounts WHERE path = ?").bind(`${path}/`).first<{ id: string }>();
  if (!row) throw new Error(`no mount ${path}`);
  return row.id;
}

/** Overwrites one stored value behind the API's back, as if it had been written before the cap. */
async function storeLegacyPkiConfig(path: string, name: string, value: Record<string, unknown>): Promise<void> {
  await env.DB.prepare("UPDATE pki_config SET value = ? WHERE mount_id = ? AND name = ?").bind(JSON.stringify(value), await mountId(path), name).run();
  // The PKI read model may hold the old row for up to CACHE_TTL_MS (1 s by default).
  await new Promise((r) => setTimeout(r, 1100));
}

async function storeLegacyAuthConfig(path: string, config: Record<string, unknown>): Promise<void> {
  await env.DB.prepare("INSERT INTO auth_configs (mount_id, config, updated_at) VALUES (?, ?, ?) ON CONFLICT(mount_id) DO UPDATE SET config = excluded.config")
    .bind(await mountId(path), JSON.stringify(config), Date.now())
    .run();
}

const k8s = new FakeTokenReview({ selfReview: true });
const SA = { namespace: "apps", name: "web", uid: "uid-web" };
const SA_JWT = k8s.addToken(projectedJwt(SA), SA);
const idp = new FakeJwks();
let key: TestKey;
let uninstall: () => void = () => {};

beforeAll(async () => {
  key = await generateKey("ES256");
  idp.keys = [key];
  uninstall = installFakes([
    { hosts: [".k8s.test"], fake: k8s },
    { hosts: [".idp.test"], fake: idp },
  ]);
});
afterAll(() => uninstall());

describe("URL fields are at most 2048 bytes when written", () => {
  const long = hostile("https://h.example/", "/", 40_000);

  it("PKI: config/cluster, config/urls, issuer AIA URLs, config/acme, config/external-policy", async () => {
    const { path } = await pkiWithRoot();
    const cases: [string, Record<string, unknown>, string][] = [
      ["config/cluster", { path: long }, "path"],
      ["config/cluster", { aia_path: long }, "aia_path"],
      ["config/urls", { issuing_certificates: [long] }, "issuing_certificates"],
      ["config/urls", { crl_distribution_points: [long] }, "crl_distribution_points"],
      ["config/urls", { delta_crl_distribution_points: [long] }, "delta_crl_distribution_points"],
      ["config/urls", { ocsp_servers: [long] }, "ocsp_servers"],
      ["issuer/default", { ocsp_servers: [long] }, "ocsp_servers"],
      ["config/acme", { dns_resolver: long }, "dns_resolver"],
      ["config/external-policy", { external_service_url: long }, "external_service_url"],
    ];
    for (const [p, body, field] of cases) {
      const r = await api("POST", `${path}/${p}`, { body });
      expect(r.status, `${p} ${field}: ${r.text.slice(0, 200)}`).toBe(400);
      expect(r.body.errors).toEqual([`${field}: ${Array.isArray(body[field]) ? "entry " : ""}longer than ${CAP} bytes`]);
    }
    // 2048 bytes are accepted.
    await write(`${path}/config/cluster`, { path: hostile("https://pki.example/", "/", CAP) });
  });

  it("auth methods: Kubernetes and JWT configs, JWT roles", async () => {
    await write("sys/auth/k8s-cap", { type: "kubernetes" }, {}, 204);
    await write("sys/auth/jwt-cap", { type: "jwt" }, {}, 204);
    const cases: [string, Record<string, unknown>, string][] = [
      ["auth/k8s-cap/config", { kubernetes_host: long }, "kubernetes_host"],
      ["auth/k8s-cap/config", { kubernetes_host: "https://api.k8s.test", issuer: long }, "issuer"],
      ["auth/jwt-cap/config", { jwks_url: long }, "jwks_url"],
      ["auth/jwt-cap/config", { oidc_discovery_url: long }, "oidc_discovery_url"],
      ["auth/jwt-cap/config", { jwks_url: "https://a.idp.test/keys", bound_issuer: long }, "bound_issuer"],
      ["auth/jwt-cap/role/r", { role_type: "jwt", user_claim: "sub", bound_audiences: "x", allowed_redirect_uris: [long] }, "allowed_redirect_uris"],
    ];
    for (const [p, body, field] of cases) {
      const r = await api("POST", p, { body });
      expect(r.status, `${p} ${field}: ${r.text.slice(0, 200)}`).toBe(400);
      expect(r.body.errors).toEqual([`${field}: ${Array.isArray(body[field]) ? "entry " : ""}longer than ${CAP} bytes`]);
    }
  });

  it("sync destinations and audit devices", async () => {
    const kv = await api("POST", "sys/sync/destinations/cloudtwo-kv/too-long", {
      body: { key_vault_uri: `https://${"a.".repeat(20_000)}vault.azure.net`, client_id: "c", client_secret: "s", tenant_id: "t" },
    });
    expect(kv.status, kv.text.slice(0, 200)).toBe(400);
    expect(kv.body.errors).toEqual([`key_vault_uri: longer than ${CAP} bytes`]);
    const credentials = JSON.stringify({ type: "service_account", project_id: "p", client_email: "a@p.iam.gserviceaccount.com", private_key: "k", token_uri: long });
    const gcp = await api("POST", "sys/sync/destinations/cloudthree-sm/too-long", { body: { credentials } });
    expect(gcp.status, gcp.text.slice(0, 200)).toBe(400);
    expect(gcp.body.errors).toEqual([`credentials: token_uri is longer than ${CAP} bytes`]);
    const audit = await api("POST", "sys/audit/too-long", { body: { type: "http", options: { address: long } } });
    expect(audit.status, audit.text.slice(0, 200)).toBe(400);
    expect(audit.body.errors).toEqual([`options.address: longer than ${CAP} bytes`]);
  });
});

describe("stored values replayed by later requests stay within the budget", () => {
  it("config/cluster path: the anonymous ACME directory", async () => {
    const { path } = await pkiWithRoot();
    const near = hostile("https://pki.example/", "/", CAP);
    await write(`${path}/config/cluster`, { path: near });
    await write(`${path}/config/acme`, { enabled: true });
    const r = await within("directory (2048 bytes)", () => api("GET", `${path}/acme/directory`, { token: null }));
    expect(r.status, r.text.slice(0, 200)).toBe(200);
    await storeLegacyPkiConfig(path, "cluster", { path: hostile("https://pki.example/", "/", LEGACY_RUN), aia_path: "" });
    const legacy = await within("directory (stored before the cap)", () => api("GET", `${path}/acme/directory`, { token: null }));
    expect(legacy.status, legacy.text.slice(0, 200)).toBe(200);
  });

  it("config/cluster aia_path and config/urls: issuance with AIA templating", async () => {
    const { path } = await pkiWithRoot();
    await write(`${path}/roles/web`, { allowed_domains: "example.com", allow_subdomains: true, key_type: "ec", ttl: "1h" });
    await write(`${path}/config/cluster`, { aia_path: hostile("https://aia.example/", "{", CAP) });
    const ocsp = `${hostile("https://ocsp.example/", "{", CAP - "{{issuer_id}}".length)}{{issuer_id}}`;
    await write(`${path}/config/urls`, { enable_templating: true, issuing_certificates: ["{{cluster_aia_path}}/ca"], ocsp_servers: [ocsp] });
    const r = await within("issue (2048 bytes)", () => api("POST", `${path}/issue/web`, { body: { common_name: "a.example.com" } }));
    expect(r.status, r.text.slice(0, 200)).toBe(200);
    await storeLegacyPkiConfig(path, "cluster", { path: "", aia_path: hostile("https://aia.example/", "{", LEGACY_RUN) });
    const legacy = await within("issue (stored before the cap)", () => api("POST", `${path}/issue/web`, { body: { common_name: "b.example.com" } }));
    expect([200, 400]).toContain(legacy.status);
  });

  it("kubernetes_host: the anonymous Kubernetes login", async () => {
    await write("sys/auth/k8s-replay", { type: "kubernetes" }, {}, 204);
    await write("auth/k8s-replay/config", { kubernetes_host: hostile("https://api.k8s.test/", "/", CAP) }, {}, 204);
    await write("auth/k8s-replay/role/web", { bound_service_account_names: "web", bound_service_account_namespaces: "apps" });
    const login = () => api("POST", "auth/k8s-replay/login", { token: null, body: { role: "web", jwt: SA_JWT } });
    await within("kubernetes login (2048 bytes)", login);
    await storeLegacyAuthConfig("auth/k8s-replay", { kubernetes_host: hostile("https://api.k8s.test/", "/", LEGACY_RUN), disable_iss_validation: true });
    const legacy = await within("kubernetes login (stored before the cap)", login);
    expect(legacy.status).toBeLessThan(600);
  });

  it("oidc_discovery_url: discovery at the config write and at an anonymous login", async () => {
    const near = hostile("https://a.idp.test/", "/", CAP);
    const issuerIdp = new FakeJwks([key], { issuer: near });
    const undo = installFakes([{ hosts: ["a.idp.test"], fake: issuerIdp }, { hosts: [".idp.test"], fake: idp }]);
    try {
      await write("sys/auth/jwt-replay", { type: "jwt" }, {}, 204);
      await within("jwt config write (2048 bytes)", () => write("auth/jwt-replay/config", { oidc_discovery_url: near }, {}, 204));
      await write("auth/jwt-replay/role/r", { role_type: "jwt", user_claim: "sub", bound_audiences: "lanyard" }, {}, 204);
      const jwt = await signJwt(key, freshClaims({ iss: near, aud: "lanyard", sub: "svc" }));
      const ok = await within("jwt login (2048 bytes)", () => api("POST", "auth/jwt-replay/login", { token: null, body: { role: "r", jwt } }));
      expect(ok.status, ok.text.slice(0, 200)).toBe(200);
    } finally {
      undo();
      uninstall = installFakes([
        { hosts: [".k8s.test"], fake: k8s },
        { hosts: [".idp.test"], fake: idp },
      ]);
    }
    // A mount whose discovery URL was stored before the cap: this isolate never fetched it, so
    // the first anonymous login runs discovery on it.
    await write("sys/auth/jwt-legacy", { type: "jwt" }, {}, 204);
    await write("auth/jwt-legacy/role/r", { role_type: "jwt", user_claim: "sub", bound_audiences: "lanyard" }, {}, 204);
    const legacyUrl = hostile("https://b.idp.test/", "/", LEGACY_RUN);
    await storeLegacyAuthConfig("auth/jwt-legacy", { oidc_discovery_url: legacyUrl });
    // The signature is checked before the claims, so discovery runs whatever the token says.
    const jwt = await signJwt(key, freshClaims({ iss: "https://b.idp.test", aud: "lanyard", sub: "svc" }));
    const legacy = await within("jwt login (stored before the cap)", () => api("POST", "auth/jwt-legacy/login", { token: null, body: { role: "r", jwt } }));
    expect(legacy.status, legacy.text.slice(0, 300)).toBe(400);
    expect(legacy.body.errors[0]).toContain("fetching keys: oidc_discovery_url: ");
  });
});
