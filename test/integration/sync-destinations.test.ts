/**
 * Behaviour shared by every destination type: lists, tags on PATCH, templates, delete with and
 * without associations (purge), writes while purging, unknown types, namespaces and policies.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, del, list, patch, read, tokenWithPolicy, write } from "../helpers/api";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";

const path = (type: string, name: string) => `sys/sync/destinations/${type}/${name}`;

/** Inserts an association row directly (part 2 will create them through the API). */
async function associate(type: string, name: string, namespaceId = "root"): Promise<void> {
  await env.DB.prepare(
    `INSERT INTO sync_associations (id, namespace_id, destination_type, destination_name, mount_accessor, secret_name, sync_status, updated_at)
     VALUES (?, ?, ?, ?, 'kv_1234abcd', 'my-secret', 'SYNCED', ?)`,
  )
    .bind(crypto.randomUUID(), namespaceId, type, name, Date.now())
    .run();
}

describe("destination lists", () => {
  it("LIST answers key_info by type/, keys with the trailing slash and the total; per type keys and total", async () => {
    const ns = `ns${uid()}`;
    await write(`sys/namespaces/${ns}`);
    const o = { namespace: ns };
    await list("sys/sync/destinations", o, 404);
    await write(path("cloudone-sm", "b-aws"), BODIES["cloudone-sm"], o);
    await write(path("cloudone-sm", "a-aws"), BODIES["cloudone-sm"], o);
    await write(path("repohost", "gh1"), BODIES.repohost, o);
    const all = await list("sys/sync/destinations", o);
    expect(all.body.mount_type).toBe("system");
    expect(all.body.data).toEqual({
      key_info: { "cloudone-sm/": ["a-aws", "b-aws"], "repohost/": ["gh1"] },
      keys: ["cloudone-sm/", "repohost/"],
      total_destinations: 3,
    });
    const one = await list("sys/sync/destinations/cloudone-sm", o);
    expect(one.body.data).toEqual({ keys: ["a-aws", "b-aws"], total_destinations: 2 });
    await list("sys/sync/destinations/cloudtwo-kv", o, 404);
    const bad = await list("sys/sync/destinations/nope", o, 400);
    expect(bad.body.errors[0]).toMatch(/^type: unknown destination type "nope"/);
  });

  it("keeps namespaces apart", async () => {
    const a = `a${uid()}`;
    const b = `b${uid()}`;
    await write(`sys/namespaces/${a}`);
    await write(`sys/namespaces/${b}`);
    await write(path("cloudone-sm", "same"), { access_key_id: SECRETS.awsKey, secret_access_key: SECRETS.awsSecret, region: "us-east-1" }, { namespace: a });
    await write(path("cloudone-sm", "same"), { access_key_id: SECRETS.awsKey, secret_access_key: SECRETS.awsSecret, region: "eu-west-1" }, { namespace: b });
    expect((await read(path("cloudone-sm", "same"), { namespace: a })).body.data.connection_details.region).toBe("us-east-1");
    expect((await read(`${b}/${path("cloudone-sm", "same")}`)).body.data.connection_details.region).toBe("eu-west-1");
    await del(path("cloudone-sm", "same"), { namespace: a });
    expect((await read(path("cloudone-sm", "same"), { namespace: b })).status).toBe(200);
  });
});

describe("unknown types", () => {
  it("every verb names the unknown type", async () => {
    // Not "aws-sm": Vault's type names are aliases of Lanyard's types.
    const r = await write(path("aws-ssm", "x"), {}, {}, 400);
    expect(r.body.errors[0]).toBe(
      'type: unknown destination type "aws-ssm"; known types: cloudone-sm, cloudtwo-kv, cloudthree-sm, repohost, webhost-project',
    );
    await read(path("aws-ssm", "x"), {}, 400);
    await del(path("aws-ssm", "x"), {}, 400);
  });
});

