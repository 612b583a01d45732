/**
 * Vault's legacy policy paths sys/policy[/:name] over the ACL policy store (hvac's
 * create_or_update_policy/read_policy/list_policies, node-vault's addPolicy/getPolicy/policies),
 * and sys/internal/ui/mounts, which `vault kv` reads to detect KV version 2
 * (Vault API: /sys/policy, /sys/internal/ui/mounts).
 */
import { describe, expect, it } from "vitest";
import { api, del, list, mount, read, tokenWithPolicy, write } from "../helpers/api";

const uid = () => crypto.randomUUID().slice(0, 6);
const RULES = 'path "secret/data/*" {\n  capabilities = ["read", "list"]\n}\n';

describe("sys/policy (legacy)", () => {
  it("writes with node-vault's {name, rules} and reads back rules; sys/policies/acl sees the same policy", async () => {
    const name = `legacy-${uid()}`;
    const w = await write(`sys/policy/${name}`, { name, rules: RULES });
    expect(w.body.warnings).toContain("'rules' is deprecated, please use 'policy' instead");
    const r = await read(`sys/policy/${name}`);
    expect(r.body.data).toEqual({ name, rules: RULES });
    expect(r.body.rules).toBe(RULES); // Vault copies sys/policy data to the top level
    expect((await read(`sys/policies/acl/${name}`)).body.data.policy).toBe(RULES);
  });

  it("writes with `policy` (hvac) and base64, and the policy is enforced", async () => {
    const name = `legacy-${uid()}`;
    await write(`sys/policy/${name}`, { policy: RULES }, {}, 204);
    const b64 = `legacy-${uid()}`;
    await write(`sys/policy/${b64}`, { policy: btoa(RULES) }, {}, 204);
    expect((await read(`sys/policy/${b64}`)).body.data.rules).toBe(RULES);
    const acl = `acl-${uid()}`;
    await write(`sys/policies/acl/${acl}`, { policy: RULES }, {}, 204);
    expect((await read(`sys/policy/${acl}`)).body.data.rules).toBe(RULES);

    const token = (await write("auth/token/create", { policies: [name] })).body.auth.client_token as string;
    const caps = await write("sys/capabilities-self", { path: "secret/data/x" }, { token });
    expect(caps.body.data.capabilities).toEqual(["list", "read"]);
  });

  it("lists with GET and LIST: keys and policies, root included", async () => {
    const name = `legacy-${uid()}`;
    await write(`sys/policy/${name}`, { policy: RULES }, {}, 204);
    for (const r of [await read("sys/policy"), await list("sys/policy")]) {
      expect(r.body.data.keys).toEqual(r.body.data.policies);
      expect(r.body.data.keys).toEqual(expect.arrayContaining(["default", "root", name]));
      expect(r.body.policies).toEqual(r.body.data.policies);
    }
  });

  it("refuses empty documents and protected names; deletes; a missing policy is 404", async () => {
    expect((await write(`sys/policy/e${uid()}`, { rules: "" }, {}, 400)).body.errors).toEqual(["'policy' parameter not supplied or empty"]);
    expect((await write("sys/policy/root", { policy: RULES }, {}, 400)).body.errors).toEqual(['cannot update "root" policy']);
    await del("sys/policy/default", {}, 400);
    const name = `legacy-${uid()}`;
    await write(`sys/policy/${name}`, { policy: RULES }, {}, 204);
    await del(`sys/policy/${name}`);
    expect((await read(`sys/policy/${name}`, {}, 404)).body).toEqual({ errors: [] });
    expect((await read("sys/policy/root")).body.data).toEqual({ name: "root", rules: "" });
  });

  it("is subject to the ACL like sys/policies/acl", async () => {
    const token = await tokenWithPolicy('path "sys/policy" { capabilities = ["read"] }');
    expect((await api("GET", "sys/policy", { token })).status).toBe(200);
    expect((await api("POST", `sys/policy/x${uid()}`, { token, body: { policy: RULES } })).status).toBe(403);
  });
});

describe("sys/internal/ui/mounts", () => {
  it("tells the vault CLI that a path is under a KV version 2 mount", async () => {
    const kv = await mount("kv");
    const r = await read(`sys/internal/ui/mounts/${kv}/app/config`);
    expect(r.body.data).toMatchObject({ type: "kv", path: `${kv}/`, options: { version: "2" } });
    expect(typeof r.body.data.options.version).toBe("string");
    const pki = await mount("pki");
    expect((await read(`sys/internal/ui/mounts/${pki}`)).body.data).toMatchObject({ type: "pki", path: `${pki}/` });
  });

  it("works for a token whose policy grants only the KV data tree", async () => {
    const kv = await mount("kv");
    const token = await tokenWithPolicy(`path "${kv}/data/*" { capabilities = ["read"] }`);
    const r = await api("GET", `sys/internal/ui/mounts/${kv}/app`, { token });
    expect(r.status).toBe(200);
    expect(r.body.data.path).toBe(`${kv}/`);
    // Another mount the token cannot reach looks exactly like no mount: 403, not 404.
    const other = await mount("kv");
    const denied = await api("GET", `sys/internal/ui/mounts/${other}/app`, { token });
    expect(denied.status).toBe(403);
    expect(denied.body.errors[0]).toBe(`preflight capability check returned 403, please ensure client's policies grant access to path "${other}/app/"`);
    expect((await api("GET", `sys/internal/ui/mounts/none${uid()}/x`, { token })).status).toBe(403);
  });

  it("needs a token for a single mount; the list answers without one", async () => {
    const kv = await mount("kv");
    expect((await api("GET", `sys/internal/ui/mounts/${kv}`, { token: null })).status).toBe(403);
    const anon = await api("GET", "sys/internal/ui/mounts", { token: null });
    expect(anon.status).toBe(200);
    expect(anon.body.data).toEqual({ secret: {}, auth: {} });
    const all = await read("sys/internal/ui/mounts");
    expect(all.body.data.secret[`${kv}/`]).toMatchObject({ type: "kv", options: { version: "2" } });
    expect(all.body.data.auth["token/"]).toMatchObject({ type: "token" });
  });

  it("honours the namespace header", async () => {
    const ns = `ns${uid()}`;
    await write(`sys/namespaces/${ns}`, {});
    await write("sys/mounts/inner", { type: "kv" }, { namespace: ns }, 204);
    expect((await read("sys/internal/ui/mounts/inner/x", { namespace: ns })).body.data.path).toBe("inner/");
    expect((await api("GET", "sys/internal/ui/mounts/inner/x")).status).toBe(403);
  });
});
