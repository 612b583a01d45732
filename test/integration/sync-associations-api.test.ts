/**
 * The association endpoints' shapes and refusals (Vault API: /v1/sys/sync, Vault API: /v1/sys/sync/destinations/:type/:name/associations): LIST
 * sys/sync/associations, reads by secret (path and query forms), set twice (refresh), the read
 * permission check, and 400s naming the field with nothing stored.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, list, mount, read, tokenWithPolicy, write } from "../helpers/api";
import { FakeCloudone, CLOUDONE_HOSTS } from "../helpers/fake-cloudone";
import { installFakes } from "../helpers/fake-router";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { RFC3339, destPath, kvSecret, setAssoc } from "../helpers/sync-engine";

const fake = new FakeCloudone({ [SECRETS.awsKey]: SECRETS.awsSecret });
let uninstall: () => void;
beforeAll(() => {
  uninstall = installFakes([{ hosts: CLOUDONE_HOSTS, fake }]);
});
afterAll(() => uninstall());

async function destination(): Promise<string> {
  const name = `aws-${uid()}`;
  await write(destPath("cloudone-sm", name), BODIES["cloudone-sm"]);
  return name;
}

describe("association reads", () => {
  it("LIST, read by path and by query; totals count associations and secrets", async () => {
    await list("sys/sync/associations", {}, 404);
    const d1 = await destination();
    const d2 = await destination();
    const a = await kvSecret({ x: "1" }, "team/app");
    const b = await kvSecret({ y: "2" }, "other");
    await setAssoc("cloudone-sm", d1, a);
    await setAssoc("cloudone-sm", d2, a);
    await setAssoc("cloudone-sm", d1, b);
    const l = await list("sys/sync/associations");
    expect(l.body.data.total_associations).toBe(3);
    expect(l.body.data.total_secrets).toBe(2);
    expect(l.body.data.keys).toEqual([`${a.mount}/team/app`, `${b.mount}/other`].sort());
    expect(l.body.data.key_info[`${a.mount}/team/app`]).toHaveLength(2);
    expect(l.body.data.key_info[`${a.mount}/team/app`][0]).toMatchObject({ mount: `${a.mount}/`, secret_path: "team/app" });

    const byPath = await read(`sys/sync/associations/${a.mount}/team/app`);
    const byQuery = await read(`sys/sync/associations/destinations?mount=${a.mount}&secret_name=team/app`);
    expect(byPath.body.data).toEqual(byQuery.body.data);
    const dests = byPath.body.data.associated_destinations;
    expect(Object.keys(dests).sort()).toEqual([`cloudone-sm/${d1}`, `cloudone-sm/${d2}`].sort());
    expect(dests[`cloudone-sm/${d1}`]).toMatchObject({ type: "cloudone-sm", name: d1, sync_status: "SYNCED" });
    expect(dests[`cloudone-sm/${d1}`].updated_at).toMatch(RFC3339);
  });

  it("set twice refreshes: one association, sent again", async () => {
    const d = await destination();
    const s = await kvSecret({ z: "1" });
    await setAssoc("cloudone-sm", d, s);
    const n = fake.calls.filter((c) => c.endsWith(`vault/${s.accessor}/${s.secret}`)).length;
    const r = await setAssoc("cloudone-sm", d, s);
    expect(Object.keys(r.body.data.associated_secrets)).toEqual([`${s.accessor}/${s.secret}`]);
    expect(fake.calls.filter((c) => c.endsWith(`vault/${s.accessor}/${s.secret}`)).length).toBeGreaterThan(n);
  });
});

describe("association refusals", () => {
  it("the caller must be able to read the secret (403 with the upstream message)", async () => {
    const d = await destination();
    const s = await kvSecret({ p: "1" }, "private");
    const token = await tokenWithPolicy(`path "sys/sync/*" { capabilities = ["read", "update", "list"] }`);
    const r = await api("POST", `${destPath("cloudone-sm", d)}/associations/set`, { token, body: { mount: s.mount, secret_name: "private" } });
    expect(r.status).toBe(403);
    expect(r.body.errors).toEqual([`permission denied to read the content of the secret private in mount ${s.mount}`]);
    const ok = await tokenWithPolicy(`path "sys/sync/*" { capabilities = ["read", "update", "list"] }\npath "${s.mount}/data/private" { capabilities = ["read"] }`);
    const r2 = await api("POST", `${destPath("cloudone-sm", d)}/associations/set`, { token: ok, body: { mount: s.mount, secret_name: "private" } });
    expect(r2.status).toBe(200);
  });

  it("bad input: 400 naming the field, nothing stored", async () => {
    const d = await destination();
    const s = await kvSecret({ q: "1" }, "q");
    const pki = await mount("pki");
    const set = (body: unknown) => api("POST", `${destPath("cloudone-sm", d)}/associations/set`, { body });
    const cases: [unknown, string][] = [
      [{ secret_name: "q" }, "mount"],
      [{ mount: s.mount }, "secret_name"],
      [{ mount: s.mount, secret_name: "dir/" }, "secret_name"],
      [{ mount: s.mount, secret_name: "missing" }, "secret_name"],
      [{ mount: "no-such-mount", secret_name: "q" }, "mount"],
      [{ mount: pki, secret_name: "q" }, "mount"],
    ];
    for (const [body, field] of cases) {
      const r = await set(body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.errors.join(" "), JSON.stringify(body)).toContain(field);
    }
    expect((await api("POST", `${destPath("cloudone-sm", "nope")}/associations/set`, { body: { mount: s.mount, secret_name: "q" } })).status).toBe(404);
    expect((await read(`${destPath("cloudone-sm", d)}/associations`)).body.data.associated_secrets).toEqual({});
  });
});
