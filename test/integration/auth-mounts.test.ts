/**
 * sys/auth and what every auth method shares: enabling, listing, reading, tuning and
 * disabling auth mounts per namespace with Vault's shapes and sudo rules; login tokens' TTLs from
 * the role and the mount's tuned TTLs, renewal within them, periodic tokens; token_bound_cidrs
 * judged by CF-Connecting-IP only; disabling a mount or deleting a role stops its tokens. AppRole
 * is the method used to log in here; each method has its own file.
 */
import { describe, expect, it } from "vitest";
import { api, del, list, read, tokenWithPolicy, write } from "../helpers/api";

const uid = () => crypto.randomUUID().slice(0, 8);

async function enableApprole(opts: { namespace?: string; config?: Record<string, unknown> } = {}): Promise<string> {
  const path = `approle-${uid()}`;
  await write(`sys/auth/${path}`, { type: "approle", description: "machines", config: opts.config }, { namespace: opts.namespace }, 204);
  return path;
}

/** Creates a role and logs in once; returns the login answer. */
async function login(path: string, role: Record<string, unknown>, opts: { namespace?: string; headers?: Record<string, string> } = {}) {
  const name = `r${uid()}`;
  await write(`auth/${path}/role/${name}`, role, { namespace: opts.namespace }, 204);
  const roleId = (await read(`auth/${path}/role/${name}/role-id`, { namespace: opts.namespace })).body.data.role_id as string;
  const secretId = (await write(`auth/${path}/role/${name}/secret-id`, {}, { namespace: opts.namespace })).body.data.secret_id as string;
  const r = await api("POST", `auth/${path}/login`, { token: null, namespace: opts.namespace, headers: opts.headers, body: { role_id: roleId, secret_id: secretId } });
  return { name, roleId, secretId, res: r };
}

