import { describe, expect, it } from "vitest";
import { api, del, list, read, write } from "../helpers/api";

const uid = () => crypto.randomUUID().slice(0, 6);

describe("namespaces", () => {
  it("creates, reads, lists and deletes namespaces", async () => {
    const name = `ns${uid()}`;
    const created = await write(`sys/namespaces/${name}`, { custom_metadata: { owner: "blue" } });
    expect(created.body.data).toMatchObject({ path: `${name}/`, custom_metadata: { owner: "blue" } });
    expect(created.body.data.id).toMatch(/^\w{8}$/);
    expect((await read(`sys/namespaces/${name}`)).body.data.id).toBe(created.body.data.id);
    const keys = (await list("sys/namespaces")).body.data.keys;
    expect(keys).toContain(`${name}/`);
    await del(`sys/namespaces/${name}`);
    await read(`sys/namespaces/${name}`, {}, 404);
  });

  it("patches custom metadata with merge-patch semantics", async () => {
    const name = `ns${uid()}`;
    await write(`sys/namespaces/${name}`, { custom_metadata: { a: "1", b: "2" } });
    const r = await api("PATCH", `sys/namespaces/${name}`, { body: { custom_metadata: { a: null, c: "3" } } });
    expect(r.body.data.custom_metadata).toEqual({ b: "2", c: "3" });
  });

  it("nests namespaces, selected by header or by path prefix", async () => {
    const parent = `ns${uid()}`;
    await write(`sys/namespaces/${parent}`);
    const child = await write("sys/namespaces/child", {}, { namespace: parent });
    expect(child.body.data.path).toBe(`${parent}/child/`);
    const viaPrefix = await read(`${parent}/sys/namespaces/child`);
    expect(viaPrefix.body.data.path).toBe(`${parent}/child/`);
    const viaBoth = await read("child/sys/mounts", { namespace: parent });
    expect(viaBoth.body.data).toEqual({});
    await write(`sys/namespaces/${parent}/child`, {}, {}, 400); // one segment at a time
  });

  it("refuses to delete a namespace with children or mounts", async () => {
    const name = `ns${uid()}`;
    await write(`sys/namespaces/${name}`);
    await write("sys/namespaces/inner", {}, { namespace: name });
    const r = await del(`sys/namespaces/${name}`, {}, 400);
    expect(r.body.errors[0]).toContain("child namespaces");
    await del("sys/namespaces/inner", { namespace: name });
    await write(`${name}/sys/mounts/kv`, { type: "kv" }, {}, 204);
    expect((await del(`sys/namespaces/${name}`, {}, 400)).body.errors[0]).toContain("mounts");
    await del(`${name}/sys/mounts/kv`);
    await del(`sys/namespaces/${name}`);
  });

  it("keeps mounts, policies and tokens apart; a token never sees a sibling", async () => {
    const a = `a${uid()}`;
    const b = `b${uid()}`;
    await write(`sys/namespaces/${a}`);
    await write(`sys/namespaces/${b}`);
    await write("sys/mounts/shared", { type: "kv" }, { namespace: a }, 204);
    await write("sys/mounts/shared", { type: "kv" }, { namespace: b }, 204);
    expect(Object.keys((await read("sys/mounts")).body.data)).not.toContain("shared/");
    const admin = 'path "*" { capabilities = ["create", "read", "update", "delete", "list", "sudo"] }';
    await write("sys/policies/acl/admin", { policy: admin }, { namespace: a }, 204);
    const tokA = (await write("auth/token/create", { policies: ["admin"] }, { namespace: a })).body.auth.client_token;
    // Policies resolve in the token's namespace: "admin" does not exist in the root namespace.
    expect((await read("sys/policies/acl?list=true", { namespace: a, token: tokA })).body.data.keys).toContain("admin");
    expect((await api("GET", "sys/mounts", { namespace: b, token: tokA })).status).toBe(403);
    expect((await api("GET", `${b}/sys/mounts`, { token: tokA })).status).toBe(403);
    expect((await api("GET", "sys/mounts", { token: tokA })).status).toBe(403); // the parent neither
    expect((await api("GET", "sys/mounts", { namespace: a, token: tokA })).status).toBe(200);
    // A token of a parent namespace reaches a child namespace through paths relative to its own.
    await write("sys/namespaces/kid", {}, { namespace: a });
    const policyForKid = 'path "kid/sys/mounts" { capabilities = ["read"] }';
    await write("sys/policies/acl/kidreader", { policy: policyForKid }, { namespace: a }, 204);
    const reader = (await write("auth/token/create", { policies: ["kidreader"] }, { namespace: a })).body.auth.client_token;
    expect((await api("GET", "sys/mounts", { namespace: `${a}/kid`, token: reader })).status).toBe(200);
    expect((await api("GET", "sys/mounts", { namespace: a, token: reader })).status).toBe(403);
  });

  it("refuses reserved and malformed names, and unknown namespaces", async () => {
    await write("sys/namespaces/sys", {}, {}, 400);
    await write("sys/namespaces/bad!name", {}, {}, 400);
    expect((await api("GET", "sys/mounts", { namespace: "does-not-exist" })).status).toBe(404);
    expect((await api("GET", "sys/mounts", { namespace: "does-not-exist", token: null })).status).toBe(403);
  });

  it("refuses a namespace and a mount of the same name side by side", async () => {
    const name = `ns${uid()}`;
    await write(`sys/mounts/${name}`, { type: "kv" }, {}, 204);
    expect((await write(`sys/namespaces/${name}`, {}, {}, 400)).body.errors[0]).toContain("mount");
    const other = `ns${uid()}`;
    await write(`sys/namespaces/${other}`);
    expect((await write(`sys/mounts/${other}/kv`, { type: "kv" }, {}, 400)).body.errors[0]).toContain("namespace");
  });

  it("deleting a namespace revokes its tokens", async () => {
    const name = `ns${uid()}`;
    await write(`sys/namespaces/${name}`);
    const t = (await write("auth/token/create", { policies: ["default"] }, { namespace: name })).body.auth.client_token;
    expect((await api("GET", "auth/token/lookup-self", { token: t, namespace: name })).status).toBe(200);
    await del(`sys/namespaces/${name}`);
    expect((await api("GET", "auth/token/lookup-self", { token: t })).status).toBe(403);
  });
});

describe("engines inside namespaces", () => {
  it("serves KV-v2 in a namespace, by header and by path prefix, invisible elsewhere", async () => {
    const ns = `kvns${uid()}`;
    await write(`sys/namespaces/${ns}`);
    await write("sys/mounts/secret", { type: "kv" }, { namespace: ns }, 204);
    await write("secret/data/app", { data: { k: "v" } }, { namespace: ns });
    expect((await read(`${ns}/secret/data/app`)).body.data.data).toEqual({ k: "v" });
    expect((await api("GET", "secret/data/app")).status).toBe(404); // no such mount in root
    const policy = 'path "secret/data/*" { capabilities = ["read"] }';
    await write("sys/policies/acl/reader", { policy }, { namespace: ns }, 204);
    const t = (await write("auth/token/create", { policies: ["reader"] }, { namespace: ns })).body.auth.client_token;
    expect((await api("GET", "secret/data/app", { namespace: ns, token: t })).status).toBe(200);
    expect((await api("POST", "secret/data/app", { namespace: ns, token: t, body: { data: { k: "x" } } })).status).toBe(403);
    // The same policy name in the root namespace grants nothing to this token there.
    expect((await api("GET", "secret/data/app", { token: t })).status).toBe(403);
  });
});
