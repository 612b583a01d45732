/**
 * cloudtwo-kv (client-credentials token, PUT/DELETE/purge, soft-delete recovery) and
 * cloudthree-sm (service-account JWT exchange, create with labels, add version, delete) against
 * their fakes; tokens are cached across operations.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { write } from "../helpers/api";
import { FakeCloudthree, CLOUDTHREE_HOSTS } from "../helpers/fake-cloudthree";
import { FakeCloudtwo, CLOUDTWO_HOSTS } from "../helpers/fake-cloudtwo";
import { installFakes } from "../helpers/fake-router";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { RSA_PKCS8_PEM } from "../helpers/sync-fixtures";
import { destPath, kvSecret, removeAssoc, setAssoc, waitForStatus } from "../helpers/sync-engine";
import { parsePem } from "../../src/engines/sync/rsa";

const azure = new FakeCloudtwo();
const gcp = new FakeCloudthree();
let uninstall: () => void;
beforeAll(async () => {
  azure.addClient(BODIES["cloudtwo-kv"].tenant_id, BODIES["cloudtwo-kv"].client_id, SECRETS.clientSecret);
  await gcp.addAccount("sync@lanyard-test-project.iam.gserviceaccount.com", parsePem(RSA_PKCS8_PEM).der);
  uninstall = installFakes([
    { hosts: CLOUDTWO_HOSTS, fake: azure },
    { hosts: CLOUDTHREE_HOSTS, fake: gcp },
  ]);
});
afterAll(() => uninstall());

const hyphen = (s: string) => s.replace(/[^0-9A-Za-z-]/g, "-");

describe("cloudtwo-kv", () => {
  it("set → SYNCED with tags, KV write is a new version, remove deletes and purges; token cached", async () => {
    const dest = `az-${uid()}`;
    await write(destPath("cloudtwo-kv", dest), { ...BODIES["cloudtwo-kv"], custom_tags: { env: "test" } });
    const s = await kvSecret({ a: "v1" });
    const name = hyphen(`vault-${s.accessor}-${s.secret}`);
    const before = azure.tokenRequests;
    expect((await setAssoc("cloudtwo-kv", dest, s)).body.data.associated_secrets[`${s.accessor}/${s.secret}`].sync_status).toBe("SYNCED");
    expect(azure.value(name)).toBe('{"a":"v1"}');
    expect(azure.secrets.get(name.toLowerCase())?.tags).toEqual({ "hashicorp:vault": "", "lanyard-managed": "true", env: "test" });
    await write(`${s.mount}/data/${s.secret}`, { data: { a: "v2" } });
    await vi.waitFor(() => expect(azure.value(name)).toBe('{"a":"v2"}'), { timeout: 20_000, interval: 100 });
    expect(azure.secrets.get(name.toLowerCase())?.version).toBe(2);
    await waitForStatus("cloudtwo-kv", dest, `${s.accessor}/${s.secret}`, "SYNCED");
    expect(azure.tokenRequests - before).toBeLessThanOrEqual(1);
    await removeAssoc("cloudtwo-kv", dest, s);
    expect(azure.secrets.has(name.toLowerCase())).toBe(false);
  });

  it("a soft-deleted name is recovered and written; a bad client secret is CLIENT_SIDE_ERROR", async () => {
    const dest = `az-${uid()}`;
    await write(destPath("cloudtwo-kv", dest), BODIES["cloudtwo-kv"]);
    const s = await kvSecret({ b: "1" });
    const name = hyphen(`vault-${s.accessor}-${s.secret}`);
    azure.secrets.set(name.toLowerCase(), { name, value: "old", version: 3, tags: {}, deleted: true });
    expect((await setAssoc("cloudtwo-kv", dest, s)).body.data.associated_secrets[`${s.accessor}/${s.secret}`].sync_status).toBe("SYNCED");
    expect(azure.value(name)).toBe('{"b":"1"}');

    const bad = `az-bad-${uid()}`;
    await write(destPath("cloudtwo-kv", bad), { ...BODIES["cloudtwo-kv"], client_secret: "not-the-secret-000" });
    const e = (await setAssoc("cloudtwo-kv", bad, s)).body.data.associated_secrets[`${s.accessor}/${s.secret}`];
    expect(e.sync_status).toBe("CLIENT_SIDE_ERROR");
    expect(e.last_error).toContain("invalid_client");
    expect(JSON.stringify(e)).not.toContain("not-the-secret");
  });
});

describe("cloudthree-sm", () => {
  it("set creates the secret with labels and a version; KV write adds a version; remove deletes", async () => {
    const dest = `gcp-${uid()}`;
    await write(destPath("cloudthree-sm", dest), { ...BODIES["cloudthree-sm"], custom_tags: { team: "core" } });
    const s = await kvSecret({ c: "1" });
    const id = `vault_${s.accessor}_${s.secret.replace(/\//g, "_")}`;
    const r = await setAssoc("cloudthree-sm", dest, s);
    expect(r.body.data.associated_secrets[`${s.accessor}/${s.secret}`].sync_status).toBe("SYNCED");
    expect(gcp.value("lanyard-test-project", id)).toBe('{"c":"1"}');
    expect(gcp.secrets.get(`lanyard-test-project/${id}`)?.labels).toEqual({ "hashicorp-vault": "", "lanyard-managed": "true", team: "core" });
    await write(`${s.mount}/data/${s.secret}`, { data: { c: "2" } });
    await vi.waitFor(() => expect(gcp.value("lanyard-test-project", id)).toBe('{"c":"2"}'), { timeout: 20_000, interval: 100 });
    expect(gcp.secrets.get(`lanyard-test-project/${id}`)?.versions).toHaveLength(2);
    await waitForStatus("cloudthree-sm", dest, `${s.accessor}/${s.secret}`, "SYNCED");
    await removeAssoc("cloudthree-sm", dest, s);
    expect(gcp.secrets.has(`lanyard-test-project/${id}`)).toBe(false);
  });

  it("project_id overrides the key's project; an empty value under secret-key is refused by the provider", async () => {
    const dest = `gcp-${uid()}`;
    await write(destPath("cloudthree-sm", dest), { ...BODIES["cloudthree-sm"], project_id: "other-project", granularity: "secret-key" });
    const s = await kvSecret({ full: "x", empty: "" });
    const r = await setAssoc("cloudthree-sm", dest, s);
    const entries = r.body.data.associated_secrets;
    const only = Object.values(entries)[0] as Record<string, unknown>;
    expect(only.sync_status).toBe("CLIENT_SIDE_ERROR");
    expect(String(only.last_error)).toContain("INVALID_ARGUMENT");
    expect(gcp.value("other-project", `vault_${s.accessor}_app_config_full`)).toBe("x");
  });
});
