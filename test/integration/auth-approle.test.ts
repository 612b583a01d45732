/**
 * AppRole (Vault API: /auth/approle) through the Worker, as hvac 0.11 and the Vault CLI
 * use it: role CRUD (comma strings and legacy names), RoleIDs, SecretIDs (generate with metadata
 * as a JSON string or a map, custom, list, lookup and destroy by value and by accessor, tidy),
 * login with Vault's checks and messages, use limits under 20 concurrent logins, strict expiry,
 * CIDR bindings judged by CF-Connecting-IP only, and deleting a role stopping its tokens. No
 * answer but the generate response may carry a SecretID.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { api, type ApiResult, list, read, write } from "../helpers/api";

const uid = () => crypto.randomUUID().slice(0, 8);
let path = "";
const INVALID = { errors: ["invalid role or secret ID"] };

beforeAll(async () => {
  path = `approle-${uid()}`;
  await write(`sys/auth/${path}`, { type: "approle" }, {}, 204);
});

/** Creates a role (204) and returns its name and RoleID. */
async function newRole(body: Record<string, unknown> = {}): Promise<{ name: string; roleId: string }> {
  const name = `role-${uid()}`;
  await write(`auth/${path}/role/${name}`, body, {}, 204);
  const roleId = (await read(`auth/${path}/role/${name}/role-id`)).body.data.role_id as string;
  return { name, roleId };
}

async function newSecret(role: string, body: Record<string, unknown> = {}): Promise<{ secretId: string; accessor: string; res: ApiResult }> {
  const res = await write(`auth/${path}/role/${role}/secret-id`, body);
  return { secretId: res.body.data.secret_id as string, accessor: res.body.data.secret_id_accessor as string, res };
}

const login = (body: Record<string, unknown>, headers: Record<string, string> = {}) => api("POST", `auth/${path}/login`, { token: null, body, headers });

