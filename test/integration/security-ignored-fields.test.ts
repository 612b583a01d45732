/**
 * "Say no instead of ignoring": every field Lanyard accepts is either acted on, refused with a
 * 400 naming it, or — where Vault's own clients (the Go API client behind the CLI and Terraform,
 * hvac) always send it with a default value — accepted silently at that default and answered
 * with a warning naming it otherwise (docs/security.md "Fields Lanyard does not act on").
 *
 * Covered: identity-templated ACL policies (refused at write; a stored one's templated rules never
 * match, as Vault skips paths whose template cannot be resolved), sys/mounts and sys/auth enable
 * and tune options, JWT and Kubernetes config and role fields, token roles' entity aliases and
 * path suffix, and the PKI role's identity-template flags.
 */
import { env } from "cloudflare:test";
import * as x509 from "@peculiar/x509";
import { exportSPKI, generateKeyPair } from "jose";
import { beforeAll, describe, expect, it } from "vitest";
import { api, mount, read, write, type ApiResult } from "../helpers/api";
import { generateKey, nowSeconds, signJwt } from "../helpers/jwt-issuer";

x509.cryptoProvider.set(crypto);

const uid = () => crypto.randomUUID().slice(0, 8);

/** The answer's warnings that name a field (each warning starts with the field's name). */
function warningsFor(r: ApiResult, field: string): string[] {
  const all: unknown[] = Array.isArray(r.body?.warnings) ? r.body.warnings : [];
  return all.filter((w): w is string => typeof w === "string" && w.startsWith(`${field}: `));
}

function expectWarned(r: ApiResult, field: string): void {
  expect(r.status, r.text).toBe(200);
  expect(warningsFor(r, field), JSON.stringify(r.body?.warnings)).toHaveLength(1);
}

function expectRefused(r: ApiResult, field: string): void {
  expect(r.status, r.text).toBe(400);
  expect(String(r.body.errors?.[0] ?? "")).toMatch(new RegExp(`^${field.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}: `));
}

const post = (path: string, body: unknown) => api("POST", path, { body });

describe("identity-templated ACL policies", () => {
  const templated = 'path "secret/data/{{identity.entity.name}}/*" { capabilities = ["read"] }';

  it("refuses a templated path at write (HCL, JSON and the legacy sys/policy path), naming the path", async () => {
    const hcl = await post(`sys/policies/acl/t-${uid()}`, { policy: templated });
    expect(hcl.status, hcl.text).toBe(400);
    expect(hcl.body.errors[0]).toContain('path "secret/data/{{identity.entity.name}}/*"');
    expect(hcl.body.errors[0]).toMatch(/identity templat/);
    const json = await post(`sys/policies/acl/t-${uid()}`, {
      policy: JSON.stringify({ path: { "kv/data/{{identity.groups.names.ops.id}}": { capabilities: ["read"] } } }),
    });
    expect(json.status, json.text).toBe(400);
    expect(json.body.errors[0]).toContain('path "kv/data/{{identity.groups.names.ops.id}}"');
    const legacy = await post(`sys/policy/t-${uid()}`, { policy: templated });
    expect(legacy.status, legacy.text).toBe(400);
  });

  it("a templated rule already in storage grants nothing, not even its literal path; the policy's other rules still apply", async () => {
    const kv = await mount("kv");
    await write(`${kv}/data/{{identity.entity.name}}/x`, { data: { v: "shared" } });
    await write(`${kv}/data/plain`, { data: { v: "plain" } });
    const name = `stored-${uid()}`;
    const text = `path "${kv}/data/{{identity.entity.name}}/*" { capabilities = ["read"] }\npath "${kv}/data/plain" { capabilities = ["read"] }`;
    // As a write made before templated paths were refused would have left it.
    await env.DB.prepare("INSERT INTO policies (namespace_id, name, text, updated_at) VALUES ('root', ?, ?, ?)").bind(name, text, Date.now()).run();
    const t = (await write("auth/token/create", { policies: [name] })).body.auth.client_token as string;
    expect((await api("GET", `${kv}/data/plain`, { token: t })).status).toBe(200);
    const literal = await api("GET", `${kv}/data/{{identity.entity.name}}/x`, { token: t });
    expect(literal.status, literal.text).toBe(403);
  });
});