describe("sys/auth", () => {
  it("lists token/ and enabled methods with Vault's mountInfo, reads one, and refuses bad enables", async () => {
    const path = await enableApprole({ config: { default_lease_ttl: "1h", max_lease_ttl: "2h" } });
    const all = await read("sys/auth");
    expect(all.body.data["token/"]).toMatchObject({ type: "token" });
    expect(all.body.data["token/"].accessor).toMatch(/^auth_token_[0-9a-f]{8}$/);
    const mine = all.body.data[`${path}/`];
    expect(mine).toMatchObject({ type: "approle", description: "machines", config: { default_lease_ttl: 3600, max_lease_ttl: 7200, token_type: "default-service" } });
    expect(mine.accessor).toMatch(/^auth_approle_[0-9a-f]{8}$/);
    expect(all.body[`${path}/`]).toEqual(mine); // Vault copies the table to the top level too
    expect((await read(`sys/auth/${path}`)).body.data.accessor).toBe(mine.accessor);
    // sys/mounts lists secrets engines only; the UI's mount list has auth mounts under `auth`.
    expect((await read("sys/mounts")).body.data[`auth/${path}/`]).toBeUndefined();
    const ui = await read("sys/internal/ui/mounts");
    expect(ui.body.data.auth[`${path}/`]).toMatchObject({ type: "approle", accessor: mine.accessor });
    expect(ui.body.data.auth["token/"].accessor).toBe(all.body.data["token/"].accessor);
    expect(ui.body.data.secret[`auth/${path}/`]).toBeUndefined();

    expect((await api("POST", `sys/auth/${path}`, { body: { type: "approle" } })).body.errors).toEqual([`path is already in use at ${path}/`]);
    expect((await api("POST", `sys/auth/${path}/nested`, { body: { type: "approle" } })).status).toBe(400);
    expect((await api("POST", "sys/auth/token", { body: { type: "approle" } })).body.errors).toEqual(["path is already in use at token/"]);
    expect((await api("POST", `sys/auth/x${uid()}`, { body: {} })).body.errors).toEqual(["backend type must be specified as a string"]);
    const unknown = await api("POST", `sys/auth/x${uid()}`, { body: { type: "ldap" } });
    expect(unknown.status).toBe(400);
    expect(unknown.body.errors[0]).toContain('unknown auth method type "ldap"');
    expect((await api("POST", `sys/auth/x${uid()}`, { body: { type: "approle", config: { default_lease_ttl: "3h", max_lease_ttl: "1h" } } })).body.errors).toEqual([
      "given default lease TTL greater than given max lease TTL",
    ]);
    expect((await api("GET", `sys/auth/nothing-${uid()}`)).status).toBe(400);
  });

  it("enable, read, tune and disable need sudo; the list does not", async () => {
    const path = await enableApprole();
    const noSudo = await tokenWithPolicy(`path "sys/auth" { capabilities = ["read"] }\npath "sys/auth/*" { capabilities = ["create", "read", "update", "delete"] }`);
    expect((await api("GET", "sys/auth", { token: noSudo })).status).toBe(200);
    expect((await api("GET", `sys/auth/${path}`, { token: noSudo })).status).toBe(403);
    expect((await api("POST", `sys/auth/y${uid()}`, { token: noSudo, body: { type: "approle" } })).status).toBe(403);
    expect((await api("POST", `sys/auth/${path}/tune`, { token: noSudo, body: { max_lease_ttl: "1h" } })).status).toBe(403);
    expect((await api("DELETE", `sys/auth/${path}`, { token: noSudo })).status).toBe(403);
    const sudo = await tokenWithPolicy(`path "sys/auth/*" { capabilities = ["create", "read", "update", "delete", "sudo"] }`);
    await write(`sys/auth/y${uid()}`, { type: "approle" }, { token: sudo }, 204);
  });

  it("`vault auth tune` reaches the auth mount through sys/mounts/auth/<path>/tune, with sudo", async () => {
    // The vault CLI's `auth tune` calls TuneMount("auth/" + path), that is sys/mounts/auth/<path>/tune.
    const path = await enableApprole();
    await write(`sys/mounts/auth/${path}/tune`, { default_lease_ttl: "20m", max_lease_ttl: "40m", description: "tuned" }, {}, 204);
    expect((await read(`sys/auth/${path}/tune`)).body.data).toMatchObject({ default_lease_ttl: 1200, max_lease_ttl: 2400, description: "tuned" });
    expect((await read(`sys/mounts/auth/${path}/tune`)).body.data).toMatchObject({ default_lease_ttl: 1200, max_lease_ttl: 2400 });
    const { res } = await login(path, { token_policies: "default" });
    expect(res.body.auth.lease_duration).toBe(1200);
    const noSudo = await tokenWithPolicy(`path "sys/mounts/*" { capabilities = ["read", "update"] }`);
    expect((await api("POST", `sys/mounts/auth/${path}/tune`, { token: noSudo, body: { max_lease_ttl: "1h" } })).status).toBe(403);
    expect((await api("POST", `sys/mounts/auth/nothing-${uid()}/tune`, { body: { max_lease_ttl: "1h" } })).status).toBe(400);
  });

  it("tune changes the TTLs login tokens get; renewal stays within them", async () => {
    const path = await enableApprole();
    await write(`sys/auth/${path}/tune`, { default_lease_ttl: "30m", max_lease_ttl: "1h" }, {}, 204);
    const tuned = await read(`sys/auth/${path}/tune`);
    expect(tuned.body.data).toMatchObject({ default_lease_ttl: 1800, max_lease_ttl: 3600 });
    const { res } = await login(path, { token_policies: "default" });
    expect(res.status).toBe(200);
    expect(res.body.auth.lease_duration).toBe(1800);
    expect(res.body.auth.renewable).toBe(true);
    const renewed = await write("auth/token/renew-self", { increment: "5h" }, { token: res.body.auth.client_token });
    expect(renewed.body.auth.lease_duration).toBeLessThanOrEqual(3600);
    expect(renewed.body.auth.lease_duration).toBeGreaterThan(3500);

    // The role's token_ttl / token_max_ttl win inside the mount's maximum.
    const role = await login(path, { token_ttl: "10m", token_max_ttl: "20m" });
    expect(role.res.body.auth.lease_duration).toBe(600);
    const r2 = await write("auth/token/renew-self", { increment: "1h" }, { token: role.res.body.auth.client_token });
    expect(r2.body.auth.lease_duration).toBeLessThanOrEqual(1200);
  });

  it("a periodic role's tokens live one period and renew by it; policies get default unless refused", async () => {
    const path = await enableApprole();
    const { res } = await login(path, { token_period: "15m", token_policies: ["b", "a"] });
    expect(res.body.auth.lease_duration).toBe(900);
    expect(res.body.auth.policies).toEqual(["a", "b", "default"]);
    const look = await read("auth/token/lookup-self", { token: res.body.auth.client_token });
    expect(look.body.data).toMatchObject({ period: 900, path: `auth/${path}/login`, orphan: true });
    const r = await write("auth/token/renew-self", {}, { token: res.body.auth.client_token });
    expect(r.body.auth.lease_duration).toBe(900);
    const noDefault = await login(path, { policies: "a", token_no_default_policy: true });
    expect(noDefault.res.body.auth.policies).toEqual(["a"]);
    expect(noDefault.res.body.auth.token_policies).toEqual(["a"]);
  });

  it("token_bound_cidrs: the token works only from inside them, judged by CF-Connecting-IP alone", async () => {
    const path = await enableApprole();
    const inside = { "cf-connecting-ip": "10.1.2.3" };
    const { res } = await login(path, { token_bound_cidrs: "10.1.0.0/16" }, { headers: inside });
    expect(res.status).toBe(200);
    const token = res.body.auth.client_token as string;
    expect((await api("GET", "auth/token/lookup-self", { token, headers: inside })).status).toBe(200);
    expect((await api("GET", "auth/token/lookup-self", { token, headers: { "cf-connecting-ip": "192.0.2.1" } })).status).toBe(403);
    expect((await api("GET", "auth/token/lookup-self", { token, headers: { "x-forwarded-for": "10.1.2.3", "x-real-ip": "10.1.2.3" } })).status).toBe(403);
    // Logging in from outside the token CIDRs is refused outright.
    const outside = await login(path, { token_bound_cidrs: "10.1.0.0/16" }, { headers: { "cf-connecting-ip": "192.0.2.1" } });
    expect(outside.res.status).toBe(403);
    expect((await api("POST", `auth/${path}/role/bad`, { body: { token_bound_cidrs: "10.1.0.0/33" } })).status).toBe(400);
  });

  it("hvac 0.11's legacy names and comma strings are accepted; both names of one setting are refused", async () => {
    const path = await enableApprole();
    await write(`auth/${path}/role/legacy`, { policies: "p1,p2", period: "1h", num_uses: 3 }, {}, 204);
    const r = await read(`auth/${path}/role/legacy`);
    expect(r.body.data).toMatchObject({ token_policies: ["p1", "p2"], token_period: 3600, token_num_uses: 3, policies: ["p1", "p2"] });
    const both = await api("POST", `auth/${path}/role/legacy`, { body: { policies: "a", token_policies: "b" } });
    expect(both.body.errors).toEqual(['cannot specify both "token_policies" and "policies"']);
    const ttl = await api("POST", `auth/${path}/role/legacy`, { body: { token_ttl: "2h", token_max_ttl: "1h" } });
    expect(ttl.body.errors).toEqual(["'token_ttl' cannot be greater than 'token_max_ttl'"]);
  });

  it("disabling the mount revokes every token it issued (and their children) and removes its roles", async () => {
    const path = await enableApprole();
    const maker = `maker-${uid()}`;
    await write(`sys/policies/acl/${maker}`, { policy: 'path "auth/token/create" { capabilities = ["update"] }' }, {}, 204);
    const { res } = await login(path, { token_policies: maker });
    const token = res.body.auth.client_token as string;
    const child = (await write("auth/token/create", { policies: ["default"] }, { token })).body.auth.client_token as string;
    expect((await api("GET", "auth/token/lookup-self", { token: child })).status).toBe(200);
    await del(`sys/auth/${path}`);
    expect((await api("GET", "auth/token/lookup-self", { token })).status).toBe(403);
    expect((await api("GET", "auth/token/lookup-self", { token: child })).status).toBe(403);
    expect((await read("sys/auth")).body.data[`${path}/`]).toBeUndefined();
    expect((await api("GET", `auth/${path}/role`, {})).status).toBe(404);
    // Re-enabled at the same path, nothing of the old mount is there.
    await write(`sys/auth/${path}`, { type: "approle" }, {}, 204);
    expect((await list(`auth/${path}/role`, {}, 404)).status).toBe(404);
    await del(`sys/auth/${path}`);
    await del(`sys/auth/${path}`); // Vault: 204 even when nothing is mounted
  });

  it("deleting a role stops the tokens issued through it", async () => {
    const path = await enableApprole();
    const a = await login(path, {});
    const b = await login(path, {});
    await del(`auth/${path}/role/${a.name}`);
    expect((await api("GET", "auth/token/lookup-self", { token: a.res.body.auth.client_token })).status).toBe(403);
    expect((await api("GET", "auth/token/lookup-self", { token: b.res.body.auth.client_token })).status).toBe(200);
  });

  it("no login racing a role delete or a mount disable leaves a working token behind", async () => {
    for (const target of ["role", "mount"] as const) {
      const path = await enableApprole();
      await write(`auth/${path}/role/racer`, { secret_id_num_uses: 0 }, {}, 204);
      const roleId = (await read(`auth/${path}/role/racer/role-id`)).body.data.role_id as string;
      const secretId = (await write(`auth/${path}/role/racer/secret-id`, {})).body.data.secret_id as string;
      const logins = Array.from({ length: 12 }, () => api("POST", `auth/${path}/login`, { token: null, body: { role_id: roleId, secret_id: secretId } }));
      const removal = target === "role" ? api("DELETE", `auth/${path}/role/racer`) : api("DELETE", `sys/auth/${path}`);
      const [answers, removed] = await Promise.all([Promise.all(logins), removal]);
      expect(removed.status).toBe(204);
      // Each login either failed or got a token; no token that was handed out still works.
      for (const a of answers) expect([200, 400, 403, 404, 409]).toContain(a.status);
      const tokens = answers.filter((a) => a.status === 200).map((a) => a.body.auth.client_token as string);
      const looks = await Promise.all(tokens.map((token) => api("GET", "auth/token/lookup-self", { token })));
      expect(looks.map((l) => l.status), `${target}: ${tokens.length} tokens issued`).toEqual(tokens.map(() => 403));
    }
  });

  it("auth mounts are per namespace: another namespace neither sees nor reaches them", async () => {
    const ns = `team${uid()}`;
    await write(`sys/namespaces/${ns}`, {}, {}, 200);
    const path = await enableApprole({ namespace: ns });
    expect((await read("sys/auth", { namespace: ns })).body.data[`${path}/`]).toBeDefined();
    expect((await read("sys/auth")).body.data[`${path}/`]).toBeUndefined();
    const { res } = await login(path, {}, { namespace: ns });
    expect(res.status).toBe(200);
    const token = res.body.auth.client_token as string;
    expect((await api("GET", "auth/token/lookup-self", { token, namespace: ns })).body.data.namespace_path).toBe(`${ns}/`);
    // The token is of that namespace: the root namespace's paths are not its to use.
    expect((await api("GET", "sys/auth", { token })).status).toBe(403);
    // The same login path in the root namespace does not exist.
    expect((await api("POST", `auth/${path}/login`, { token: null, body: { role_id: "x", secret_id: "y" } })).status).not.toBe(200);
    const nsDelete = await api("DELETE", `sys/namespaces/${ns}`);
    expect(nsDelete.status).toBe(400);
    await del(`sys/auth/${path}`, { namespace: ns });
  });
});
