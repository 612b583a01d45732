/**
 * webhost-project against a fake that follows the host's API (list, then each variable by id;
 * several variables may share a key on different deployment environments): Lanyard deletes only
 * the variables it created for the destination, by the ids it recorded, on unsync and on purge,
 * and warns about the ones it leaves; widening deployment_environments later does not make a
 * variable it found its own; an out-of-band delete of one of its variables is written again
 * after reconcile; a read returns deployment_environments in the order given.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { api, patch, read, write } from "../helpers/api";
import { installFakes } from "../helpers/fake-router";
import { FakeWebhost, WEBHOST_HOSTS } from "../helpers/fake-webhost";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { destPath, entries, kvSecret, removeAssoc, setAssoc, type SyncSetup } from "../helpers/sync-engine";

const vercel = new FakeWebhost(SECRETS.vercelToken);
const PROJECT = BODIES["webhost-project"].project_id;
const TYPE = "webhost-project";
let uninstall: () => void;
beforeAll(() => {
  vercel.addProject(PROJECT);
  uninstall = installFakes([{ hosts: WEBHOST_HOSTS, fake: vercel }]);
});
afterAll(() => uninstall());

const upper = (s: string) => s.toUpperCase().replace(/[^A-Z0-9_]/g, "_");
const nameOf = (s: SyncSetup, key: string) => upper(`VAULT_${s.accessor}_${s.secret}_${key}`);
const targetsOf = (name: string) => vercel.variables(PROJECT, name).map((v) => v.target.join(","));

async function destination(envs: string[]): Promise<string> {
  const dest = `vcv-${uid()}`;
  await write(destPath(TYPE, dest), { ...BODIES[TYPE], deployment_environments: envs });
  return dest;
}

async function gone(dest: string, s: SyncSetup): Promise<void> {
  await vi.waitFor(async () => expect(Object.keys(await entries(TYPE, dest)).some((k) => k.startsWith(`${s.accessor}/`))).toBe(false), { timeout: 20_000, interval: 200 });
}

describe("webhost-project: Lanyard deletes only the variables it created", () => {
  it("unsync: a development variable with the key that was already there stays, with a warning", async () => {
    const dest = await destination(["production"]);
    const s = await kvSecret({ k: "ours-1" });
    const name = nameOf(s, "k");
    vercel.createOutOfBand(PROJECT, name, "theirs-dev", ["development"]);
    expect((await setAssoc(TYPE, dest, s)).body.data.associated_secrets[`${s.accessor}/${s.secret}/k`].sync_status).toBe("SYNCED");
    expect(vercel.value(PROJECT, name, "production")).toBe("ours-1");
    expect(vercel.value(PROJECT, name, "development")).toBe("theirs-dev");

    const rm = await removeAssoc(TYPE, dest, s);
    expect(rm.body.warnings).toHaveLength(1);
    expect(rm.body.warnings[0]).toContain(`"${name}"`);
    await gone(dest, s);
    expect(vercel.value(PROJECT, name, "production")).toBeUndefined();
    expect(vercel.value(PROJECT, name, "development")).toBe("theirs-dev");
  });

  it("unsync: the variable another destination on the same project wrote stays", async () => {
    const prod = await destination(["production"]);
    const dev = await destination(["development"]);
    const s = await kvSecret({ k: "both" });
    const name = nameOf(s, "k");
    await setAssoc(TYPE, prod, s);
    await setAssoc(TYPE, dev, s);
    expect(targetsOf(name).sort()).toEqual(["development", "production"]);

    await removeAssoc(TYPE, prod, s);
    await gone(prod, s);
    expect(targetsOf(name)).toEqual(["development"]);
    await removeAssoc(TYPE, dev, s);
    await gone(dev, s);
    expect(targetsOf(name)).toEqual([]);
  });

  it("widening deployment_environments onto a variable Lanyard did not create does not make it Lanyard's", async () => {
    const dest = await destination(["production"]);
    const s = await kvSecret({ k: "v1" });
    const name = nameOf(s, "k");
    await setAssoc(TYPE, dest, s);
    // Made by someone else after Lanyard's first write, on another environment.
    vercel.createOutOfBand(PROJECT, name, "theirs-dev", ["development"]);
    const theirs = vercel.variables(PROJECT, name).find((v) => v.target.includes("development"))?.id;
    await patch(destPath(TYPE, dest), { deployment_environments: "production,development" });
    await write(`${s.mount}/data/${s.secret}`, { data: { k: "v2" } });
    await vi.waitFor(() => expect(vercel.value(PROJECT, name, "production")).toBe("v2"), { timeout: 20_000, interval: 100 });
    // Overwritten as Vault does (last write wins), but still theirs: one variable per environment.
    await vi.waitFor(() => expect(vercel.value(PROJECT, name, "development")).toBe("v2"), { timeout: 20_000, interval: 100 });
    expect(targetsOf(name).sort()).toEqual(["development", "production"]);

    const rm = await removeAssoc(TYPE, dest, s);
    expect(rm.body.warnings).toHaveLength(1);
    expect(rm.body.warnings[0]).toContain(`"${name}"`);
    await gone(dest, s);
    expect(vercel.variables(PROJECT, name).map((v) => v.id)).toEqual([theirs]);
  });

  it("purge: the variable that was already there stays and is named in the warning; Lanyard's go", async () => {
    const dest = await destination(["production"]);
    const s = await kvSecret({ k: "ours", j: "ours-too" });
    const shared = nameOf(s, "k");
    const solo = nameOf(s, "j");
    vercel.createOutOfBand(PROJECT, shared, "theirs-dev", ["development"]);
    await setAssoc(TYPE, dest, s);
    expect(vercel.value(PROJECT, solo, "production")).toBe("ours-too");

    const purge = await api("DELETE", `${destPath(TYPE, dest)}?purge=true`);
    expect(purge.status).toBe(200);
    expect(purge.body.warnings).toHaveLength(1);
    expect(purge.body.warnings[0]).toContain(`"${shared}"`);
    expect(purge.body.warnings[0]).not.toContain(solo);
    await vi.waitFor(async () => expect((await api("GET", destPath(TYPE, dest))).status).toBe(404), { timeout: 30_000, interval: 250 });
    expect(targetsOf(shared)).toEqual(["development"]);
    expect(vercel.value(PROJECT, shared, "development")).toBe("theirs-dev");
    expect(targetsOf(solo)).toEqual([]);
  });
});

describe("webhost-project: drift and the destination's read", () => {
  it("an out-of-band delete of one of its variables is written again after reconcile", async () => {
    const dest = await destination(["production", "preview"]);
    const s = await kvSecret({ a: "va", b: "vb" });
    await setAssoc(TYPE, dest, s);
    const a = nameOf(s, "a");
    expect(vercel.value(PROJECT, a, "preview")).toBe("va");
    vercel.deleteOutOfBand(PROJECT, a);
    const res = await api("POST", `${destPath(TYPE, dest)}/reconcile`);
    expect(res.status).toBe(202);
    await vi.waitFor(() => expect(vercel.value(PROJECT, a, "production")).toBe("va"), { timeout: 20_000, interval: 100 });
    expect(targetsOf(a)).toEqual(["production,preview"]);
    await vi.waitFor(async () => expect(Object.values(await entries(TYPE, dest)).map((e) => [e.sync_status, e.drift_count])).toEqual([["SYNCED", 1], ["SYNCED", 1]]), {
      timeout: 20_000,
      interval: 100,
    });
  });

  it("returns deployment_environments as given (order kept, duplicates dropped)", async () => {
    const dest = await destination(["production", "preview"]);
    expect((await read(destPath(TYPE, dest))).body.data.connection_details.deployment_environments).toEqual(["production", "preview"]);
    const p = await patch(destPath(TYPE, dest), { deployment_environments: "production,development,production" });
    expect(p.body.data.connection_details.deployment_environments).toEqual(["production", "development"]);
  });
});
