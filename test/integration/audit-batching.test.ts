/**
 * Audit at load: entries batched per isolate, each entry once per device, filters.
 * The Queue is driven by hand as in audit-delivery.test.ts: the batcher's sends are captured
 * (setAuditQueueSendForTests, one call per device per flush) and handed to the Worker's `queue`
 * handler; in-process collectors (test/helpers/fake-router.ts) count what they receive by
 * entry id. Checked: a scripted session and a burst of 500 concurrent requests reach each
 * device exactly once per (request id, type), request before response; the burst shares Queue
 * messages (fewer messages than entries) and no request answers before its entries are queued;
 * one of two devices down for a while; a filter keeps a path away from one device only.
 */
import { createExecutionContext, createMessageBatch, env, getQueueResult } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setAuditQueueSendForTests } from "../../src/audit/enqueue";
import type { AuditEntry } from "../../src/audit/types";
import { asQueued, type Queued } from "../helpers/audit-queue";
import worker from "../../src/app/index";
import { api, del, mount, read, write } from "../helpers/api";
import { installFakes, type FakeProvider } from "../helpers/fake-router";
import { pkiWithRoot } from "../helpers/pki";
import { uid } from "../helpers/sync-bodies";

/** Counts entries by id; answers 503 while down. */
class Counter implements FakeProvider {
  up = true;
  byId = new Map<string, number>();
  order: string[] = [];
  /** Each id's entry as last received. */
  last = new Map<string, AuditEntry>();
  async handle(req: Request): Promise<Response> {
    if (!this.up) return new Response("down", { status: 503 });
    for (const line of (await req.text()).split("\n")) {
      if (line === "") continue;
      const e = JSON.parse(line) as AuditEntry;
      this.byId.set(e.id, (this.byId.get(e.id) ?? 0) + 1);
      this.order.push(e.id);
      this.last.set(e.id, e);
    }
    return new Response(null, { status: 204 });
  }
  /** Every id of `requestIds` exactly once, each request entry before its response entry. */
  expectOnce(requestIds: readonly string[]): void {
    for (const id of requestIds) {
      expect(this.byId.get(`${id}:request`), `${id}:request`).toBe(1);
      expect(this.byId.get(`${id}:response`), `${id}:response`).toBe(1);
      expect(this.order.indexOf(`${id}:request`)).toBeLessThan(this.order.indexOf(`${id}:response`));
    }
  }
}

const one = new Counter();
const two = new Counter();
let uninstall: () => void;
const captured: Queued[] = [];
/** Entry ids in the order their send returned (what is durably queued). */
const queuedIds = new Set<string>();
let seq = 0;

beforeAll(() => {
  uninstall = installFakes([
    { hosts: ["counter-one.test"], fake: one },
    { hosts: ["counter-two.test"], fake: two },
  ]);
  setAuditQueueSendForTests(async (_device, messages) => {
    const queued = messages.map(asQueued);
    captured.push(...queued);
    for (const m of queued) for (const e of m.entries) queuedIds.add(e.id);
  });
});
afterAll(() => {
  setAuditQueueSendForTests(null);
  uninstall();
});

async function disableAll(): Promise<void> {
  for (const p of Object.keys((await read("sys/audit")).body.data as object)) await del(`sys/audit/${p}`);
}

/** Hands messages to the Worker's queue handler in batches of `size`, as the queue would, until none is left. */
async function deliverAll(messages: Queued[], size = 100, down?: { counter: Counter; rounds: number }): Promise<void> {
  type Pending = { body: Queued; attempts: number };
  let backlog: Pending[] = messages.map((body) => ({ body, attempts: 1 }));
  for (let round = 0; backlog.length > 0; round++) {
    if (down) down.counter.up = round >= down.rounds;
    const part = backlog.slice(0, size);
    const batch = createMessageBatch(
      "lanyard-audit",
      part.map((m) => ({ id: `b${++seq}`, timestamp: new Date(), attempts: m.attempts, body: m.body.text })),
    );
    const ctx = createExecutionContext();
    await (worker as ExportedHandler<Env>).queue?.(batch, env, ctx);
    const result = await getQueueResult(batch, ctx);
    const byId = new Map(batch.messages.map((m, i) => [m.id, part[i] as Pending]));
    const retried: Pending[] = result.retryMessages.map((r: { msgId: string }) => byId.get(r.msgId) as Pending);
    backlog = [...backlog.slice(size), ...retried.map((m) => ({ body: m.body, attempts: m.attempts + 1 }))];
    expect(round).toBeLessThan(200);
  }
}