describe("sys/mounts enable and tune", () => {
  it("the Go client's enable body (its zero values) is accepted without a warning", async () => {
    // api.MountInput as `vault secrets enable -version=2 kv` and Terraform's vault_mount send it.
    const r = await post(`sys/mounts/go-${uid()}`, {
      type: "kv",
      description: "",
      config: { options: null, default_lease_ttl: "", max_lease_ttl: "", force_no_cache: false },
      local: false,
      seal_wrap: false,
      external_entropy_access: false,
      options: { version: "2" },
    });
    expect(r.status, r.text).toBe(204);
  });

  it("warns, naming the field, when a top-level flag asks for what Lanyard does not do", async () => {
    for (const field of ["local", "seal_wrap", "external_entropy_access"]) {
      expectWarned(await post(`sys/mounts/f-${uid()}`, { type: "pki", [field]: true }), field);
    }
  });

  it("warns for config keys that change nothing, refuses those that cannot be honoured", async () => {
    const warned = await post(`sys/mounts/c-${uid()}`, {
      type: "pki",
      config: {
        force_no_cache: true,
        audit_non_hmac_request_keys: ["csr"],
        audit_non_hmac_response_keys: ["certificate"],
        listing_visibility: "unauth",
        passthrough_request_headers: ["X-Custom"],
        frobnicate: 1,
      },
    });
    for (const f of ["force_no_cache", "audit_non_hmac_request_keys", "audit_non_hmac_response_keys", "listing_visibility", "passthrough_request_headers", "frobnicate"]) {
      expectWarned(warned, `config.${f}`);
    }
    expectRefused(await post(`sys/mounts/c-${uid()}`, { type: "pki", config: { listing_visibility: "everyone" } }), "config.listing_visibility");
    expectRefused(await post(`sys/mounts/c-${uid()}`, { type: "pki", config: { plugin_version: "v1.2.3" } }), "config.plugin_version");
    expectRefused(await post(`sys/mounts/c-${uid()}`, { type: "pki", config: { token_type: "batch" } }), "config.token_type");
    expectRefused(await post(`sys/mounts/c-${uid()}`, { type: "pki", plugin_name: "vault-plugin-secrets-foo" }), "plugin_name");
    expectWarned(await post(`sys/mounts/o-${uid()}`, { type: "kv", options: { version: "2", upgrade: "yes" } }), "options.upgrade");
  });

  it("tune: the Go client's body passes silently; ignored or invalid keys are named", async () => {
    const pki = await mount("pki");
    const go = await post(`sys/mounts/${pki}/tune`, { options: null, default_lease_ttl: "", max_lease_ttl: "87600h", force_no_cache: false });
    expect(go.status, go.text).toBe(204);
    // Vault's ACME guide's header lists stay silent (Lanyard sends and reads those headers itself).
    const acme = await post(`sys/mounts/${pki}/tune`, { allowed_response_headers: ["Last-Modified", "Location", "Replay-Nonce", "Link"], passthrough_request_headers: ["If-Modified-Since"] });
    expect(acme.status, acme.text).toBe(204);
    expectWarned(await post(`sys/mounts/${pki}/tune`, { passthrough_request_headers: ["Authorization"] }), "passthrough_request_headers");
    expectWarned(await post(`sys/mounts/${pki}/tune`, { allowed_response_headers: ["X-Debug"] }), "allowed_response_headers");
    expectWarned(await post(`sys/mounts/${pki}/tune`, { force_no_cache: true }), "force_no_cache");
    expectWarned(await post(`sys/mounts/${pki}/tune`, { audit_non_hmac_request_keys: ["csr"] }), "audit_non_hmac_request_keys");
    expectRefused(await post(`sys/mounts/${pki}/tune`, { token_type: "service" }), "token_type");
    expectRefused(await post(`sys/mounts/${pki}/tune`, { user_lockout_config: { lockout_threshold: "3" } }), "user_lockout_config");
    const kv = await mount("kv");
    expect((await post(`sys/mounts/${kv}/tune`, { options: { version: "2" } })).status).toBe(204);
    expectRefused(await post(`sys/mounts/${kv}/tune`, { options: { version: "1" } }), "options.version");
  });
});

