/**
 * Replays, as plain HTTP, what two Go clients of Vault send: cert-manager's Vault issuer and the
 * Terraform provider's start-up. Both use Vault's Go API client (github.com/hashicorp/vault/api),
 * whose requests carry `X-Vault-Token`, `X-Vault-Request: true`, `X-Vault-Namespace` only when a
 * namespace is set, a JSON body written by json.Encoder (trailing newline) and no Content-Type
 * header; the replay sends exactly that.
 *
 * cert-manager (pkg/internal/vault): token auth (the token from the Issuer's tokenSecretRef is used
 * as is, no login); `GET /v1/sys/health` without the namespace header (cert-manager drops it for
 * the health check) where 200 means ready; then `POST /v1/<spec.vault.path>` (`<mount>/sign/<role>`)
 * with the all-string body {common_name, alt_names, ip_sans, uri_sans, ttl: duration.String(),
 * csr, exclude_cn_from_sans: "true"}, reading certificate, issuing_ca and ca_chain from `data`.
 *
 * Terraform's provider (NewProviderMeta): `auth/token/lookup-self` with the configured token, a
 * child token from `auth/token/create` with `ttl` and `explicit_max_ttl` "1200s"
 * (max_lease_ttl_seconds) and display_name "terraform" (TokenCreateRequest's zero-valued,
 * non-omitempty fields included), then `GET sys/seal-status` whose `version` it parses as a semver.
 */
import { beforeAll, describe, expect, inject, it } from "vitest";
import { call } from "./client";
import { E2E_ROOT_TOKEN } from "./env";
import { opensslCsr, verify, x509Field, x509Text } from "../helpers/openssl";

const RUN = crypto.randomUUID().slice(0, 8);
const SEMVER = /^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/;

interface Reply {
  status: number;
  body: any;
  text: string;
}

/** One request as Vault's Go API client sends it. */
async function goClient(method: string, path: string, opts: { token?: string; namespace?: string; body?: unknown } = {}): Promise<Reply> {
  const headers: Record<string, string> = { "User-Agent": "Go-http-client/1.1", "Accept-Encoding": "gzip", "X-Vault-Request": "true" };
  if (opts.token) headers["X-Vault-Token"] = opts.token;
  if (opts.namespace) headers["X-Vault-Namespace"] = opts.namespace;
  // json.NewEncoder(buf).Encode(body): compact JSON plus a newline; bytes, so fetch adds no Content-Type.
  const body = opts.body === undefined ? undefined : new TextEncoder().encode(`${JSON.stringify(opts.body)}\n`);
  const res = await fetch(`${inject("baseUrl")}${path}`, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = text;
  }
  return { status: res.status, body: parsed, text };
}