describe("tags, options and templates", () => {
  it("PATCH merges custom_tags, removes with null and with tags_to_remove; POST replaces", async () => {
    const name = `t-${uid()}`;
    await write(path("cloudone-sm", name), { ...BODIES["cloudone-sm"], custom_tags: { a: "1", b: "2", c: "3" } });
    const p = await patch(path("cloudone-sm", name), { custom_tags: { b: "20", d: "4", a: null }, tags_to_remove: ["c"] });
    expect(p.body.data.options.custom_tags).toEqual({ b: "20", d: "4" });
    const q = await patch(path("cloudone-sm", name), { tags_to_remove: "b,d" });
    expect(q.body.data.options.custom_tags).toEqual({});
    const w = await write(path("cloudone-sm", name), { ...BODIES["cloudone-sm"], custom_tags: { z: "26" }, tags_to_remove: ["z"] });
    expect(w.body.data.options.custom_tags).toEqual({ z: "26" });
    expect(w.body.warnings).toEqual(["tags_to_remove is only used by PATCH; it was ignored"]);
    expect((await write(path("cloudone-sm", name), { ...BODIES["cloudone-sm"], custom_tags: { k: 1 } }, {}, 400)).body.errors[0]).toContain("custom_tags");
    expect((await write(path("cloudone-sm", name), { ...BODIES["cloudone-sm"], custom_tags: "k=v" }, {}, 400)).body.errors[0]).toContain("custom_tags");
  });

  it("the reported default template follows the granularity until a template is set", async () => {
    const name = `t-${uid()}`;
    await write(path("cloudone-sm", name), BODIES["cloudone-sm"]);
    const k = await patch(path("cloudone-sm", name), { granularity: "secret-key" });
    expect(k.body.data.options).toMatchObject({
      granularity_level: "secret-key",
      secret_name_template: "vault/{{ .MountAccessor }}/{{ .SecretPath }}/{{ .SecretKey }}",
    });
    const t = await patch(path("cloudone-sm", name), { secret_name_template: "app-{{ .SecretKey | lowercase }}" });
    expect(t.body.data.options.secret_name_template).toBe("app-{{ .SecretKey | lowercase }}");
    const back = await patch(path("cloudone-sm", name), { granularity: "secret-path", secret_name_template: null });
    expect(back.body.data.options.secret_name_template).toBe("vault/{{ .MountAccessor }}/{{ .SecretPath }}");
    const bad = await write(path("cloudone-sm", name), { ...BODIES["cloudone-sm"], granularity: "secret-everything" }, {}, 400);
    expect(bad.body.errors[0]).toContain('"granularity"');
    const loop = await write(path("cloudone-sm", name), { ...BODIES["cloudone-sm"], secret_name_template: "{{ range .SecretPath }}x{{ end }}" }, {}, 400);
    expect(loop.body.errors[0]).toMatch(/^secret_name_template: secret name template is invalid: .*control structures/);
  });

  it("unknown fields are ignored with a warning", async () => {
    const r = await write(path("cloudone-sm", `t-${uid()}`), { ...BODIES["cloudone-sm"], colour: "red", bogus: 1 });
    expect(r.body.warnings).toEqual(["Endpoint ignored these unrecognized parameters: [bogus colour]"]);
  });
});