describe("AppRole roles", () => {
  it("creates with Vault's defaults, takes hvac's comma strings and legacy names, and never reads the RoleID", async () => {
    const { name, roleId } = await newRole({ policies: "web,Ops", secret_id_ttl: "10m", token_ttl: "1h", token_max_ttl: "2h" });
    expect(roleId).toMatch(/^[0-9a-f-]{36}$/);
    const r = await read(`auth/${path}/role/${name}`);
    expect(r.body.data).toMatchObject({
      bind_secret_id: true,
      secret_id_bound_cidrs: null,
      secret_id_num_uses: 0,
      secret_id_ttl: 600,
      local_secret_ids: false,
      token_policies: ["ops", "web"],
      policies: ["ops", "web"],
      token_ttl: 3600,
      token_max_ttl: 7200,
      token_bound_cidrs: [],
      token_type: "default",
    });
    expect(r.text).not.toContain(roleId);

    // An update changes only what it sends.
    await write(`auth/${path}/role/${name}`, { secret_id_num_uses: 3, bound_cidr_list: "10.0.0.0/8, 192.168.0.0/16" }, {}, 204);
    const after = (await read(`auth/${path}/role/${name}`)).body.data;
    expect(after).toMatchObject({ secret_id_num_uses: 3, secret_id_ttl: 600, token_policies: ["ops", "web"], secret_id_bound_cidrs: ["10.0.0.0/8", "192.168.0.0/16"] });
    // The RoleID survives updates.
    expect((await read(`auth/${path}/role/${name}/role-id`)).body.data.role_id).toBe(roleId);

    expect((await list(`auth/${path}/role`)).body.data.keys).toContain(name);
    // Names are stored lower-case.
    expect((await read(`auth/${path}/role/${name.toUpperCase()}`)).body.data.secret_id_num_uses).toBe(3);
  });

  it("refuses bad settings with 400 naming the problem", async () => {
    const { name } = await newRole();
    const bad = async (body: Record<string, unknown>, message: string | RegExp, role = name) => {
      const r = await api("POST", `auth/${path}/role/${role}`, { body });
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.errors[0]).toMatch(message);
    };
    await bad({ local_secret_ids: true }, "local_secret_ids can only be modified during role creation");
    await bad({ secret_id_num_uses: -1 }, "secret_id_num_uses cannot be negative");
    await bad({ secret_id_bound_cidrs: "10.0.0.0/33" }, /^secret_id_bound_cidrs: invalid CIDR block/);
    await bad({ bind_secret_id: false }, /^at least one constraint should be enabled on the role: bind_secret_id/);
    await bad({ bind_secret_id: false }, /at least one constraint/, `new-${uid()}`);
    await bad({ token_policies: "a", policies: "b" }, 'cannot specify both "token_policies" and "policies"');
    // A role bound by addresses alone is fine.
    await newRole({ bind_secret_id: false, secret_id_bound_cidrs: "10.0.0.0/8" });
  });

  it("role-id: reads, sets a custom one, refuses empty and duplicate RoleIDs", async () => {
    const a = await newRole();
    const b = await newRole({ role_id: `custom-${uid()}` });
    expect(b.roleId).toMatch(/^custom-/);
    const mine = `id-${uid()}`;
    await write(`auth/${path}/role/${a.name}/role-id`, { role_id: mine }, {}, 204);
    expect((await read(`auth/${path}/role/${a.name}/role-id`)).body.data.role_id).toBe(mine);
    expect((await api("POST", `auth/${path}/role/${a.name}/role-id`, { body: { role_id: "" } })).body).toEqual({ errors: ["missing role_id"] });
    const dup = await api("POST", `auth/${path}/role/${a.name}/role-id`, { body: { role_id: b.roleId } });
    expect(dup.status).toBe(400);
    expect(dup.body.errors).toEqual(["role_id already in use"]);
    expect((await api("GET", `auth/${path}/role/nope-${uid()}/role-id`)).status).toBe(404);
  });

  it("single-field endpoints read, set and reset one setting", async () => {
    const { name } = await newRole({ token_ttl: 300 });
    const base = `auth/${path}/role/${name}`;
    expect((await read(`${base}/token-ttl`)).body.data).toEqual({ token_ttl: 300 });
    await write(`${base}/token-ttl`, { token_ttl: "15m" }, {}, 204);
    expect((await read(`${base}/token-ttl`)).body.data).toEqual({ token_ttl: 900 });
    expect((await api("POST", `${base}/token-ttl`, { body: {} })).body).toEqual({ errors: ["missing token_ttl"] });
    await api("DELETE", `${base}/token-ttl`);
    expect((await read(`${base}/token-ttl`)).body.data).toEqual({ token_ttl: 0 });

    await write(`${base}/policies`, { token_policies: "a,b" }, {}, 204);
    expect((await read(`${base}/policies`)).body.data).toMatchObject({ token_policies: ["a", "b"] });
    await write(`${base}/secret-id-num-uses`, { secret_id_num_uses: 5 }, {}, 204);
    expect((await read(`${base}/secret-id-num-uses`)).body.data).toEqual({ secret_id_num_uses: 5 });
    expect((await read(`${base}/local-secret-ids`)).body.data).toEqual({ local_secret_ids: false });
    const legacy = await read(`${base}/bound-cidr-list`);
    expect(legacy.body.warnings[0]).toContain('"bound_cidr_list" field is deprecated');

    // Turning bind_secret_id off needs an address binding first.
    expect((await api("POST", `${base}/bind-secret-id`, { body: { bind_secret_id: false } })).status).toBe(400);
    await write(`${base}/secret-id-bound-cidrs`, { secret_id_bound_cidrs: "10.0.0.0/8" }, {}, 204);
    await write(`${base}/bind-secret-id`, { bind_secret_id: false }, {}, 204);
    expect((await read(`${base}/bind-secret-id`)).body.data).toEqual({ bind_secret_id: false });
    // …and the binding cannot then be removed.
    expect((await api("DELETE", `${base}/secret-id-bound-cidrs`)).status).toBe(400);

    expect((await api("POST", `auth/${path}/role/nope-${uid()}/token-ttl`, { body: { token_ttl: 1 } })).status).toBe(404);
    expect((await api("GET", `auth/${path}/role/nope-${uid()}/token-ttl`)).status).toBe(404);
  });

  it("role paths need a token with the right policy; login needs none", async () => {
    const { name } = await newRole();
    expect((await api("GET", `auth/${path}/role/${name}`, { token: null })).status).toBe(403);
    expect((await api("POST", `auth/${path}/role/${name}/secret-id`, { token: null, body: {} })).status).toBe(403);
    expect((await login({})).body).toEqual({ errors: ["missing role_id"] });
  });
});

