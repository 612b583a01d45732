/**
 * Secrets sync and the lifecycle of what it hangs off: a namespace holding sync destinations or
 * repohost apps is not empty, so it cannot be deleted (docs/http-conventions.md, namespaces: "a namespace is deleted only
 * when empty"); disabling a KV-v2 mount unsyncs its associations through the engine, and a
 * removal still finds an association whose mount is gone.
 */
import { env } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { del, patch, read, write } from "../helpers/api";
import { FakeCloudone, CLOUDONE_HOSTS } from "../helpers/fake-cloudone";
import { installFakes } from "../helpers/fake-router";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { RSA_PKCS8_PEM } from "../helpers/sync-fixtures";
import { destPath, entries, kvSecret, removeAssoc, setAssoc } from "../helpers/sync-engine";

const fake = new FakeCloudone({ [SECRETS.awsKey]: SECRETS.awsSecret });
let uninstall: () => void;
beforeAll(() => {
  uninstall = installFakes([{ hosts: CLOUDONE_HOSTS, fake }]);
});
afterAll(() => uninstall());

describe("namespace deletion and secrets sync", () => {
  it("refuses to delete a namespace while sync destinations or repohost apps exist in it, naming them", async () => {
    const ns = `ns${uid()}`;
    await write(`sys/namespaces/${ns}`);
    await write(destPath("cloudone-sm", "left"), BODIES["cloudone-sm"], { namespace: ns });
    await write("sys/sync/repohost-apps/app1", { app_id: "123", private_key: RSA_PKCS8_PEM }, { namespace: ns });
    const r = await del(`sys/namespaces/${ns}`, {}, 400);
    expect(r.body.errors[0]).toContain("cloudone-sm/left");
    expect(r.body.errors[0]).toContain("repohost apps (app1)");
    await read(`sys/namespaces/${ns}`);

    await del(destPath("cloudone-sm", "left"), { namespace: ns });
    const r2 = await del(`sys/namespaces/${ns}`, {}, 400);
    expect(r2.body.errors[0]).toContain("app1");
    expect(r2.body.errors[0]).not.toContain("destinations");
    await del("sys/sync/repohost-apps/app1", { namespace: ns });
    await del(`sys/namespaces/${ns}`, {}, 204);
    await read(`sys/namespaces/${ns}`, {}, 404);
  });

  it("a namespace whose associations were all removed is deleted with their leftovers", async () => {
    const ns = `ns${uid()}`;
    await write(`sys/namespaces/${ns}`);
    const opts = { namespace: ns };
    const name = `aws-${uid()}`;
    await write(destPath("cloudone-sm", name), BODIES["cloudone-sm"], opts);
    await write("sys/mounts/kv", { type: "kv-v2" }, opts, 204);
    await write("kv/data/app", { data: { a: "1" } }, opts);
    const s = { mount: "kv", secret: "app", accessor: "" };
    await setAssoc("cloudone-sm", name, s, opts);
    await removeAssoc("cloudone-sm", name, s, opts);
    await del(destPath("cloudone-sm", name), opts);
    await del("sys/mounts/kv", opts);
    await del(`sys/namespaces/${ns}`, {}, 204);
    const row = await env.DB.prepare("SELECT count(*) AS n FROM sync_associations WHERE destination_name = ?").bind(name).first<{ n: number }>();
    expect(row?.n).toBe(0);
  });
});

async function destination(): Promise<string> {
  const name = `aws-${uid()}`;
  await write(destPath("cloudone-sm", name), BODIES["cloudone-sm"]);
  return name;
}

const waitFor = (check: () => Promise<void> | void) => vi.waitFor(check, { timeout: 20_000, interval: 200 });

describe("disabling a KV-v2 mount", () => {
  it("unsyncs its associations: the provider copy is deleted and the association ends UNSYNCED", async () => {
    const dest = await destination();
    const s = await kvSecret({ v: "1" }, "gone/soon");
    const other = await kvSecret({ v: "2" }, "stays");
    await setAssoc("cloudone-sm", dest, s);
    await setAssoc("cloudone-sm", dest, other);
    expect(fake.value(`vault/${s.accessor}/gone/soon`)).toBe('{"v":"1"}');
    await del(`sys/mounts/${s.mount}`);
    await waitFor(() => expect(fake.secrets.has(`vault/${s.accessor}/gone/soon`)).toBe(false));
    // A finished removal is no longer listed; the other mount's association is untouched.
    await waitFor(async () => expect(Object.keys(await entries("cloudone-sm", dest))).toEqual([`${other.accessor}/stays`]));
    expect(fake.value(`vault/${other.accessor}/stays`)).toBe('{"v":"2"}');
    // Removing it afterwards by its old mount path is not an error, and there is nothing left.
    const r = await removeAssoc("cloudone-sm", dest, s);
    expect(r.body.data.associated_secrets).toEqual({ [`${other.accessor}/stays`]: expect.objectContaining({ sync_status: "SYNCED" }) });
    // The destination can now be deleted once the other association is removed too.
    await removeAssoc("cloudone-sm", dest, other);
    await del(destPath("cloudone-sm", dest), {}, 204);
  });

  it("while syncing is disabled the unsync waits as PENDING; remove by the old mount path or accessor works; re-enabling finishes it", async () => {
    const dest = await destination();
    const a = await kvSecret({ v: "a" }, "a");
    const b = await kvSecret({ v: "b" }, "b");
    await setAssoc("cloudone-sm", dest, a);
    await setAssoc("cloudone-sm", dest, b);
    await patch("sys/sync/config", { disabled: true });
    try {
      await del(`sys/mounts/${a.mount}`);
      await del(`sys/mounts/${b.mount}`);
      const e = await entries("cloudone-sm", dest);
      expect(e[`${a.accessor}/a`]?.sync_status).toBe("PENDING");
      // The mount is gone, yet remove finds the association (was: 400 "mount: no mount at").
      const ra = await removeAssoc("cloudone-sm", dest, a);
      expect(ra.body.data.associated_secrets[`${a.accessor}/a`].sync_status).toBe("PENDING");
      const rb = await write(`${destPath("cloudone-sm", dest)}/associations/remove`, { mount: b.accessor, secret_name: "b" });
      expect(rb.body.data.associated_secrets[`${b.accessor}/b`].sync_status).toBe("PENDING");
      // An unknown mount is still refused.
      const bad = await write(`${destPath("cloudone-sm", dest)}/associations/remove`, { mount: "never-mounted", secret_name: "a" }, {}, 400);
      expect(bad.body.errors[0]).toContain("mount");
      expect(fake.value(`vault/${a.accessor}/a`)).toBe('{"v":"a"}');
    } finally {
      await patch("sys/sync/config", { disabled: false });
    }
    await waitFor(() => {
      expect(fake.secrets.has(`vault/${a.accessor}/a`)).toBe(false);
      expect(fake.secrets.has(`vault/${b.accessor}/b`)).toBe(false);
    });
    await waitFor(async () => expect(await entries("cloudone-sm", dest)).toEqual({}));
    await del(destPath("cloudone-sm", dest), {}, 204);
  });
});