describe("deleting with associations and purge", () => {
  it("refuses a delete while associations exist, with a clear 400", async () => {
    const name = `p-${uid()}`;
    await write(path("cloudone-sm", name), BODIES["cloudone-sm"]);
    await associate("cloudone-sm", name);
    const r = await del(path("cloudone-sm", name), {}, 400);
    expect(r.body.errors[0]).toMatch(/cannot be deleted because it is still managing secrets \(1 association\).*purge=true/);
    expect((await read(path("cloudone-sm", name))).body.data).not.toHaveProperty("purge_initiated_at");
    await del(`${path("cloudone-sm", name)}?purge=false`, {}, 400);
    await del(`${path("cloudone-sm", name)}?purge=maybe`, {}, 400);
  });

  it("purge=true records the purge durably; the destination reads back with purge_initiated_at and refuses writes", async () => {
    const name = `p-${uid()}`;
    await write(path("cloudone-sm", name), BODIES["cloudone-sm"]);
    await associate("cloudone-sm", name);
    const before = Date.now();
    await del(`${path("cloudone-sm", name)}?purge=true`);
    const r = await read(path("cloudone-sm", name));
    const at = Date.parse(r.body.data.purge_initiated_at);
    expect(r.body.data.purge_initiated_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(at).toBeGreaterThanOrEqual(before - 1000);
    const row = await env.DB.prepare("SELECT purge_initiated_at FROM sync_destinations WHERE type = 'cloudone-sm' AND name = ?").bind(name).first();
    expect(row?.purge_initiated_at).toBe(at);
    // From here on the queue consumer may finish the purge at any moment: the association was never
    // synced (no provider answers in this project), so there is nothing to delete first. Each check
    // therefore accepts "still being purged" or "gone", never anything else.
    const gone = async () => (await api("GET", path("cloudone-sm", name))).status === 404;
    await del(`${path("cloudone-sm", name)}?purge=true`);
    const again = await api("GET", path("cloudone-sm", name));
    if (again.status !== 404) expect(again.body.data.purge_initiated_at).toBe(r.body.data.purge_initiated_at);
    const w = await api("POST", path("cloudone-sm", name), { body: BODIES["cloudone-sm"] });
    if (w.status !== 400) {
      // Accepted only because the purge had finished: then this is a new destination, not purging.
      expect(w.status, JSON.stringify(w.body)).toBeLessThan(300);
      expect((await read(path("cloudone-sm", name))).body.data.purge_initiated_at ?? null).toBeNull();
      await del(path("cloudone-sm", name));
      return;
    }
    expect(w.body.errors[0]).toMatch(/is being purged/);
    const p = await api("PATCH", path("cloudone-sm", name), { body: { custom_tags: { a: "b" } } });
    if (p.status !== 400) expect(await gone()).toBe(true);
    const listed = ((await list("sys/sync/destinations/cloudone-sm")).body.data.keys as string[]).includes(name);
    if (!listed) expect(await gone()).toBe(true);
  });

  it("purge=true without associations deletes at once", async () => {
    const name = `p-${uid()}`;
    await write(path("repohost", name), BODIES.repohost);
    await del(`${path("repohost", name)}?purge=true`);
    await read(path("repohost", name), {}, 404);
  });

  it("associations of another namespace or destination do not block a delete", async () => {
    const name = `p-${uid()}`;
    await write(path("cloudone-sm", name), BODIES["cloudone-sm"]);
    // A real namespace: rows can only be written into a namespace that exists (migration 0006).
    const other = (await write(`sys/namespaces/other${uid()}`)).body.data.id as string;
    await associate("cloudone-sm", name, other);
    await associate("cloudtwo-kv", name);
    await del(path("cloudone-sm", name));
    await read(path("cloudone-sm", name), {}, 404);
  });
});

describe("policies (Vault docs: secrets sync policies)", () => {
  it("create for new destinations, update for existing ones, patch for PATCH", async () => {
    const name = `acl-${uid()}`;
    const creator = await tokenWithPolicy(`path "sys/sync/destinations/cloudone-sm/*" { capabilities = ["create", "read"] }`);
    const updater = await tokenWithPolicy(`path "sys/sync/destinations/cloudone-sm/*" { capabilities = ["update"] }`);
    const patcher = await tokenWithPolicy(`path "sys/sync/destinations/cloudone-sm/*" { capabilities = ["patch"] }`);
    const keys = BODIES["cloudone-sm"];
    expect((await api("POST", path("cloudone-sm", name), { token: updater, body: keys })).status).toBe(403);
    expect((await api("POST", path("cloudone-sm", name), { token: creator, body: keys })).status).toBe(200);
    expect((await api("POST", path("cloudone-sm", name), { token: creator, body: keys })).status).toBe(403);
    expect((await api("POST", path("cloudone-sm", name), { token: updater, body: { ...keys, region: "us-east-1" } })).status).toBe(200);
    expect((await api("PATCH", path("cloudone-sm", name), { token: updater, body: { role_arn: "" } })).status).toBe(403);
    expect((await api("PATCH", path("cloudone-sm", name), { token: patcher, body: { role_arn: "" } })).status).toBe(200);
    expect((await api("GET", path("cloudone-sm", name), { token: creator })).status).toBe(200);
    expect((await api("GET", path("cloudone-sm", name), { token: patcher })).status).toBe(403);
    expect((await api("DELETE", path("cloudone-sm", name), { token: creator })).status).toBe(403);
  });

  it("list on sys/sync/destinations and on a type; delete and read per path", async () => {
    const name = `acl-${uid()}`;
    await write(path("repohost", name), BODIES.repohost);
    const lister = await tokenWithPolicy(`
      path "sys/sync/destinations" { capabilities = ["list"] }
      path "sys/sync/destinations/repohost" { capabilities = ["list"] }`);
    expect((await api("GET", "sys/sync/destinations?list=true", { token: lister })).status).toBe(200);
    expect((await api("GET", "sys/sync/destinations/repohost?list=true", { token: lister })).status).toBe(200);
    expect((await api("GET", "sys/sync/destinations/cloudone-sm?list=true", { token: lister })).status).toBe(403);
    expect((await api("GET", path("repohost", name), { token: lister })).status).toBe(403);
    const deleter = await tokenWithPolicy(`path "sys/sync/destinations/repohost/${name}" { capabilities = ["delete"] }`);
    expect((await api("DELETE", path("repohost", name), { token: deleter })).status).toBe(204);
    await read(path("repohost", name), {}, 404);
  });

  it("the documented example policy (sys/sync/*) grants everything but patch", async () => {
    const admin = await tokenWithPolicy(`path "sys/sync/*" { capabilities = ["read", "list", "create", "update", "delete"] }`);
    const name = `acl-${uid()}`;
    expect((await api("POST", path("webhost-project", name), { token: admin, body: BODIES["webhost-project"] })).status).toBe(200);
    expect((await api("GET", "sys/sync/destinations?list=true", { token: admin })).status).toBe(200);
    expect((await api("PATCH", path("webhost-project", name), { token: admin, body: { team_id: "t" } })).status).toBe(403);
    expect((await api("DELETE", path("webhost-project", name), { token: admin })).status).toBe(204);
  });
});
