/**
 * Re-enabling syncing (sys/sync/config disabled=false): everything with unfinished work is
 * re-sent, the PENDING backlog and the KV changes dropped because the queue was full; and the
 * resume is a sweep walked a page per queue message, so the re-enabling request stays small at
 * any backlog size.
 */
import { env } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { patch, write } from "../helpers/api";
import { FakeCloudone, CLOUDONE_HOSTS } from "../helpers/fake-cloudone";
import { installFakes } from "../helpers/fake-router";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { destPath, entries, kvSecret, setAssoc, waitForStatus } from "../helpers/sync-engine";
import { openDb } from "../../src/core/db/client";
import { loadConfig } from "../../src/core/config";
import { resumePending, sweepUnfinished } from "../../src/engines/sync/operations";
import type { SyncMessage } from "../../src/engines/sync/messages";

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

describe("re-enabling syncing", () => {
  it("re-sends a KV change that was dropped because the queue was full", async () => {
    const dest = await destination();
    const a = await kvSecret({ v: "a1" }, "a");
    const b = await kvSecret({ v: "b1" }, "b");
    await setAssoc("cloudone-sm", dest, a);
    await patch("sys/sync/config", { disabled: true, queue_capacity: 1 });
    try {
      // b takes the only slot; a's change then finds the queue full.
      await setAssoc("cloudone-sm", dest, b);
      await write(`${a.mount}/data/a`, { data: { v: "a2" } });
      await vi.waitFor(
        async () => {
          const e = (await entries("cloudone-sm", dest))[`${a.accessor}/a`];
          expect(e?.sync_status).toBe("INTERNAL_VAULT_ERROR");
          expect(e?.last_error).toContain("queue was full");
        },
        { timeout: 10_000, interval: 100 },
      );
      expect(fake.value(`vault/${a.accessor}/a`)).toBe('{"v":"a1"}');
    } finally {
      await patch("sys/sync/config", { disabled: false, queue_capacity: 1_000_000 });
    }
    // No cron runs here: the re-enable itself must bring both through.
    await waitForStatus("cloudone-sm", dest, `${a.accessor}/a`, "SYNCED");
    expect(fake.value(`vault/${a.accessor}/a`)).toBe('{"v":"a2"}');
    await waitForStatus("cloudone-sm", dest, `${b.accessor}/b`, "SYNCED");
    expect(fake.value(`vault/${b.accessor}/b`)).toBe('{"v":"b1"}');
  });

  it("resuming sends one sweep message; each sweep page queues its ids and the next page", async () => {
    const dest = await destination();
    await patch("sys/sync/config", { disabled: true });
    const parked: string[] = [];
    try {
      for (let i = 0; i < 5; i++) {
        const s = await kvSecret({ i: String(i) }, `p${i}`);
        await setAssoc("cloudone-sm", dest, s);
      }
      const rows = await env.DB.prepare("SELECT id FROM sync_associations WHERE destination_name = ? AND done_generation < generation").bind(dest).all<{ id: string }>();
      parked.push(...rows.results.map((r) => r.id));
      expect(parked).toHaveLength(5);
    } finally {
      await env.DB.prepare("UPDATE sync_config SET disabled = 0").run();
    }
    const sent: SyncMessage[] = [];
    const recording = {
      ...env,
      SYNC_QUEUE: {
        async send(body: SyncMessage) {
          sent.push(body);
        },
        async sendBatch(msgs: Iterable<MessageSendRequest<SyncMessage>>) {
          for (const m of msgs) sent.push(m.body);
        },
      },
    } as unknown as Env;
    const deps = { env: recording, db: openDb(env.DB), keys: loadConfig(env).seal };
    await resumePending(deps);
    expect(sent).toEqual([{ kind: "sweep", after: "" }]);

    // Walk the sweep with pages of 2: every parked association is queued exactly once.
    const queued: string[] = [];
    let next: SyncMessage | undefined = sent.pop();
    let pages = 0;
    while (next && next.kind === "sweep") {
      await sweepUnfinished(deps, next.after, next.mountId, 2);
      pages++;
      next = undefined;
      for (const m of sent.splice(0)) {
        if (m.kind === "association") queued.push(m.id);
        else if (m.kind === "sweep") next = m;
      }
    }
    expect(pages).toBe(3);
    expect(queued.sort()).toEqual(expect.arrayContaining([...parked].sort()));
    expect(new Set(queued).size).toBe(queued.length);
  });
});