describe("audit batching: each entry once per device", () => {
  it("a scripted session and a burst of 500 concurrent requests: every (request id, type) exactly once per device, request before response, in shared messages; one device down for a while", async () => {
    await disableAll();
    await write("sys/audit/count-one", { type: "http", options: { address: "https://counter-one.test/in" } }, {}, 204);
    await write("sys/audit/count-two", { type: "http", options: { address: "https://counter-two.test/in" } }, {}, 204);
    captured.length = 0;
    const ids: string[] = [];
    const kv = await mount("kv");
    await write(`${kv}/data/app`, { data: { password: `p-${uid()}` } });
    const pki = await pkiWithRoot();
    await write(`${pki.path}/roles/web`, { allowed_domains: "example.com", allow_subdomains: true, key_type: "ec", key_bits: 256 });
    ids.push((await write(`${pki.path}/issue/web`, { common_name: "a.example.com" })).body.request_id as string);
    ids.push((await read(`${kv}/data/app`)).body.request_id as string);
    ids.push((await api("GET", "sys/mounts/nope-nothing-here", {})).headers.get("x-request-id") as string);

    // The burst: each answer arrives only once its own entries are queued.
    const early: string[] = [];
    const burst = await Promise.all(
      Array.from({ length: 500 }, () =>
        read(`${kv}/data/app`).then((r) => {
          const id = r.body.request_id as string;
          if (!queuedIds.has(`${id}:request`) || !queuedIds.has(`${id}:response`)) early.push(id);
          return id;
        }),
      ),
    );
    expect(early).toEqual([]);
    ids.push(...burst);
    const entries = captured.reduce((n, m) => n + m.entries.length, 0);
    // Shared messages: far fewer Queue messages than entries.
    expect(captured.length).toBeLessThan(entries / 4);
    // Each entry once per device in what was queued.
    const perDevice = new Map<string, Set<string>>();
    for (const m of captured) {
      let s = perDevice.get(m.device.id);
      if (!s) perDevice.set(m.device.id, (s = new Set()));
      for (const e of m.entries) {
        expect(s.has(e.id), `${e.id} queued twice for ${m.device.path}`).toBe(false);
        s.add(e.id);
      }
    }

    // Device two is down for the first three rounds of delivery (batches of 10 messages).
    await deliverAll(captured.splice(0), 10, { counter: two, rounds: 3 });
    one.expectOnce(ids);
    two.expectOnce(ids);
    await disableAll();
  });

  it("filter: refused at enable when it does not parse (400 naming filter), read back as written; a filtered path never reaches the device that excludes it and still reaches the other", async () => {
    await disableAll();
    for (const [bad, message] of [
      ["path = \"x\"", /^filter: /],
      ["token == \"x\"", /^filter: unknown selector "token"/],
      ["path matches \"(a)\\\\1\"", /^filter: /],
    ] as const) {
      const r = await api("POST", "sys/audit/bad-filter", { body: { type: "stdout", options: { filter: bad } } });
      expect(r.status, bad).toBe(400);
      expect(r.body.errors[0]).toMatch(message);
    }
    const kv = await mount("kv");
    const filter = `not (mount_point == "${kv}/" and operation == "read")`;
    await write("sys/audit/count-one", { type: "http", options: { address: "https://counter-one.test/in", filter } }, {}, 204);
    await write("sys/audit/count-two", { type: "http", options: { address: "https://counter-two.test/in" } }, {}, 204);
    expect((await read("sys/audit")).body.data["count-one/"].options).toEqual({ address: "https://counter-one.test/in", filter });
    captured.length = 0;
    const written = (await write(`${kv}/data/f`, { data: { v: "1" } })).body.request_id as string;
    const reads = await Promise.all(Array.from({ length: 20 }, async () => (await read(`${kv}/data/f`)).body.request_id as string));
    const refused = (await api("GET", `${kv}/data/missing`)).headers.get("x-request-id") as string;
    await deliverAll(captured.splice(0));
    // Device one: the write, never the reads (nor the refused read); device two: everything.
    one.expectOnce([written]);
    for (const id of [...reads, refused]) {
      expect(one.byId.has(`${id}:request`) || one.byId.has(`${id}:response`), id).toBe(false);
    }
    two.expectOnce([written, ...reads, refused]);
    await disableAll();
  });

  it("message text: a header line indexing the entries, the auth and request members once, then each entry's line without them; spliced back, the NDJSON line the collector gets; messages of the earlier formats are still delivered", async () => {
    await disableAll();
    await write("sys/audit/count-one", { type: "http", options: { address: "https://counter-one.test/in" } }, {}, 204);
    captured.length = 0;
    const id = (await read("sys/mounts")).body.request_id as string;
    // A read: its request and response entries travel in one hand-off, so in one message.
    const msgs = captured.splice(0);
    expect(msgs.flatMap((m) => m.entries.map((e) => e.id))).toEqual([`${id}:request`, `${id}:response`]);
    for (const m of msgs) {
      const [header, ...rest] = m.text.split("\n");
      const h = JSON.parse(header as string) as { v: number; shared: number; index: (string | number)[][] };
      expect(h).toMatchObject({ v: 3, device: { path: "count-one/", type: "http" } });
      expect(h.index.map((item) => item.slice(0, 2))).toEqual(m.entries.map((e) => [e.id, Date.parse(e.time)]));
      const shared = rest.slice(0, h.shared);
      const lines = rest.slice(h.shared);
      expect(lines.pop()).toBe("");
      for (const member of shared) expect(member).toMatch(/^,"(auth|request)":\{/);
      // The request member (and the auth member) stated once for both entries.
      expect(m.text.split(`"request":{"id":"${id}"`).length - 1).toBe(1);
      expect(m.text.split(`"auth":{`).length - 1).toBe(1);
      lines.forEach((line, i) => {
        const [, , at, ...ks] = h.index[i] as [string, number, number?, ...number[]];
        const whole = at === undefined ? line : line.slice(0, at) + ks.map((k) => shared[k]).join("") + line.slice(at);
        expect(whole).toBe(JSON.stringify(m.entries[i]));
      });
    }
    const whole = msgs.flatMap((m) => m.entries.map((e) => JSON.stringify(e)));
    expect(msgs.reduce((n, m) => n + m.text.length, 0)).toBeLessThan(whole.join("\n").length);
    // Delivered, the collector gets each entry whole.
    const before3 = one.order.length;
    await deliverAll(msgs);
    expect(one.order.slice(before3)).toEqual([`${id}:request`, `${id}:response`]);
    for (const e of msgs.flatMap((m) => m.entries)) expect(one.last.get(e.id)).toEqual(e);
    const v2 = `${JSON.stringify({ v: 2, device: (msgs[0] as Queued).device, index: msgs.flatMap((m) => m.entries.map((e) => [e.id, Date.parse(e.time)])) })}\n${whole.join("\n")}\n`;
    const before2 = one.order.length;
    await deliverAll([{ ...(msgs[0] as Queued), text: v2 }]);
    expect(one.order.slice(before2)).toEqual([`${id}:request`, `${id}:response`]);
    for (const e of msgs.flatMap((m) => m.entries)) expect(one.last.get(e.id)).toEqual(e);
    const first = msgs[0] as Queued;
    const old = JSON.stringify({ v: 1, device: first.device, entries: msgs.flatMap((m) => m.entries) });
    const before = one.order.length;
    await deliverAll([{ ...first, text: old }]);
    expect(one.order.slice(before)).toEqual([`${id}:request`, `${id}:response`]);
    await disableAll();
  });
});