describe("sys/auth enable and tune", () => {
  it("the Go client's enable body is accepted without a warning", async () => {
    // api.EnableAuthOptions as `vault auth enable approle` and Terraform's vault_auth_backend send it.
    const r = await post(`sys/auth/go-${uid()}`, {
      type: "approle",
      description: "",
      config: { options: null, default_lease_ttl: "", max_lease_ttl: "", force_no_cache: false },
      local: false,
      seal_wrap: false,
      external_entropy_access: false,
      options: null,
    });
    expect(r.status, r.text).toBe(204);
  });

  it("names what it does not do: flags and options warn, lockout is refused", async () => {
    expectWarned(await post(`sys/auth/a-${uid()}`, { type: "approle", local: true }), "local");
    expectWarned(await post(`sys/auth/a-${uid()}`, { type: "approle", seal_wrap: true }), "seal_wrap");
    expectWarned(await post(`sys/auth/a-${uid()}`, { type: "approle", options: { foo: "bar" } }), "options.foo");
    expectRefused(await post(`sys/auth/a-${uid()}`, { type: "approle", config: { user_lockout_config: { lockout_threshold: "3" } } }), "config.user_lockout_config");
    const path = `t-${uid()}`;
    await write(`sys/auth/${path}`, { type: "approle" }, {}, 204);
    expectWarned(await post(`sys/auth/${path}/tune`, { listing_visibility: "unauth" }), "listing_visibility");
    expectWarned(await post(`sys/auth/${path}/tune`, { audit_non_hmac_response_keys: ["secret_id"] }), "audit_non_hmac_response_keys");
    expect((await post(`sys/auth/${path}/tune`, { listing_visibility: "hidden", token_type: "default-service" })).status).toBe(204);
  });
});

describe("JWT auth config and roles", () => {
  let pem = "";
  const path = `jwt-${uid()}`;
  beforeAll(async () => {
    const { publicKey } = await generateKeyPair("ES256", { extractable: true });
    pem = await exportSPKI(publicKey);
    await write(`sys/auth/${path}`, { type: "jwt" }, {}, 204);
  });

  it("a plain config passes silently; fields with no effect here warn; provider_config is refused", async () => {
    expect((await post(`auth/${path}/config`, { jwt_validation_pubkeys: [pem], bound_issuer: "https://idp.example" })).status).toBe(204);
    const r = await post(`auth/${path}/config`, { jwt_validation_pubkeys: [pem], unsupported_critical_cert_extensions: ["1.2.3.4"], namespace_in_state: false });
    expectWarned(r, "unsupported_critical_cert_extensions");
    expectWarned(r, "namespace_in_state");
    expectRefused(await post(`auth/${path}/config`, { jwt_validation_pubkeys: [pem], provider_config: { provider: "azure" } }), "provider_config");
  });

  it("roles: hvac's jwt role passes silently; oidc-only and identity fields warn", async () => {
    await write(`auth/${path}/config`, { jwt_validation_pubkeys: [pem] }, {}, 204);
    const hvac = await post(`auth/${path}/role/ci`, { role_type: "jwt", user_claim: "sub", allowed_redirect_uris: [], bound_audiences: ["x"], token_policies: ["p"] });
    expect(hvac.status, hvac.text).toBe(204);
    expectWarned(await post(`auth/${path}/role/web`, { role_type: "oidc", user_claim: "sub", allowed_redirect_uris: ["https://app.example/cb"] }), "role_type");
    expectWarned(await post(`auth/${path}/role/ci2`, { role_type: "jwt", user_claim: "sub", bound_audiences: ["x"], oidc_scopes: ["openid"] }), "oidc_scopes");
    expectWarned(await post(`auth/${path}/role/ci3`, { role_type: "jwt", user_claim: "sub", bound_audiences: ["x"], max_age: "5m" }), "max_age");
    expectWarned(await post(`auth/${path}/role/ci4`, { role_type: "jwt", user_claim: "sub", bound_audiences: ["x"], groups_claim: "groups" }), "groups_claim");
  });

  it("login: distributed_claim_access_token is named in a warning, not silently dropped", async () => {
    const key = await generateKey("ES256");
    const jwtPath = `jwt-${uid()}`;
    await write(`sys/auth/${jwtPath}`, { type: "jwt" }, {}, 204);
    await write(`auth/${jwtPath}/config`, { jwt_validation_pubkeys: [key.pem] }, {}, 204);
    await write(`auth/${jwtPath}/role/ci`, { role_type: "jwt", user_claim: "sub", bound_audiences: ["lanyard"], token_policies: ["p"] }, {}, 204);
    const jwt = await signJwt(key, { sub: "ci", aud: "lanyard", iat: nowSeconds(), exp: nowSeconds() + 60 });
    const plain = await post(`auth/${jwtPath}/login`, { role: "ci", jwt });
    expect(plain.status, plain.text).toBe(200);
    expect(plain.body.warnings ?? null).toBeNull();
    expectWarned(await post(`auth/${jwtPath}/login`, { role: "ci", jwt, distributed_claim_access_token: "graph-token" }), "distributed_claim_access_token");
  });
});

