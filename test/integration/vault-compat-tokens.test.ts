/**
 * The token endpoints Vault clients use (Vault API: /auth/token): lookup with the token
 * in the body or defaulting to the caller's, lookup-accessor, renew, revoke-accessor,
 * revoke-orphan, and token roles (auth/token/roles/:name, auth/token/create/:role_name), which
 * Terraform and cert-manager set-ups use.
 */
import { describe, expect, it } from "vitest";
import { api, del, list, read, tokenWithPolicy, write } from "../helpers/api";

const uid = () => crypto.randomUUID().slice(0, 6);

async function policy(text = 'path "secret/*" { capabilities = ["read"] }'): Promise<string> {
  const name = `p-${uid()}`;
  await write(`sys/policies/acl/${name}`, { policy: text }, {}, 204);
  return name;
}

describe("token lookup, renew and revoke as Vault clients call them", () => {
  it("lookup takes the token in the body, in the query, or defaults to the caller's", async () => {
    const t = (await write("auth/token/create", { ttl: "1h", display_name: "tf" })).body.auth;
    const body = await write("auth/token/lookup", { token: t.client_token });
    expect(body.body.data).toMatchObject({ id: t.client_token, accessor: t.accessor, display_name: "token-tf" });
    const query = await read(`auth/token/lookup?token=${encodeURIComponent(t.client_token)}`);
    expect(query.body.data.accessor).toBe(t.accessor);
    const self = await write("auth/token/lookup", {}, { token: t.client_token });
    expect(self.body.data.accessor).toBe(t.accessor);
  });

  it("lookup of an unknown token is 403 bad token", async () => {
    const r = await api("POST", "auth/token/lookup", { body: { token: "lys.nope" } });
    expect(r.status).toBe(403);
    expect(r.body.errors).toEqual(["bad token"]);
  });

  it("lookup-accessor answers with an empty id; renew and renew-self extend the TTL", async () => {
    const t = (await write("auth/token/create", { ttl: "1h" })).body.auth;
    const look = await write("auth/token/lookup-accessor", { accessor: t.accessor });
    expect(look.body.data).toMatchObject({ accessor: t.accessor, id: "" });
    const renewed = await write("auth/token/renew", { token: t.client_token, increment: "2h" });
    expect(renewed.body.auth.lease_duration).toBeGreaterThan(7000);
    const self = await write("auth/token/renew-self", { increment: "3h" }, { token: t.client_token });
    expect(self.body.auth.lease_duration).toBeGreaterThan(10000);
  });

  it("revoke-accessor of an unknown accessor is 200 with Vault's warning", async () => {
    const r = await write("auth/token/revoke-accessor", { accessor: "nope" });
    expect(r.body.warnings).toEqual(["No token found with this accessor"]);
    expect(r.body.data).toBeNull();
  });

  it("revoke-orphan revokes the token and keeps its children, as orphans", async () => {
    const parent = (await write("auth/token/create", { ttl: "1h" })).body.auth;
    const pol = await policy('path "auth/token/create" { capabilities = ["update"] }');
    const mid = (await write("auth/token/create", { ttl: "1h", policies: [pol] })).body.auth;
    const child = (await write("auth/token/create", { ttl: "30m" }, { token: mid.client_token })).body.auth;
    expect((await write("auth/token/lookup", { token: child.client_token })).body.data.orphan).toBe(false);
    await write("auth/token/revoke-orphan", { token: mid.client_token }, {}, 204);
    expect((await api("POST", "auth/token/lookup", { body: { token: mid.client_token } })).status).toBe(403);
    const after = await write("auth/token/lookup", { token: child.client_token });
    expect(after.body.data.orphan).toBe(true);
    expect((await write("auth/token/revoke-orphan", { token: "lys.gone" }, {}, 400)).body.errors).toEqual(["token to revoke not found"]);
    void parent;
  });

  it("revoke-orphan needs root or sudo", async () => {
    const token = await tokenWithPolicy('path "auth/token/revoke-orphan" { capabilities = ["update"] }');
    const victim = (await write("auth/token/create", { ttl: "1h" })).body.auth.client_token;
    const r = await api("POST", "auth/token/revoke-orphan", { token, body: { token: victim } });
    expect(r.status).toBe(400);
    expect(r.body.errors).toEqual(["root or sudo privileges required to revoke and orphan"]);
  });
});

