/**
 * Fault tests of the sync engine against the cloudone-sm fake: a
 * provider answering 500, 429 with Retry-After, timing out, or rejecting the credentials; a
 * late retry after a remove; the engine disabled and re-enabled with a backlog (queue_capacity,
 * 429); a purge with a failing provider. After each, statuses are truthful and every
 * association ends where the last user action says.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { api, del, patch, read, write } from "../helpers/api";
import { FakeCloudone, CLOUDONE_HOSTS } from "../helpers/fake-cloudone";
import { installFakes } from "../helpers/fake-router";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { destPath, entries, kvSecret, removeAssoc, setAssoc, waitForStatus } from "../helpers/sync-engine";

const fake = new FakeCloudone({ [SECRETS.awsKey]: SECRETS.awsSecret });
let uninstall: () => void;
beforeAll(() => {
  uninstall = installFakes([{ hosts: CLOUDONE_HOSTS, fake }]);
});
afterAll(() => uninstall());

async function destination(extra: Record<string, unknown> = {}): Promise<string> {
  const name = `aws-${uid()}`;
  await write(destPath("cloudone-sm", name), { ...BODIES["cloudone-sm"], ...extra });
  return name;
}

const serverError = { kind: "status" as const, status: 500, body: { __type: "InternalServiceError", message: "An error occurred on the server side." } };

describe("provider failures", () => {
  it("500: EXTERNAL_SERVICE_ERROR with the provider's code, then the queue retries to SYNCED", async () => {
    const dest = await destination();
    const s = await kvSecret({ k: "v-500" });
    const key = `${s.accessor}/${s.secret}`;
    fake.faults.push(serverError);
    const r = await setAssoc("cloudone-sm", dest, s);
    const e = r.body.data.associated_secrets[key];
    expect(e.sync_status).toBe("EXTERNAL_SERVICE_ERROR");
    expect(e.last_error).toContain("InternalServiceError");
    expect(JSON.stringify(r.body)).not.toContain("v-500");
    await waitForStatus("cloudone-sm", dest, key, "SYNCED");
    expect(fake.value(`vault/${s.accessor}/${s.secret}`)).toBe('{"k":"v-500"}');
  });

  it("429 with Retry-After and a timeout: retried, ends SYNCED", async () => {
    const dest = await destination();
    const s = await kvSecret({ k: "v-429" });
    const key = `${s.accessor}/${s.secret}`;
    fake.faults.push({ kind: "status", status: 400, body: { __type: "ThrottlingException", message: "Rate exceeded" }, headers: { "retry-after": "1" } }, { kind: "timeout" });
    const r = await setAssoc("cloudone-sm", dest, s);
    expect(r.body.data.associated_secrets[key].sync_status).toBe("EXTERNAL_SERVICE_ERROR");
    expect(r.body.data.associated_secrets[key].last_error).toContain("ThrottlingException");
    await waitForStatus("cloudone-sm", dest, key, "SYNCED", 30_000);
    expect(fake.value(`vault/${s.accessor}/${s.secret}`)).toBe('{"k":"v-429"}');
  });

  it("rejected credentials: CLIENT_SIDE_ERROR, not retried; fixing them and setting again syncs", async () => {
    const dest = await destination({ secret_access_key: "wrong-secret-key-0123456789" });
    const s = await kvSecret({ k: "v-cred" });
    const key = `${s.accessor}/${s.secret}`;
    const r = await setAssoc("cloudone-sm", dest, s);
    expect(r.body.data.associated_secrets[key].sync_status).toBe("CLIENT_SIDE_ERROR");
    expect(r.body.data.associated_secrets[key].last_error).toContain("InvalidSignatureException");
    expect(JSON.stringify(r.body)).not.toContain("wrong-secret-key");
    const before = fake.calls.length;
    await new Promise((res) => setTimeout(res, 2500));
    expect(fake.calls.length).toBe(before);
    await write(destPath("cloudone-sm", dest), BODIES["cloudone-sm"]);
    const again = await setAssoc("cloudone-sm", dest, s);
    expect(again.body.data.associated_secrets[key].sync_status).toBe("SYNCED");
  });

  it("a late retry does not resurrect a secret removed meanwhile", async () => {
    const dest = await destination();
    const s = await kvSecret({ k: "v-late" });
    const key = `${s.accessor}/${s.secret}`;
    fake.faults.push(serverError);
    const r = await setAssoc("cloudone-sm", dest, s);
    expect(r.body.data.associated_secrets[key].sync_status).toBe("EXTERNAL_SERVICE_ERROR");
    const rm = await removeAssoc("cloudone-sm", dest, s);
    expect(rm.body.data.associated_secrets[key].sync_status).toBe("UNSYNCED");
    // The retry message (2 s backoff) arrives after the remove: it must find nothing to do.
    await new Promise((res) => setTimeout(res, 4000));
    expect(fake.secrets.has(`vault/${s.accessor}/${s.secret}`)).toBe(false);
    expect(await entries("cloudone-sm", dest)).toEqual({});
  });
});

describe("disabled engine with a backlog", () => {
  it("parks PENDING up to queue_capacity (429 beyond), then converges to the last action once re-enabled", async () => {
    const dest = await destination();
    const a = await kvSecret({ v: "a1" }, "a");
    const b = await kvSecret({ v: "b1" }, "b");
    const c = await kvSecret({ v: "c1" }, "c");
    await setAssoc("cloudone-sm", dest, b);
    await patch("sys/sync/config", { disabled: true, queue_capacity: 2 });
    try {
      const ra = await setAssoc("cloudone-sm", dest, a);
      expect(ra.body.data.associated_secrets[`${a.accessor}/a`].sync_status).toBe("PENDING");
      // A removal is parked too.
      const rb = await removeAssoc("cloudone-sm", dest, b);
      expect(rb.body.data.associated_secrets[`${b.accessor}/b`].sync_status).toBe("PENDING");
      const full = await setAssoc("cloudone-sm", dest, c, {}, 429);
      expect(full.body.errors[0]).toContain("queue_capacity");
      // Setting an already-parked one again does not need a new slot; a KV write keeps it parked.
      await setAssoc("cloudone-sm", dest, a);
      await write(`${a.mount}/data/a`, { data: { v: "a2" } });
      await new Promise((res) => setTimeout(res, 1500));
      expect(fake.secrets.has(`vault/${a.accessor}/a`)).toBe(false);
      expect(fake.value(`vault/${b.accessor}/b`)).toBe('{"v":"b1"}');
      expect((await entries("cloudone-sm", dest))[`${a.accessor}/a`]?.sync_status).toBe("PENDING");
    } finally {
      await patch("sys/sync/config", { disabled: false });
    }
    await waitForStatus("cloudone-sm", dest, `${a.accessor}/a`, "SYNCED");
    expect(fake.value(`vault/${a.accessor}/a`)).toBe('{"v":"a2"}');
    await vi.waitFor(() => expect(fake.secrets.has(`vault/${b.accessor}/b`)).toBe(false), { timeout: 20_000, interval: 200 });
    await vi.waitFor(async () => expect((await entries("cloudone-sm", dest))[`${b.accessor}/b`]).toBeUndefined(), { timeout: 20_000, interval: 200 });
    await patch("sys/sync/config", { queue_capacity: 1_000_000 });
  });
});

describe("purge", () => {
  it("a purge with a failing provider records purge_error, retries, then unsyncs everything and deletes the destination", async () => {
    const dest = await destination();
    const a = await kvSecret({ v: "p1" }, "p1");
    const b = await kvSecret({ v: "p2" }, "p2");
    await setAssoc("cloudone-sm", dest, a);
    await setAssoc("cloudone-sm", dest, b);
    await del(destPath("cloudone-sm", dest), {}, 400);
    fake.faults.push(serverError, serverError);
    await del(`${destPath("cloudone-sm", dest)}?purge=true`);
    await vi.waitFor(
      async () => {
        const r = await read(destPath("cloudone-sm", dest));
        expect(r.body.data.purge_initiated_at).toBeTruthy();
        expect(r.body.data.purge_error).toContain("InternalServiceError");
      },
      { timeout: 20_000, interval: 100 },
    );
    await vi.waitFor(async () => expect((await api("GET", destPath("cloudone-sm", dest))).status).toBe(404), { timeout: 30_000, interval: 250 });
    expect(fake.secrets.has(`vault/${a.accessor}/p1`)).toBe(false);
    expect(fake.secrets.has(`vault/${b.accessor}/p2`)).toBe(false);
  });
});
