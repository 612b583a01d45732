/**
 * The sync engine end to end against the cloudone-sm fake: set → SYNCED, KV write propagates,
 * delete/undelete, remove → UNSYNCED, STS AssumeRole with external id, bad credentials; a
 * rewrite sets the tags again only when the destination changed since the name's last write.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { del, patch, write } from "../helpers/api";
import { FakeCloudone, CLOUDONE_HOSTS } from "../helpers/fake-cloudone";
import { installFakes } from "../helpers/fake-router";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { RFC3339, destPath, entries, kvSecret, removeAssoc, setAssoc, waitForStatus } from "../helpers/sync-engine";

const fake = new FakeCloudone({ [SECRETS.awsKey]: SECRETS.awsSecret });
let uninstall: () => void;
beforeAll(() => {
  uninstall = installFakes([{ hosts: CLOUDONE_HOSTS, fake }]);
});
afterAll(() => uninstall());

async function destination(extra: Record<string, unknown> = {}): Promise<string> {
  const name = `aws-${uid()}`;
  await write(destPath("cloudone-sm", name), { ...BODIES["cloudone-sm"], custom_tags: { team: "core" }, ...extra });
  return name;
}

describe("cloudone-sm sync", () => {
  it("set → SYNCED with the value at the provider; KV write propagates; remove → UNSYNCED and gone", async () => {
    const dest = await destination();
    const s = await kvSecret({ user: "app", password: "s3cret-1" });
    const r = await setAssoc("cloudone-sm", dest, s);
    const key = `${s.accessor}/${s.secret}`;
    expect(r.body.data.store_name).toBe(dest);
    expect(r.body.data.store_type).toBe("cloudone-sm");
    const e = r.body.data.associated_secrets[key];
    expect(e).toMatchObject({ accessor: s.accessor, secret_name: s.secret, sync_status: "SYNCED" });
    expect(e.updated_at).toMatch(RFC3339);
    const external = `vault/${s.accessor}/${s.secret}`;
    expect(JSON.parse(fake.value(external) ?? "null")).toEqual({ user: "app", password: "s3cret-1" });
    expect(fake.secrets.get(external)?.tags).toEqual({ "hashicorp:vault": "", "lanyard-managed": "true", team: "core" });
    expect(JSON.stringify(r.body)).not.toContain("s3cret-1");

    await write(`${s.mount}/data/${s.secret}`, { data: { user: "app", password: "s3cret-2" } });
    await vi.waitFor(() => expect(JSON.parse(fake.value(external) ?? "null")).toEqual({ user: "app", password: "s3cret-2" }), { timeout: 20_000, interval: 100 });
    await waitForStatus("cloudone-sm", dest, key, "SYNCED");

    const rm = await removeAssoc("cloudone-sm", dest, s);
    expect(rm.body.data.associated_secrets[key].sync_status).toBe("UNSYNCED");
    expect(fake.secrets.has(external)).toBe(false);
    expect(await entries("cloudone-sm", dest)).toEqual({});
    // Remove again: success, nothing left.
    await removeAssoc("cloudone-sm", dest, s);
    await del(destPath("cloudone-sm", dest));
  });

  it("a rewrite is one PutSecretValue; after the destination changed, the next write sets the new tags", async () => {
    const dest = await destination();
    // The round that writes next starts strictly after the destination's last change.
    await new Promise((r) => setTimeout(r, 5));
    const s = await kvSecret({ v: "1" });
    await setAssoc("cloudone-sm", dest, s);
    const external = `vault/${s.accessor}/${s.secret}`;
    const callsOf = (from: number) => fake.calls.slice(from).filter((c) => c.endsWith(` ${external}`)).map((c) => c.split(" ")[0]);
    const rewrite = async (v: string) => {
      const from = fake.calls.length;
      await write(`${s.mount}/data/${s.secret}`, { data: { v } });
      await vi.waitFor(() => expect(fake.value(external)).toBe(JSON.stringify({ v })), { timeout: 20_000, interval: 100 });
      await waitForStatus("cloudone-sm", dest, `${s.accessor}/${s.secret}`, "SYNCED");
      return callsOf(from);
    };
    expect(await rewrite("2")).toEqual(["PutSecretValue"]);
    expect(fake.secrets.get(external)?.tags).toEqual({ "hashicorp:vault": "", "lanyard-managed": "true", team: "core" });

    await patch(destPath("cloudone-sm", dest), { custom_tags: { team: "edge" } });
    expect(await rewrite("3")).toEqual(["PutSecretValue", "TagResource"]);
    expect(fake.secrets.get(external)?.tags).toEqual({ "hashicorp:vault": "", "lanyard-managed": "true", team: "edge" });
    await new Promise((r) => setTimeout(r, 5));
    expect(await rewrite("4")).toEqual(["PutSecretValue"]);
  });

  it("deleting the current version unsyncs; undelete re-syncs", async () => {
    const dest = await destination();
    const s = await kvSecret({ a: "1" });
    await setAssoc("cloudone-sm", dest, s);
    const external = `vault/${s.accessor}/${s.secret}`;
    const key = `${s.accessor}/${s.secret}`;
    expect(fake.value(external)).toBe('{"a":"1"}');
    await del(`${s.mount}/data/${s.secret}`);
    await vi.waitFor(() => expect(fake.secrets.has(external)).toBe(false), { timeout: 20_000, interval: 100 });
    await waitForStatus("cloudone-sm", dest, key, "UNSYNCED");
    await write(`${s.mount}/undelete/${s.secret}`, { versions: [1] }, {}, 204);
    await vi.waitFor(() => expect(fake.value(external)).toBe('{"a":"1"}'), { timeout: 20_000, interval: 100 });
    await waitForStatus("cloudone-sm", dest, key, "SYNCED");
  });
});