describe("token roles", () => {
  it("writes, reads (token_* and legacy names), lists and deletes roles", async () => {
    const name = `role-${uid()}`;
    await write(`auth/token/roles/${name}`, { allowed_policies: "a,b", orphan: true, period: "1h", token_explicit_max_ttl: "24h", path_suffix: "ci" }, {}, 204);
    const r = await read(`auth/token/roles/${name}`);
    expect(r.body.data).toMatchObject({
      name,
      allowed_policies: ["a", "b"],
      disallowed_policies: [],
      orphan: true,
      renewable: true,
      path_suffix: "ci",
      token_period: 3600,
      period: 3600,
      token_explicit_max_ttl: 86400,
      explicit_max_ttl: 86400,
      token_type: "default-service",
    });
    // An update changes only what it sends.
    await write(`auth/token/roles/${name}`, { renewable: false }, {}, 204);
    expect((await read(`auth/token/roles/${name}`)).body.data).toMatchObject({ renewable: false, orphan: true, allowed_policies: ["a", "b"] });
    expect((await list("auth/token/roles")).body.data.keys).toContain(name);
    await del(`auth/token/roles/${name}`);
    await read(`auth/token/roles/${name}`, {}, 404);
    await del(`auth/token/roles/${name}`); // idempotent
  });

  it("ignores token_ttl and token_policies with the unrecognized-parameters warning, as Vault's roles do", async () => {
    const name = `role-${uid()}`;
    const r = await write(`auth/token/roles/${name}`, { token_ttl: "1h", token_policies: "x" });
    expect(r.body.warnings[0]).toBe("Endpoint ignored these unrecognized parameters: [token_policies token_ttl]");
  });

  it("refuses batch tokens, bound CIDRs and bad path suffixes", async () => {
    await write(`auth/token/roles/r${uid()}`, { token_type: "batch" }, {}, 400);
    await write(`auth/token/roles/r${uid()}`, { token_bound_cidrs: "10.0.0.0/8" }, {}, 400);
    await write(`auth/token/roles/r${uid()}`, { token_bound_cidrs: [] }, {}, 204);
    await write(`auth/token/roles/r${uid()}`, { path_suffix: "a/../b" }, {}, 400);
  });

  it("creates tokens from a role: its allowed policies, no parent-subset rule, limits from the role", async () => {
    const a = await policy();
    const b = await policy();
    const name = `role-${uid()}`;
    await write(`auth/token/roles/${name}`, { allowed_policies: [a, b], token_explicit_max_ttl: "2h", token_num_uses: 5, renewable: false }, {}, 204);
    // The creator holds neither policy: with a role the parent-subset rule does not apply.
    const creator = await tokenWithPolicy(`path "auth/token/create/${name}" { capabilities = ["update"] }`);
    const made = await api("POST", `auth/token/create/${name}`, { token: creator, body: { ttl: "10h" } });
    expect(made.status, JSON.stringify(made.body)).toBe(200);
    expect(made.body.auth.policies).toEqual([a, b, "default"].sort());
    expect(made.body.auth.renewable).toBe(false);
    expect(made.body.auth.num_uses).toBe(5);
    expect(made.body.auth.lease_duration).toBeLessThanOrEqual(7200);
    expect(made.body.auth.orphan).toBe(false);

    const only = await write(`auth/token/create/${name}`, { policies: [a] });
    expect(only.body.auth.policies).toEqual([a, "default"].sort());
    const outside = await write(`auth/token/create/${name}`, { policies: ["other"] }, {}, 400);
    expect(outside.body.errors[0]).toMatch(/^token policies \("\[\\"other\\"\]"\)|^token policies \(\["other"\]\) must be subset of the role's allowed policies/);
  });

  it("applies disallowed policies, orphan and period", async () => {
    const a = await policy();
    const name = `role-${uid()}`;
    await write(`auth/token/roles/${name}`, { disallowed_policies: "forbidden", orphan: true, token_period: "30m", token_no_default_policy: true }, {}, 204);
    const creator = await tokenWithPolicy(`path "auth/token/create/${name}" { capabilities = ["update"] }`);
    const bad = await api("POST", `auth/token/create/${name}`, { token: creator, body: { policies: ["forbidden"] } });
    expect(bad.status).toBe(400);
    expect(bad.body.errors).toEqual(['token policy "forbidden" is disallowed by this role']);
    const ok = await api("POST", `auth/token/create/${name}`, { token: creator, body: { policies: [a] } });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body.auth).toMatchObject({ policies: [a], orphan: true, renewable: true });
    expect(ok.body.auth.lease_duration).toBeGreaterThan(1700);
    expect(ok.body.auth.lease_duration).toBeLessThanOrEqual(1800);
    // Periodic: renewing brings the TTL back to the period.
    const renewed = await write("auth/token/renew", { token: ok.body.auth.client_token });
    expect(renewed.body.auth.lease_duration).toBeGreaterThan(1700);
  });

  it("a role without policy lists keeps the parent-subset rule; an unknown role is 400", async () => {
    const name = `role-${uid()}`;
    await write(`auth/token/roles/${name}`, { orphan: false }, {}, 204);
    const creator = await tokenWithPolicy(`path "auth/token/create/${name}" { capabilities = ["update"] }`);
    const r = await api("POST", `auth/token/create/${name}`, { token: creator, body: { policies: ["root"] } });
    expect(r.status).toBe(400);
    expect((await write("auth/token/create/no-such-role", {}, {}, 400)).body.errors).toEqual(["unknown role no-such-role"]);
  });

  it("roles live in their namespace and go with it", async () => {
    const ns = `ns${uid()}`;
    await write(`sys/namespaces/${ns}`, {});
    await write("auth/token/roles/inner", { orphan: true }, { namespace: ns }, 204);
    await read("auth/token/roles/inner", {}, 404);
    expect((await read("auth/token/roles/inner", { namespace: ns })).body.data.orphan).toBe(true);
    await del(`sys/namespaces/${ns}`);
    await write(`sys/namespaces/${ns}`, {});
    await read("auth/token/roles/inner", { namespace: ns }, 404);
  });
});