describe("AppRole SecretIDs", () => {
  it("generates UUIDs with the role's limits; metadata as hvac's JSON string, a map or k=v pairs", async () => {
    const { name } = await newRole({ secret_id_num_uses: 5, secret_id_ttl: "1h" });
    const { secretId, accessor, res } = await newSecret(name, { metadata: JSON.stringify({ host: "web-1", env: "prod" }), cidr_list: "10.0.0.0/8,192.168.1.0/24" });
    expect(secretId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(res.body.data).toEqual({ secret_id: secretId, secret_id_accessor: accessor, secret_id_ttl: 3600, secret_id_num_uses: 5 });

    const looked = await write(`auth/${path}/role/${name}/secret-id/lookup`, { secret_id: secretId });
    expect(looked.body.data).toMatchObject({
      secret_id_accessor: accessor,
      secret_id_num_uses: 5,
      secret_id_ttl: 3600,
      metadata: { host: "web-1", env: "prod" },
      cidr_list: ["10.0.0.0/8", "192.168.1.0/24"],
      token_bound_cidrs: [],
    });
    const created = Date.parse(looked.body.data.creation_time);
    expect(Date.parse(looked.body.data.expiration_time) - created).toBe(3600_000);
    const byAccessor = await write(`auth/${path}/role/${name}/secret-id-accessor/lookup`, { secret_id_accessor: accessor });
    expect(byAccessor.body.data).toEqual(looked.body.data);

    const asMap = await newSecret(name, { metadata: { team: "core", n: 3 }, num_uses: 2, ttl: 60 });
    expect(asMap.res.body.data).toMatchObject({ secret_id_num_uses: 2, secret_id_ttl: 60 });
    const mapLookup = await write(`auth/${path}/role/${name}/secret-id/lookup`, { secret_id: asMap.secretId });
    expect(mapLookup.body.data.metadata).toEqual({ team: "core", n: "3" });
    const pairs = await newSecret(name, { metadata: "a=1, b=2" });
    expect((await write(`auth/${path}/role/${name}/secret-id/lookup`, { secret_id: pairs.secretId })).body.data.metadata).toEqual({ a: "1", b: "2" });

    // Vault also takes the JSON base64-encoded.
    const b64 = await newSecret(name, { metadata: btoa(JSON.stringify({ zone: "eu" })) });
    expect((await write(`auth/${path}/role/${name}/secret-id/lookup`, { secret_id: b64.secretId })).body.data.metadata).toEqual({ zone: "eu" });

    const keys = (await list(`auth/${path}/role/${name}/secret-id`)).body.data.keys as string[];
    expect(keys.sort()).toEqual([accessor, asMap.accessor, pairs.accessor, b64.accessor].sort());
  });

  it("refuses what exceeds the role, with Vault's messages", async () => {
    const { name } = await newRole({ secret_id_num_uses: 3, secret_id_ttl: "10m", secret_id_bound_cidrs: "10.0.0.0/8", token_bound_cidrs: "10.1.0.0/16" });
    const bad = async (body: Record<string, unknown>, message: string | RegExp, status = 400, role = name) => {
      const r = await api("POST", `auth/${path}/role/${role}/secret-id`, { body });
      expect(r.status, JSON.stringify(r.body)).toBe(status);
      expect(r.body.errors[0]).toMatch(message);
    };
    await bad({ num_uses: -1 }, "num_uses cannot be negative");
    await bad({ num_uses: 4 }, "num_uses cannot be higher than the role's secret_id_num_uses");
    await bad({ num_uses: 0 }, "num_uses cannot be higher than the role's secret_id_num_uses");
    await bad({ ttl: "11m" }, "ttl cannot be longer than the role's secret_id_ttl");
    await bad({ cidr_list: "192.168.0.0/24" }, /^cidr_list: failed to verify subset relationship between CIDR blocks on the role \[10\.0\.0\.0\/8\]/);
    await bad({ token_bound_cidrs: "10.2.0.0/16" }, /^token_bound_cidrs: failed to verify subset relationship/);
    await bad({ cidr_list: "nonsense" }, /^cidr_list: invalid CIDR block/);
    await bad({ metadata: '{"a": 1}' }, /^failed to parse metadata/);
    await bad({ metadata: "novalue" }, /^failed to parse metadata/);
    await bad({}, `role "nope" does not exist`, 404, "nope");
    const unbound = await newRole({ bind_secret_id: false, secret_id_bound_cidrs: "10.0.0.0/8" });
    await bad({}, "bind_secret_id is not set on the role", 400, unbound.name);
    expect((await api("GET", `auth/${path}/role/nope/secret-id?list=true`)).body).toEqual({ errors: ['role "nope" does not exist'] });
  });

  it("custom SecretIDs work once registered and cannot be registered twice", async () => {
    const { name, roleId } = await newRole();
    const custom = `my-own-secret-${uid()}`;
    const r = await write(`auth/${path}/role/${name}/custom-secret-id`, { secret_id: custom });
    expect(r.body.data.secret_id).toBe(custom);
    expect((await api("POST", `auth/${path}/role/${name}/custom-secret-id`, { body: { secret_id: custom } })).body).toEqual({ errors: ["SecretID is already registered"] });
    expect((await api("POST", `auth/${path}/role/${name}/custom-secret-id`, { body: {} })).body).toEqual({ errors: ["missing secret_id"] });
    expect((await login({ role_id: roleId, secret_id: custom })).status).toBe(200);
  });

  it("lookup and destroy by value and by accessor, with Vault's answers for unknown ones", async () => {
    const { name, roleId } = await newRole();
    const a = await newSecret(name);
    const b = await newSecret(name);
    const base = `auth/${path}/role/${name}`;
    expect((await api("POST", `${base}/secret-id/lookup`, { body: { secret_id: crypto.randomUUID() } })).status).toBe(204);
    const unknownAccessor = await api("POST", `${base}/secret-id-accessor/lookup`, { body: { secret_id_accessor: "nope" } });
    expect(unknownAccessor.status).toBe(404);
    expect(unknownAccessor.body.data).toEqual({ error: 'failed to find accessor entry for secret_id_accessor: "nope"' });
    expect(unknownAccessor.body.errors).toBeUndefined();
    expect((await api("POST", `${base}/secret-id/lookup`, { body: {} })).body).toEqual({ errors: ["missing secret_id"] });

    await write(`${base}/secret-id/destroy`, { secret_id: a.secretId }, {}, 204);
    expect((await api("POST", `${base}/secret-id/lookup`, { body: { secret_id: a.secretId } })).status).toBe(204);
    expect((await login({ role_id: roleId, secret_id: a.secretId })).body).toEqual(INVALID);

    await write(`${base}/secret-id-accessor/destroy`, { secret_id_accessor: b.accessor }, {}, 204);
    expect((await login({ role_id: roleId, secret_id: b.secretId })).body).toEqual(INVALID);
    const again = await api("POST", `${base}/secret-id-accessor/destroy`, { body: { secret_id_accessor: b.accessor } });
    expect(again.status).toBe(403);
    expect(again.body.errors).toEqual(["invalid secret id accessor"]);
    expect((await api("GET", `${base}/secret-id?list=true`)).status).toBe(404);
  });
});

describe("AppRole login", () => {
  it("issues a working token with the role's policies, TTL and the SecretID's metadata", async () => {
    const { name, roleId } = await newRole({ token_policies: "web", token_ttl: "10m", token_max_ttl: "20m", token_num_uses: 0 });
    const { secretId } = await newSecret(name, { metadata: JSON.stringify({ host: "web-1", role_name: "spoofed" }) });
    const r = await login({ role_id: roleId, secret_id: secretId });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.data).toBeNull();
    expect(r.body.auth).toMatchObject({
      policies: ["default", "web"],
      token_policies: ["default", "web"],
      metadata: { role_name: name, host: "web-1" },
      lease_duration: 600,
      renewable: true,
      orphan: true,
    });
    const token = r.body.auth.client_token as string;
    const self = await read("auth/token/lookup-self", { token });
    expect(self.body.data).toMatchObject({ path: `auth/${path}/login`, meta: { role_name: name, host: "web-1" }, display_name: path, orphan: true });
    expect(self.body.data.ttl).toBeGreaterThan(590);
    expect(r.text).not.toContain(secretId);
  });

  it("answers Vault's messages for missing and wrong credentials, never echoing the SecretID", async () => {
    const { name, roleId } = await newRole();
    const other = await newRole();
    const { secretId } = await newSecret(name);
    const otherSecret = await newSecret(other.name);
    const wrong = crypto.randomUUID();
    const cases: [Record<string, unknown>, unknown][] = [
      [{ secret_id: secretId }, { errors: ["missing role_id"] }],
      [{ role_id: "  ", secret_id: secretId }, { errors: ["missing role_id"] }],
      [{ role_id: `nope-${uid()}`, secret_id: secretId }, INVALID],
      [{ role_id: roleId }, { errors: ["missing secret_id"] }],
      [{ role_id: roleId, secret_id: wrong }, INVALID],
      [{ role_id: roleId, secret_id: otherSecret.secretId }, INVALID],
      [{ role_id: other.roleId, secret_id: secretId }, INVALID],
      [{ role_id: roleId, secret_id: "x".repeat(5000) }, INVALID],
    ];
    for (const [body, expected] of cases) {
      const r = await login(body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(r.body).toEqual(expected);
      expect(r.text).not.toContain(secretId);
      expect(r.text).not.toContain(wrong);
    }
    // The right pair still works (failures spend nothing).
    expect((await login({ role_id: roleId, secret_id: secretId })).status).toBe(200);
  });

  it("counts SecretID uses down and deletes the SecretID after its last one", async () => {
    const { name, roleId } = await newRole({ secret_id_num_uses: 2 });
    const { secretId, accessor } = await newSecret(name);
    expect((await login({ role_id: roleId, secret_id: secretId })).status).toBe(200);
    const mid = await write(`auth/${path}/role/${name}/secret-id-accessor/lookup`, { secret_id_accessor: accessor });
    expect(mid.body.data.secret_id_num_uses).toBe(1);
    expect((await login({ role_id: roleId, secret_id: secretId })).status).toBe(200);
    expect((await login({ role_id: roleId, secret_id: secretId })).body).toEqual(INVALID);
    expect((await api("POST", `auth/${path}/role/${name}/secret-id-accessor/lookup`, { body: { secret_id_accessor: accessor } })).status).toBe(404);
  });

  it("20 concurrent logins with a single-use SecretID give exactly one token", async () => {
    const { name, roleId } = await newRole({ secret_id_num_uses: 1 });
    const { secretId } = await newSecret(name);
    const results = await Promise.all(Array.from({ length: 20 }, () => login({ role_id: roleId, secret_id: secretId })));
    const ok = results.filter((r) => r.status === 200);
    expect(ok).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 200)) expect(r.body).toEqual(INVALID);
    expect((await read("auth/token/lookup-self", { token: ok[0]?.body.auth.client_token })).status).toBe(200);
  });

  it("refuses an expired SecretID at once (stricter than Vault's ~60 s tidy window); tidy deletes it", async () => {
    const { name, roleId } = await newRole();
    const { secretId, accessor } = await newSecret(name, { ttl: 1 });
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect((await login({ role_id: roleId, secret_id: secretId })).body).toEqual(INVALID);
    // Still listed until tidied, as in Vault.
    expect((await list(`auth/${path}/role/${name}/secret-id`)).body.data.keys).toEqual([accessor]);
    const keep = await newSecret(name);
    const tidy = await api("POST", `auth/${path}/tidy/secret-id`, { body: {} });
    expect(tidy.status).toBe(202);
    expect(tidy.body.warnings).toEqual(["Tidy operation successfully started. Any information from the operation will be printed to Vault's server logs."]);
    expect((await list(`auth/${path}/role/${name}/secret-id`)).body.data.keys).toEqual([keep.accessor]);
  });

  it("binds logins to addresses by CF-Connecting-IP only, never X-Forwarded-For", async () => {
    const { name, roleId } = await newRole({ secret_id_bound_cidrs: "10.0.0.0/8" });
    const { secretId } = await newSecret(name, { cidr_list: "10.1.0.0/16", token_bound_cidrs: "10.1.2.0/24" });
    const from = (ip: string) => ({ "cf-connecting-ip": ip });
    const outsideSecret = await login({ role_id: roleId, secret_id: secretId }, from("10.2.0.1"));
    expect(outsideSecret.body).toEqual({ errors: ['source address "10.2.0.1" unauthorized through CIDR restrictions on the secret ID'] });
    const spoofed = await login({ role_id: roleId, secret_id: secretId }, { "x-forwarded-for": "10.1.2.3", "x-real-ip": "10.1.2.3" });
    expect(spoofed.status).toBe(400);
    expect(spoofed.body.errors[0]).toMatch(/unauthorized through CIDR restrictions on the secret ID/);

    const ok = await login({ role_id: roleId, secret_id: secretId }, from("10.1.2.3"));
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    const token = ok.body.auth.client_token as string;
    // The token carries the SecretID's token_bound_cidrs.
    expect((await api("GET", "auth/token/lookup-self", { token, headers: from("10.1.2.9") })).body.data.bound_cidrs).toEqual(["10.1.2.0/24"]);
    expect((await api("GET", "auth/token/lookup-self", { token, headers: from("10.1.3.9") })).status).toBe(403);
    expect((await api("GET", "auth/token/lookup-self", { token, headers: { "x-forwarded-for": "10.1.2.9" } })).status).toBe(403);

    // A role bound by addresses alone: RoleID only, from inside the role's blocks.
    const open = await newRole({ bind_secret_id: false, secret_id_bound_cidrs: "192.168.0.0/16" });
    expect((await login({ role_id: open.roleId }, from("192.168.4.4"))).status).toBe(200);
    expect((await login({ role_id: open.roleId }, from("10.0.0.1"))).body).toEqual({
      errors: ['source address "10.0.0.1" unauthorized by CIDR restrictions on the role'],
    });
    expect((await login({ role_id: open.roleId }, { "x-forwarded-for": "192.168.4.4" })).status).toBe(400);
  });

  it("deleting a role stops its tokens and its SecretIDs, also for a new role of the same name", async () => {
    const { name, roleId } = await newRole({ role_id: `fixed-${uid()}` });
    const { secretId } = await newSecret(name);
    const r = await login({ role_id: roleId, secret_id: secretId });
    const token = r.body.auth.client_token as string;
    expect((await api("GET", "auth/token/lookup-self", { token })).status).toBe(200);
    await api("DELETE", `auth/${path}/role/${name}`);
    expect((await api("GET", "auth/token/lookup-self", { token })).status).toBe(403);
    expect((await api("GET", `auth/${path}/role/${name}`)).status).toBe(404);
    expect((await login({ role_id: roleId, secret_id: secretId })).body).toEqual(INVALID);
    // Same name and RoleID again: the old SecretID is gone for good.
    await write(`auth/${path}/role/${name}`, { role_id: roleId }, {}, 204);
    expect((await login({ role_id: roleId, secret_id: secretId })).body).toEqual(INVALID);
    expect((await api("GET", `auth/${path}/role/${name}/secret-id?list=true`)).status).toBe(404);
  });

  it("no read shows a SecretID", async () => {
    const { name, roleId } = await newRole();
    const { secretId, accessor } = await newSecret(name, { metadata: { k: "v" } });
    const token = (await login({ role_id: roleId, secret_id: secretId })).body.auth.client_token as string;
    const reads = [
      await read(`auth/${path}/role/${name}`),
      await list(`auth/${path}/role/${name}/secret-id`),
      await write(`auth/${path}/role/${name}/secret-id/lookup`, { secret_id: secretId }),
      await write(`auth/${path}/role/${name}/secret-id-accessor/lookup`, { secret_id_accessor: accessor }),
      await read("auth/token/lookup-self", { token }),
      await list(`auth/${path}/role`),
    ];
    for (const r of reads) expect(r.text).not.toContain(secretId);
  });
});
