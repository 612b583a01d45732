/**
 * Secrets sync and the lifecycle of what it hangs off: a namespace holding sync destinations or
 * repohost apps is not empty, so it cannot be deleted (CONTRACT.md "a namespace is deleted only
 * when empty"); disabling a KV-v2 mount unsyncs its associations through the engine, and a
 * removal still finds an association whose mount is gone.
 */
import { env } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { del, read, write } from "../helpers/api";
import { FakeCloudone, CLOUDONE_HOSTS } from "../helpers/fake-cloudone";
import { installFakes } from "../helpers/fake-router";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { RSA_PKCS8_PEM } from "../helpers/sync-fixtures";
import { destPath, entries, kvSecret, removeAssoc, setAssoc, waitForStatus } from "../helpers/sync-engine";

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
