/**
 * Security, third pass, auth and lease items: no login ever mints a `root` token (every role's
 * policy list refuses `root`, and a login whose stored role still holds it is refused, as Vault's
 * "auth methods cannot create root tokens"), token creation keeps Vault's root-parent rule, and a
 * lease renew or revoke acts only on a lease the ACL was checked for (the body may not name
 * another lease than the path; a lease named only in the body is checked as its path form).
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { api, read, tokenWithPolicy, write, type ApiResult } from "../helpers/api";
import { pkiWithRoot } from "../helpers/pki";

const uid = () => crypto.randomUUID().slice(0, 8);

function expectFieldError(r: ApiResult, field: string): void {
  expect(r.status, JSON.stringify(r.body)).toBe(400);
  const message = String(r.body.errors?.[0] ?? "");
  expect(message.startsWith(`${field}: `), message).toBe(true);
  expect(message).toContain("root");
}

async function tokenCount(): Promise<number> {
  return (await env.DB.prepare("SELECT count(*) AS n FROM tokens").first<{ n: number }>())?.n ?? 0;
}

describe("an auth-method role can never grant root", () => {
  let approle = "";
  let jwt = "";
  let kube = "";
  beforeAll(async () => {
    approle = `approle-${uid()}`;
    jwt = `jwt-${uid()}`;
    kube = `kube-${uid()}`;
    await write(`sys/auth/${approle}`, { type: "approle" }, {}, 204);
    await write(`sys/auth/${jwt}`, { type: "jwt" }, {}, 204);
    await write(`sys/auth/${kube}`, { type: "kubernetes" }, {}, 204);
  });

  it("the probe: a token that may only write AppRole roles cannot make a role with token_policies root", async () => {
    const writer = await tokenWithPolicy(`path "auth/${approle}/role/*" { capabilities = ["create", "update", "read"] }`);
    const name = `r-${uid()}`;
    expectFieldError(await api("POST", `auth/${approle}/role/${name}`, { token: writer, body: { token_policies: ["root"] } }), "token_policies");
    // Nothing was stored, so there is no RoleID to log in with.
    expect((await api("GET", `auth/${approle}/role/${name}`, { token: writer })).status).toBe(404);
    // Neither the legacy name, nor case, blanks or company make it through; the 400 names the field sent.
    expectFieldError(await api("POST", `auth/${approle}/role/${name}`, { token: writer, body: { policies: "web, ROOT " } }), "policies");
    expectFieldError(await api("POST", `auth/${approle}/role/${name}`, { token: writer, body: { token_policies: ["web", " Root"] } }), "token_policies");
    // Not even the root token may store such a role: its logins could never succeed.
    expectFieldError(await api("POST", `auth/${approle}/role/${name}`, { body: { token_policies: "root" } }), "token_policies");
  });

  it("an existing AppRole role cannot be updated to root, by the role or by its policies endpoint", async () => {
    const name = `r-${uid()}`;
    await write(`auth/${approle}/role/${name}`, { token_policies: "web" }, {}, 204);
    expectFieldError(await api("POST", `auth/${approle}/role/${name}`, { body: { token_policies: "root" } }), "token_policies");
    expectFieldError(await api("POST", `auth/${approle}/role/${name}/policies`, { body: { token_policies: "root" } }), "token_policies");
    expectFieldError(await api("POST", `auth/${approle}/role/${name}/policies`, { body: { policies: ["root"] } }), "policies");
    expect((await read(`auth/${approle}/role/${name}`)).body.data.token_policies).toEqual(["web"]);
  });

  it("JWT roles refuse root in token_policies and in the legacy policies", async () => {
    const base = { role_type: "jwt", user_claim: "sub", bound_subject: "svc-1" };
    expectFieldError(await api("POST", `auth/${jwt}/role/r1`, { body: { ...base, token_policies: "root" } }), "token_policies");
    expectFieldError(await api("POST", `auth/${jwt}/role/r1`, { body: { ...base, policies: ["app", "root"] } }), "policies");
    expect((await api("GET", `auth/${jwt}/role/r1`)).status).toBe(404);
  });

  it("Kubernetes roles refuse root in token_policies and in the legacy policies", async () => {
    const base = { bound_service_account_names: "app", bound_service_account_namespaces: "apps" };
    expectFieldError(await api("POST", `auth/${kube}/role/r1`, { body: { ...base, token_policies: "root" } }), "token_policies");
    expectFieldError(await api("POST", `auth/${kube}/role/r1`, { body: { ...base, policies: "root" } }), "policies");
    expect((await api("GET", `auth/${kube}/role/r1`)).status).toBe(404);
  });

  it("second wall: a role stored with root before the rule logs in to a 400, and no token is stored", async () => {
    const name = `r-${uid()}`;
    await write(`auth/${approle}/role/${name}`, { token_policies: "web" }, {}, 204);
    const roleId = (await read(`auth/${approle}/role/${name}/role-id`)).body.data.role_id as string;
    const secretId = (await write(`auth/${approle}/role/${name}/secret-id`, {})).body.data.secret_id as string;
    // As a row written before the rule existed (or by hand) would be.
    const changed = await env.DB.prepare("UPDATE auth_roles SET config = json_set(config, '$.token.policies', json('[\"root\"]')) WHERE name = ?")
      .bind(name)
      .run();
    expect(changed.meta.changes).toBe(1);
    const before = await tokenCount();
    const r = await api("POST", `auth/${approle}/login`, { token: null, body: { role_id: roleId, secret_id: secretId } });
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body.errors).toEqual(["auth methods cannot create root tokens"]);
    expect(r.text).not.toContain("client_token");
    expect(await tokenCount()).toBe(before);
  });
});

describe("token creation keeps Vault's root-parent rule (no way around it through roles)", () => {
  it("a non-root token cannot ask for root, directly, as an orphan or through any token role", async () => {
    const open = `open-${uid()}`;
    const glob = `glob-${uid()}`;
    // Roles only root may write (auth/token/roles/*); Vault lets them name root for root callers.
    await write(`auth/token/roles/${open}`, { allowed_policies: "root,web" }, {}, 204);
    await write(`auth/token/roles/${glob}`, { allowed_policies_glob: "*" }, {}, 204);
    const caller = await tokenWithPolicy(
      `path "auth/token/create" { capabilities = ["update", "sudo"] }\npath "auth/token/create-orphan" { capabilities = ["update", "sudo"] }\npath "auth/token/create/*" { capabilities = ["update", "sudo"] }`,
    );
    const before = await tokenCount();
    for (const path of ["auth/token/create", "auth/token/create-orphan", `auth/token/create/${open}`, `auth/token/create/${glob}`]) {
      const r = await api("POST", path, { token: caller, body: { policies: ["root"] } });
      expect(r.status, `${path}: ${JSON.stringify(r.body)}`).toBe(400);
    }
    // The role's own allowed_policies, taken when the request names none, are held to the same rule.
    const r = await api("POST", `auth/token/create/${open}`, { token: caller, body: {} });
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body.errors).toEqual(["root tokens may not be created without parent token being root"]);
    expect(await tokenCount()).toBe(before);
  });
});

describe("a lease renew or revoke acts only on the lease the ACL was checked for", () => {
  let pki = "";
  beforeAll(async () => {
    pki = (await pkiWithRoot()).path;
    for (const role of ["a", "b"]) {
      await write(`${pki}/roles/${role}`, { allow_any_name: true, key_type: "ec", max_ttl: "24h", generate_lease: true });
    }
  });

  async function lease(role: string): Promise<{ id: string; serial: string }> {
    const r = await write(`${pki}/issue/${role}`, { common_name: `${role}.example`, ttl: "1h" });
    return { id: r.body.lease_id as string, serial: r.body.data.serial_number as string };
  }

  async function stillLive(l: { id: string; serial: string }): Promise<void> {
    expect((await api("PUT", "sys/leases/lookup", { body: { lease_id: l.id } })).status).toBe(200);
    expect((await read(`${pki}/cert/${l.serial}`)).body.data.revocation_time).toBe(0);
  }

  it("the probe: a token allowed only a's leases cannot revoke b's by posting its own path with b's lease_id", async () => {
    const a = await lease("a");
    const b = await lease("b");
    const teamA = await tokenWithPolicy(`path "sys/leases/revoke/${pki}/issue/a/*" { capabilities = ["update"] }`);
    const r = await api("PUT", `sys/leases/revoke/${a.id}`, { token: teamA, body: { lease_id: b.id } });
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(String(r.body.errors?.[0])).toMatch(/^lease_id: /);
    await stillLive(b);
    await stillLive(a);
    // The same lease in both places is fine.
    expect((await api("PUT", `sys/leases/revoke/${a.id}`, { token: teamA, body: { lease_id: a.id } })).status).toBe(204);
  });

  it("the legacy sys/revoke, and sys/leases/renew and sys/renew, refuse a body naming another lease", async () => {
    const a = await lease("a");
    const b = await lease("b");
    const caller = await tokenWithPolicy(
      ["sys/revoke", "sys/leases/renew", "sys/renew"].map((p) => `path "${p}/${pki}/issue/a/*" { capabilities = ["update"] }`).join("\n"),
    );
    for (const base of ["sys/revoke", "sys/leases/renew", "sys/renew"]) {
      const r = await api("PUT", `${base}/${a.id}`, { token: caller, body: { lease_id: b.id } });
      expect(r.status, `${base}: ${JSON.stringify(r.body)}`).toBe(400);
      expect(String(r.body.errors?.[0]), base).toMatch(/^lease_id: /);
    }
    await stillLive(b);
  });

  it("a lease named only in the body is checked as the path form would be", async () => {
    const a = await lease("a");
    const b = await lease("b");
    // The bare paths are granted, as Vault's clients (hvac revoke_lease, renew_lease) post to them.
    const policy = ["sys/leases/revoke", "sys/revoke", "sys/leases/renew", "sys/renew"]
      .map((p) => `path "${p}" { capabilities = ["update"] }\npath "${p}/${pki}/issue/a/*" { capabilities = ["update"] }`)
      .join("\n");
    const teamA = await tokenWithPolicy(policy);
    for (const base of ["sys/leases/revoke", "sys/revoke", "sys/leases/renew", "sys/renew"]) {
      const r = await api("PUT", base, { token: teamA, body: { lease_id: b.id } });
      expect(r.status, `${base}: ${JSON.stringify(r.body)}`).toBe(403);
      // url_lease_id sent in the body is the body too.
      expect((await api("PUT", base, { token: teamA, body: { url_lease_id: b.id } })).status, base).toBe(403);
    }
    await stillLive(b);
    // Its own lease, in the body, still works: renew says why not, revoke revokes.
    const renew = await api("PUT", "sys/leases/renew", { token: teamA, body: { lease_id: a.id } });
    expect(renew.body.errors).toEqual(["lease is not renewable"]);
    expect((await api("PUT", "sys/leases/revoke", { token: teamA, body: { lease_id: a.id } })).status).toBe(204);
    expect((await read(`${pki}/cert/${a.serial}`)).body.data.revocation_time).toBeGreaterThan(0);
    // The root token may name any lease in the body, as in Vault.
    expect((await api("PUT", "sys/leases/revoke", { body: { lease_id: b.id } })).status).toBe(204);
    expect((await read(`${pki}/cert/${b.serial}`)).body.data.revocation_time).toBeGreaterThan(0);
  });

  it("revoke-prefix takes its prefix from the path only (a body prefix changes nothing)", async () => {
    const b = await lease("b");
    const sudoA = await tokenWithPolicy(`path "sys/leases/revoke-prefix/${pki}/issue/a" { capabilities = ["update", "sudo"] }`);
    const r = await api("PUT", `sys/leases/revoke-prefix/${pki}/issue/a`, { token: sudoA, body: { prefix: `${pki}/issue/b` } });
    // 200: the answer carries Vault's warning that the path's value replaced the body's.
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.warnings).toEqual(["Endpoint replaced the value of these parameters with the values captured from the endpoint's path: [prefix]"]);
    await stillLive(b);
  });
});
