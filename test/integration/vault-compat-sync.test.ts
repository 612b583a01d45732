/**
 * Vault's destination type names (aws-sm, azure-kv, gcp-sm, gh, vercel-project) as
 * aliases of the spec's five types wherever a type appears in a path, answers in the spec's
 * names; sys/activation-flags; webhost-project's deployment_environments in the read form.
 */
import { describe, expect, it } from "vitest";
import { api, del, list, mount, patch, read, write } from "../helpers/api";
import { BODIES, uid } from "../helpers/sync-bodies";

const ALIASES = [
  ["aws-sm", "cloudone-sm"],
  ["azure-kv", "cloudtwo-kv"],
  ["gcp-sm", "cloudthree-sm"],
  ["gh", "repohost"],
  ["vercel-project", "webhost-project"],
] as const;

describe("Vault's destination type names", () => {
  it.each(ALIASES)("%s is %s: write, read, patch, list and delete through the alias", async (alias, spec) => {
    const name = `d-${uid()}`;
    const w = await write(`sys/sync/destinations/${alias}/${name}`, BODIES[spec]);
    expect(w.body.data.type).toBe(spec);
    // The same destination, under either name.
    expect((await read(`sys/sync/destinations/${spec}/${name}`)).body.data.name).toBe(name);
    const r = await read(`sys/sync/destinations/${alias}/${name}`);
    expect(r.body.data).toMatchObject({ type: spec, name });
    await patch(`sys/sync/destinations/${alias}/${name}`, { custom_tags: spec === "repohost" || spec === "webhost-project" ? undefined : { a: "b" } });
    expect((await list(`sys/sync/destinations/${alias}`)).body.data.keys).toContain(name);
    const all = await list("sys/sync/destinations");
    expect(all.body.data.keys).toContain(`${spec}/`);
    expect(all.body.data.keys).not.toContain(`${alias}/`);
    await del(`sys/sync/destinations/${alias}/${name}`);
    await read(`sys/sync/destinations/${spec}/${name}`, {}, 404);
  });

  it("associations take the alias too and answer with the spec's name", async () => {
    const kv = await mount("kv");
    await write(`${kv}/data/app`, { data: { k: "v" } });
    const name = `d-${uid()}`;
    await write(`sys/sync/destinations/aws-sm/${name}`, BODIES["cloudone-sm"]);
    const set = await write(`sys/sync/destinations/aws-sm/${name}/associations/set`, { mount: kv, secret_name: "app" });
    expect(set.body.data.store_type).toBe("cloudone-sm");
    const got = await read(`sys/sync/destinations/aws-sm/${name}/associations`);
    expect(got.body.data.store_name).toBe(name);
    expect(Object.keys(got.body.data.associated_secrets).length).toBeGreaterThan(0);
    await write(`sys/sync/destinations/aws-sm/${name}/associations/remove`, { mount: kv, secret_name: "app" });
  });

  it("an unknown type is still refused", async () => {
    const r = await write(`sys/sync/destinations/aws-ssm/d-${uid()}`, BODIES["cloudone-sm"], {}, 400);
    expect(r.body.errors[0]).toMatch(/unknown destination type "aws-ssm"/);
    await list("sys/sync/destinations/aws-ssm", {}, 400);
  });
});

describe("webhost-project read form", () => {
  it("returns deployment_environments in connection_details as stored", async () => {
    const name = `v-${uid()}`;
    await write(`sys/sync/destinations/vercel-project/${name}`, { ...BODIES["webhost-project"], deployment_environments: "production,development" });
    const r = await read(`sys/sync/destinations/webhost-project/${name}`);
    expect(r.body.data.connection_details).toMatchObject({ access_token: "*****", project_id: "prj_abc123", deployment_environments: ["production", "development"] });
  });
});

describe("sys/activation-flags", () => {
  it("reads without a token, activates secrets-sync once (idempotent) and remembers it", async () => {
    const before = await api("GET", "sys/activation-flags", { token: null });
    expect(before.status).toBe(200);
    expect(before.body.data).toEqual({ activated: [], unactivated: ["secrets-sync"] });
    const a = await write("sys/activation-flags/secrets-sync/activate", {});
    expect(a.body.data).toEqual({ activated: ["secrets-sync"], unactivated: [] });
    await write("sys/activation-flags/secrets-sync/activate", {}); // again: same answer
    expect((await read("sys/activation-flags", { token: null })).body.data).toEqual({ activated: ["secrets-sync"], unactivated: [] });
  });

  it("activation needs a token with update on the path", async () => {
    expect((await api("POST", "sys/activation-flags/secrets-sync/activate", { token: null, body: {} })).status).toBe(403);
  });
});