describe("Kubernetes auth config", () => {
  it("kubernetes_ca_cert and use_annotations_as_alias_metadata warn; a host-only config passes silently", async () => {
    const path = `k8s-${uid()}`;
    await write(`sys/auth/${path}`, { type: "kubernetes" }, {}, 204);
    const keys = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])) as CryptoKeyPair;
    const cert = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: "01",
      name: "CN=kubernetes",
      notBefore: new Date("2024-01-01T00:00:00Z"),
      notAfter: new Date("2034-01-01T00:00:00Z"),
      keys,
      signingAlgorithm: { name: "ECDSA", hash: "SHA-256" },
    });
    expect((await post(`auth/${path}/config`, { kubernetes_host: "https://k8s.example", disable_local_ca_jwt: false, use_annotations_as_alias_metadata: false })).status).toBe(204);
    expectWarned(await post(`auth/${path}/config`, { kubernetes_host: "https://k8s.example", kubernetes_ca_cert: cert.toString("pem") }), "kubernetes_ca_cert");
    expectWarned(await post(`auth/${path}/config`, { kubernetes_host: "https://k8s.example", use_annotations_as_alias_metadata: true }), "use_annotations_as_alias_metadata");
  });
});

describe("token roles and token create", () => {
  it("allowed_entity_aliases: empty passes silently (Terraform sends []), a value warns", async () => {
    const empty = await post(`auth/token/roles/r-${uid()}`, { allowed_policies: ["default"], allowed_entity_aliases: [], path_suffix: "" });
    expect(empty.status, empty.text).toBe(204);
    expectWarned(await post(`auth/token/roles/r-${uid()}`, { allowed_entity_aliases: ["alice"] }), "allowed_entity_aliases");
  });

  it("path_suffix is part of the token's path", async () => {
    const role = `r-${uid()}`;
    await write(`auth/token/roles/${role}`, { allowed_policies: ["default"], path_suffix: "v2" }, {}, 204);
    const t = (await write(`auth/token/create/${role}`, {})).body.auth.client_token as string;
    const me = await read("auth/token/lookup-self", { token: t });
    expect(me.body.data.path).toBe(`auth/token/create/${role}/v2`);
  });

  it("entity_alias: the Go client's empty value passes silently, a value is refused", async () => {
    const ok = await post("auth/token/create", { ttl: "10m", entity_alias: "" });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.warnings ?? []).toEqual([]);
    expectRefused(await post("auth/token/create", { ttl: "10m", entity_alias: "alice" }), "entity_alias");
  });
});

describe("PKI role identity-template flags", () => {
  it("false passes silently (Terraform sends it), true warns naming the flag", async () => {
    const pki = await mount("pki");
    const plain = await post(`${pki}/roles/r`, { allowed_domains: "example.com", allowed_domains_template: false, allowed_uri_sans_template: false, allow_globs_in_identity_templates: false });
    expect(plain.status, plain.text).toBe(200);
    for (const flag of ["allowed_domains_template", "allowed_uri_sans_template", "allow_globs_in_identity_templates"]) {
      expect(warningsFor(plain, flag)).toEqual([]);
      expectWarned(await post(`${pki}/roles/r-${flag}`, { allowed_domains: "example.com", [flag]: true }), flag);
    }
  });
});