describe("cert-manager's Vault issuer (token auth)", () => {
  // Two issuers, as cert-manager users configure them: one at the root namespace, one with
  // spec.vault.namespace. Each gets Vault's PKI tutorial set-up (not part of the replay).
  const ns = `cm-${RUN}`;
  const issuers = [
    { name: "root namespace", namespace: "", mount: `pki-cm-${RUN}` },
    { name: `namespace ${ns}`, namespace: ns, mount: "pki_int" },
  ];
  let token = "";
  // Set-up failures are reported by the sign tests, so the health check still runs on its own.
  const setupErrors: string[] = [];
  const ok = async (method: string, path: string, body: unknown, status = 200) => {
    const r = await call(method, path, body);
    if (r.status !== status) setupErrors.push(`${method} ${path}: ${r.status} ${r.text}`);
    return r;
  };

  beforeAll(async () => {
    await ok("POST", `sys/namespaces/${ns}`, {});
    for (const i of issuers) {
      const at = (p: string) => (i.namespace ? `${i.namespace}/${p}` : p);
      await ok("POST", at(`sys/mounts/${i.mount}`), { type: "pki" }, 204);
      // Vault's tutorial tunes the mount to 10 years; cert-manager's default duration is 90 days.
      await ok("POST", at(`sys/mounts/${i.mount}/tune`), { max_lease_ttl: "87600h" }, 204);
      await ok("POST", at(`${i.mount}/root/generate/internal`), { common_name: "example.com", key_type: "ec", ttl: "87600h" });
      await ok("POST", at(`${i.mount}/roles/example-dot-com`), { allowed_domains: "example.com", allow_subdomains: true, max_ttl: "2160h", key_type: "any" });
    }
    // The Issuer's token: a token with a policy that may sign, as the cert-manager guide sets up.
    const rules = issuers.map((i) => `path "${i.namespace ? `${i.namespace}/` : ""}${i.mount}/sign/example-dot-com" { capabilities = ["create", "update"] }`).join("\n");
    await ok("POST", `sys/policies/acl/cert-manager-${RUN}`, { policy: rules }, 204);
    token = (await ok("POST", "auth/token/create", { policies: [`cert-manager-${RUN}`], ttl: "1h" })).body?.auth?.client_token ?? "";
  });

  it("health check: GET /v1/sys/health without the namespace header is 200 initialized, unsealed, active", async () => {
    const r = await goClient("GET", "/v1/sys/health", { token });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({ initialized: true, sealed: false, standby: false });
  });

  it.each(issuers)("POST <mount>/sign/<role> with the all-string body ($name)", async (i) => {
    expect(setupErrors, "Vault's PKI tutorial set-up").toEqual([]);
    const sans = ["DNS:app.example.com", "DNS:api.example.com", "IP:10.0.0.1"];
    const { csr } = await opensslCsr("/CN=cn-only.example.com", "ec", sans);
    const r = await goClient("POST", `/v1/${i.mount}/sign/example-dot-com`, {
      token,
      namespace: i.namespace || undefined,
      body: {
        common_name: "cn-only.example.com",
        alt_names: "app.example.com,api.example.com",
        ip_sans: "10.0.0.1",
        uri_sans: "",
        ttl: "2160h0m0s",
        csr,
        exclude_cn_from_sans: "true",
      },
    });
    expect(r.status, r.text).toBe(200);
    const d = r.body.data;
    // What cert-manager reads (certutil.ParsePKIMap): certificate, issuing_ca, ca_chain.
    expect(d.certificate).toMatch(/^-----BEGIN CERTIFICATE-----/);
    expect(d.issuing_ca).toMatch(/^-----BEGIN CERTIFICATE-----/);
    expect(Array.isArray(d.ca_chain) && d.ca_chain.length).toBeTruthy();
    const v = await verify(d.certificate, d.issuing_ca);
    expect(v.ok, v.output).toBe(true);
    const text = await x509Text(d.certificate);
    expect(text).toContain("DNS:app.example.com");
    expect(text).toContain("DNS:api.example.com");
    expect(text).toContain("IP Address:10.0.0.1");
    // exclude_cn_from_sans "true": the CN stays in the subject, out of the SANs.
    expect(await x509Field(d.certificate, "-subject")).toContain("cn-only.example.com");
    expect(text).not.toContain("DNS:cn-only.example.com");
    // ttl "2160h0m0s": 90 days.
    const days = (Number(d.expiration) * 1000 - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(89.9);
    expect(days).toBeLessThanOrEqual(90.01);
  });

  it("a namespaced issuer's mount is not reachable without the namespace header", async () => {
    expect(setupErrors, "Vault's PKI tutorial set-up").toEqual([]);
    const { csr } = await opensslCsr("/CN=x.example.com", "ec");
    const r = await goClient("POST", "/v1/pki_int/sign/example-dot-com", { token, body: { common_name: "x.example.com", csr, ttl: "1h0m0s" } });
    expect(r.status).not.toBe(200);
  });
});

describe("Terraform provider start-up (token from VAULT_TOKEN)", () => {
  let child = "";

  it("auth/token/lookup-self with the configured token", async () => {
    const r = await goClient("GET", "/v1/auth/token/lookup-self", { token: E2E_ROOT_TOKEN });
    expect(r.status, r.text).toBe(200);
    expect(r.body.data).toMatchObject({ id: E2E_ROOT_TOKEN, policies: ["root"] });
  });

  it('child token: auth/token/create with ttl and explicit_max_ttl "1200s"', async () => {
    const r = await goClient("POST", "/v1/auth/token/create", {
      token: E2E_ROOT_TOKEN,
      // api.TokenCreateRequest as the provider fills it; display_name, num_uses, type and
      // entity_alias have no omitempty, so they go even when empty.
      body: { ttl: "1200s", explicit_max_ttl: "1200s", display_name: "terraform", num_uses: 0, type: "", entity_alias: "" },
    });
    expect(r.status, r.text).toBe(200);
    expect(r.body.auth).toMatchObject({ lease_duration: 1200, renewable: true });
    child = r.body.auth.client_token;
    expect(child).toBeTruthy();
  });

  it("sys/seal-status answers a semver version (hashicorp/go-version parses it)", async () => {
    const r = await goClient("GET", "/v1/sys/seal-status", { token: child });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({ sealed: false, initialized: true });
    expect(typeof r.body.type).toBe("string");
    expect(typeof r.body.cluster_name).toBe("string");
    expect(r.body.version).toMatch(SEMVER);
  });

  it("the child token is what the provider then uses: lookup-self shows it", async () => {
    const r = await goClient("GET", "/v1/auth/token/lookup-self", { token: child });
    expect(r.status, r.text).toBe(200);
    expect(r.body.data).toMatchObject({ id: child, display_name: "token-terraform", explicit_max_ttl: 1200 });
    expect(r.body.data.ttl).toBeGreaterThan(1100);
    expect(r.body.data.ttl).toBeLessThanOrEqual(1200);
  });
});
