/**
 * The queue handler on its own (createMessageBatch / getQueueResult): a message delivered twice
 * is acked without a second provider call; a failing provider makes the message retry with the
 * backoff delay (Retry-After honoured); malformed messages are dropped; one bad message does not
 * fail the batch.
 */
import { createExecutionContext, createMessageBatch, createScheduledController, env, getQueueResult, waitOnExecutionContext } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import worker from "../../src/app/index";
import { write } from "../helpers/api";
import { FakeCloudone, CLOUDONE_HOSTS } from "../helpers/fake-cloudone";
import { installFakes } from "../helpers/fake-router";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { destPath, kvSecret, setAssoc } from "../helpers/sync-engine";

const fake = new FakeCloudone({ [SECRETS.awsKey]: SECRETS.awsSecret });
let uninstall: () => void;
beforeAll(() => {
  uninstall = installFakes([{ hosts: CLOUDONE_HOSTS, fake }]);
});
afterAll(() => uninstall());

async function associationId(accessor: string, secret: string): Promise<string> {
  const r = await env.DB.prepare("SELECT id FROM sync_associations WHERE mount_accessor = ? AND secret_name = ?").bind(accessor, secret).first<{ id: string }>();
  if (!r) throw new Error("association not found");
  return r.id;
}

async function runBatch(messages: { id: string; body: unknown; attempts?: number }[]) {
  const batch = createMessageBatch("lanyard-sync", messages.map((m) => ({ id: m.id, timestamp: new Date(), attempts: m.attempts ?? 1, body: m.body })));
  // getQueueResult does not report delays: record them from the messages' retry calls.
  const delays: Record<string, number | undefined> = {};
  for (const m of batch.messages) {
    const original = m.retry.bind(m);
    m.retry = (o?: QueueRetryOptions) => {
      delays[m.id] = o?.delaySeconds;
      original(o);
    };
  }
  const ctx = createExecutionContext();
  await (worker as ExportedHandler<Env>).queue?.(batch, env, ctx);
  return { ...(await getQueueResult(batch, ctx)), delays };
}

describe("sync queue handler", () => {
  it("a message delivered twice: both acked, the provider called once for the change", async () => {
    const name = `aws-${uid()}`;
    await write(destPath("cloudone-sm", name), BODIES["cloudone-sm"]);
    await env.DB.prepare("UPDATE sync_config SET disabled = 0").run();
    const s = await kvSecret({ x: "1" });
    await setAssoc("cloudone-sm", name, s);
    const id = await associationId(s.accessor, s.secret);
    // Mark a new generation without enqueuing (as a KV change would), then deliver it twice.
    await env.DB.prepare("UPDATE sync_associations SET generation = generation + 1 WHERE id = ?").bind(id).run();
    const before = fake.calls.length;
    // Redelivered in a later batch: the second finds the generation done and acks.
    const r1 = await runBatch([{ id: "m1", body: { kind: "association", id } }]);
    const r2 = await runBatch([{ id: "m2", body: { kind: "association", id }, attempts: 2 }]);
    expect(r1.outcome).toBe("ok");
    expect([...r1.explicitAcks, ...r2.explicitAcks]).toEqual(["m1", "m2"]);
    expect(fake.calls.slice(before).filter((c) => c.startsWith("PutSecretValue"))).toHaveLength(1);
    // Twice in one batch (handled concurrently): one does the work, the other acks or retries
    // later because the association is busy; either way the provider sees one write.
    await env.DB.prepare("UPDATE sync_associations SET generation = generation + 1 WHERE id = ?").bind(id).run();
    const mid = fake.calls.length;
    const r3 = await runBatch([
      { id: "m5", body: { kind: "association", id } },
      { id: "m6", body: { kind: "association", id } },
    ]);
    expect(r3.outcome).toBe("ok");
    expect(r3.explicitAcks.length + r3.retryMessages.length).toBe(2);
    expect(fake.calls.slice(mid).filter((c) => c.startsWith("PutSecretValue"))).toHaveLength(1);
  });

  it("retryable failure: retry with backoff honouring Retry-After; final attempt leaves it failed and acks", async () => {
    const name = `aws-${uid()}`;
    // A region of its own: the 17 s the provider asks for pauses every request to this key and
    // region (docs/secrets-sync.md "4. Provider limits are respected", src/engines/sync/limits/index.ts), which the next test must not wait out.
    await write(destPath("cloudone-sm", name), { ...BODIES["cloudone-sm"], region: "eu-west-1" });
    const s = await kvSecret({ x: "2" });
    await setAssoc("cloudone-sm", name, s);
    const id = await associationId(s.accessor, s.secret);
    await env.DB.prepare("UPDATE sync_associations SET generation = generation + 1 WHERE id = ?").bind(id).run();
    fake.faults.push({ kind: "status", status: 429, body: { __type: "ThrottlingException", message: "slow down" }, headers: { "retry-after": "17" } });
    const r1 = await runBatch([{ id: "m3", body: { kind: "association", id } }]);
    expect(r1.retryMessages.map((m: { msgId: string }) => m.msgId)).toEqual(["m3"]);
    expect(r1.delays.m3).toBe(17);
    fake.faults.push({ kind: "status", status: 500, body: { __type: "InternalServiceError", message: "down" } });
    const r2 = await runBatch([{ id: "m4", body: { kind: "association", id }, attempts: 5 }]);
    expect(r2.explicitAcks).toEqual(["m4"]);
    const row = await env.DB.prepare("SELECT sync_status, generation, done_generation FROM sync_associations WHERE id = ?").bind(id).first<{ sync_status: string; generation: number; done_generation: number }>();
    expect(row?.sync_status).toBe("EXTERNAL_SERVICE_ERROR");
    expect(row?.done_generation).toBe(row?.generation);
  });

  it("malformed messages are acked and dropped; other messages of the batch still run", async () => {
    const res = await runBatch([
      { id: "bad", body: { kind: "nope" } },
      { id: "gone", body: { kind: "association", id: "no-such-association" } },
    ]);
    expect(res.outcome).toBe("ok");
    expect(res.explicitAcks.sort()).toEqual(["bad", "gone"]);
  });
});

