import { describe, expect, it } from "vitest";
import { api, list, mount, read, tokenWithPolicy, write, del } from "../helpers/api";

describe("ACL policies", () => {
  it("creates, reads, lists and deletes policies; names are lower-cased", async () => {
    const text = 'path "secret/*" { capabilities = ["read"] }';
    await write("sys/policies/acl/Readers", { policy: text }, {}, 204);
    const r = await read("sys/policies/acl/readers");
    expect(r.body.data).toEqual({ name: "readers", policy: text });
    const keys = (await list("sys/policies/acl")).body.data.keys;
    expect(keys).toEqual(expect.arrayContaining(["default", "readers", "root"]));
    await del("sys/policies/acl/readers");
    await read("sys/policies/acl/readers", {}, 404);
    await del("sys/policies/acl/readers"); // idempotent
  });

  it("refuses a policy that does not parse, with line and reason, and keeps the old text", async () => {
    const good = 'path "a" { capabilities = ["read"] }';
    await write("sys/policies/acl/keep", { policy: good }, {}, 204);
    const r = await write("sys/policies/acl/keep", { policy: 'path "a" {\n  capabilities = ["fly"]\n}' }, {}, 400);
    expect(r.body.errors[0]).toContain("line 1");
    expect(r.body.errors[0]).toContain("fly");
    expect((await read("sys/policies/acl/keep")).body.data.policy).toBe(good);
    await write("sys/policies/acl/empty", {}, {}, 400);
  });

  it("protects the built-in policies", async () => {
    await write("sys/policies/acl/root", { policy: 'path "*" { capabilities = ["read"] }' }, {}, 400);
    await del("sys/policies/acl/root", {}, 400);
    await del("sys/policies/acl/default", {}, 400);
    expect((await read("sys/policies/acl/default")).body.data.policy).toContain("auth/token/lookup-self");
  });

  it("enforces capabilities on real requests", async () => {
    const kv = await mount("kv");
    const token = await tokenWithPolicy(`
      path "sys/policies/acl/*" { capabilities = ["read", "list"] }
      path "sys/mounts" { capabilities = ["read"] }
      path "sys/mounts/${kv}" { capabilities = ["deny"] }
    `);
    expect((await api("GET", "sys/mounts", { token })).status).toBe(200);
    expect((await api("GET", "sys/policies/acl/default", { token })).status).toBe(200);
    expect((await api("POST", "sys/policies/acl/x", { token, body: { policy: 'path "a" {capabilities=["read"]}' } })).status).toBe(403);
    expect((await api("DELETE", `sys/mounts/${kv}`, { token })).status).toBe(403);
    expect((await api("GET", "auth/token/lookup-self", { token })).status).toBe(200); // default policy
    expect((await api("GET", "sys/namespaces?list=true", { token })).status).toBe(403);
  });

  it("takes the JSON policy form", async () => {
    const token = await tokenWithPolicy(JSON.stringify({ path: { "sys/mounts": { capabilities: ["read"] } } }));
    expect((await api("GET", "sys/mounts", { token })).status).toBe(200);
    expect((await api("GET", "sys/policies/acl?list=true", { token })).status).toBe(403);
  });

  it("reports capabilities through sys/capabilities-self", async () => {
    const token = await tokenWithPolicy(`
      path "secret/data/*" { capabilities = ["read", "list"] }
      path "secret/data/private/*" { capabilities = ["deny"] }
    `);
    const r = await write("sys/capabilities-self", { paths: ["secret/data/app", "secret/data/private/x"] }, { token });
    expect(r.body.data["secret/data/app"]).toEqual(["list", "read"]);
    expect(r.body.data["secret/data/private/x"]).toEqual(["deny"]);
  });

  it("a policy change applies to existing tokens at once", async () => {
    const token = await tokenWithPolicy('path "sys/mounts" { capabilities = ["read"] }');
    const policy = (await read("auth/token/lookup-self", { token })).body.data.policies.find((p: string) => p !== "default");
    expect((await api("GET", "sys/mounts", { token })).status).toBe(200);
    await write(`sys/policies/acl/${policy}`, { policy: 'path "sys/mounts" { capabilities = ["deny"] }' }, {}, 204);
    expect((await api("GET", "sys/mounts", { token })).status).toBe(403);
  });
});