describe("cron reconciliation", () => {
  it("re-drives a failed association and a stuck one (no live lease, old) to SYNCED", async () => {
    const name = `aws-${uid()}`;
    await write(destPath("cloudone-sm", name), BODIES["cloudone-sm"]);
    const failed = await kvSecret({ r: "1" });
    const stuck = await kvSecret({ r: "2" });
    await setAssoc("cloudone-sm", name, failed);
    await setAssoc("cloudone-sm", name, stuck);
    const fid = await associationId(failed.accessor, failed.secret);
    const sid = await associationId(stuck.accessor, stuck.secret);
    const old = Date.now() - 60 * 60_000;
    fake.secrets.delete(`vault/${failed.accessor}/${failed.secret}`);
    fake.secrets.delete(`vault/${stuck.accessor}/${stuck.secret}`);
    await env.DB.prepare("UPDATE sync_associations SET sync_status = 'EXTERNAL_SERVICE_ERROR', updated_at = ? WHERE id = ?").bind(old, fid).run();
    await env.DB.prepare("UPDATE sync_associations SET sync_status = 'SYNCING', generation = generation + 1, updated_at = ?, lease_until = ? WHERE id = ?").bind(old, old, sid).run();
    const ctx = createExecutionContext();
    await (worker as ExportedHandler<Env>).scheduled?.(createScheduledController({ scheduledTime: new Date(), cron: "* * * * *" }), env, ctx);
    await waitOnExecutionContext(ctx);
    await vi.waitFor(
      async () => {
        const rows = await env.DB.prepare("SELECT sync_status FROM sync_associations WHERE id IN (?, ?)").bind(fid, sid).all<{ sync_status: string }>();
        expect(rows.results.map((r) => r.sync_status)).toEqual(["SYNCED", "SYNCED"]);
      },
      { timeout: 20_000, interval: 200 },
    );
    expect(fake.value(`vault/${failed.accessor}/${failed.secret}`)).toBe('{"r":"1"}');
    expect(fake.value(`vault/${stuck.accessor}/${stuck.secret}`)).toBe('{"r":"2"}');
  });
});
