/**
 * Expiry notifications (docs/pki-notifications.md): config/notifications (targets checked by the
 * outbound-URL rules, header values sealed at rest and read back masked, thresholds), the scan
 * (each certificate and issuer once per threshold and target, short-lived and revoked ones not
 * at all), and delivery through the `lanyard-notify` consumer to a test collector that is down
 * (500) for a while and then up: everything arrives exactly once, nothing is lost. The queue is
 * driven by hand as in audit-delivery.test.ts: sends are captured (setNotifyQueueSendForTests)
 * and handed to the Worker's `queue` handler in batches.
 */
import { createExecutionContext, createMessageBatch, env, getQueueResult } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import worker from "../../src/app/index";
import { notifyRetryDelay } from "../../src/engines/pki/notify/deliver";
import { setNotifyQueueSendForTests, type NotifyMessage } from "../../src/engines/pki/notify/queue";
import { notifyScanJob, STALE_SECONDS } from "../../src/engines/pki/notify/scan";
import { api, del, list, read, write } from "../helpers/api";
import { installFakes, type FakeProvider } from "../helpers/fake-router";
import { pkiWithRoot } from "../helpers/pki";

/** A webhook collector: records each POST while up; answers 500 while down. */
class Collector implements FakeProvider {
  up = true;
  posts: { body: Record<string, unknown>; authorization: string | null; contentType: string | null }[] = [];
  refused = 0;
  async handle(req: Request): Promise<Response> {
    if (!this.up) {
      this.refused++;
      return new Response("down", { status: 500 });
    }
    this.posts.push({ body: (await req.json()) as Record<string, unknown>, authorization: req.headers.get("authorization"), contentType: req.headers.get("content-type") });
    return new Response(null, { status: 204 });
  }
}

const hook = new Collector();
const slack = new Collector();
let uninstall: () => void;
const captured: NotifyMessage[] = [];
let seq = 0;

beforeAll(() => {
  uninstall = installFakes([
    { hosts: ["hooks.collector.test"], fake: hook },
    { hosts: ["slack.collector.test"], fake: slack },
  ]);
  setNotifyQueueSendForTests(async (m) => {
    captured.push(...m);
  });
});
afterAll(() => {
  setNotifyQueueSendForTests(null);
  uninstall();
});

interface Pending {
  body: NotifyMessage;
  attempts: number;
}

/** One batch through the Worker's queue handler; returns the messages it asked to retry. */
async function runBatch(messages: Pending[]): Promise<{ retried: Pending[]; acked: number; delays: number[] }> {
  const batch = createMessageBatch(
    "lanyard-notify",
    messages.map((m) => ({ id: `n${++seq}`, timestamp: new Date(), attempts: m.attempts, body: m.body })),
  );
  const delays: number[] = [];
  for (const m of batch.messages) {
    const original = m.retry.bind(m);
    m.retry = (o?: QueueRetryOptions) => {
      delays.push(o?.delaySeconds ?? 0);
      original(o);
    };
  }
  const ctx = createExecutionContext();
  await (worker as ExportedHandler<Env>).queue?.(batch, env, ctx);
  const result = await getQueueResult(batch, ctx);
  const byId = new Map(batch.messages.map((m, i) => [m.id, messages[i] as Pending]));
  const retried = result.retryMessages.map((r: { msgId: string }) => {
    const p = byId.get(r.msgId) as Pending;
    return { body: p.body, attempts: p.attempts + 1 };
  });
  return { retried, acked: result.explicitAcks.length, delays };
}

const HOUR = 3600_000;

describe("config/notifications", () => {
  it("seals header values, reads them back masked, and checks every field", async () => {
    const { path } = await pkiWithRoot();
    expect((await api("GET", `${path}/config/notifications`)).status).toBe(404);
    const secret = "Bearer s3cr3t-collector-token";
    const w = await write(`${path}/config/notifications`, { targets: [{ url: "https://hooks.collector.test/x", format: "json", headers: { Authorization: secret } }] });
    expect(w.body.data).toEqual({ targets: [{ url: "https://hooks.collector.test/x", format: "json", headers: { Authorization: "********" } }], thresholds: ["720h", "168h", "24h"] });
    const r = await read(`${path}/config/notifications`);
    expect(r.text).not.toContain("s3cr3t");
    expect(r.body.data.targets[0].headers).toEqual({ Authorization: "********" });
    const raw = await env.DB.prepare("SELECT value FROM pki_config WHERE name = 'notifications'").all<{ value: string }>();
    for (const row of raw.results) expect(row.value).not.toContain("s3cr3t");
    // Writing back what was read keeps the stored value.
    await write(`${path}/config/notifications`, { ...r.body.data, thresholds: ["48h", "2h"] });
    expect((await read(`${path}/config/notifications`)).body.data.thresholds).toEqual(["48h", "2h"]);

    const bad: [unknown, RegExp][] = [
      [{ targets: [] }, /^targets:/],
      [{ targets: [{ url: "http://hooks.collector.test/x" }] }, /^targets\[0\]\.url: must be an https/],
      [{ targets: [{ url: "https://user:pw@hooks.collector.test/x" }] }, /^targets\[0\]\.url: credentials/],
      [{ targets: [{ url: "ftp://hooks.collector.test/x" }] }, /^targets\[0\]\.url: unsupported scheme/],
      [{ targets: [{ url: "https://a.test/", format: "xml" }] }, /^targets\[0\]\.format:/],
      [{ targets: [{ url: "https://a.test/", headers: { "bad name": "v" } }] }, /^targets\[0\]\.headers:/],
      [{ targets: [{ url: "https://a.test/", headers: { A: "********" } }] }, /^targets\[0\]\.headers: masked/],
      [{ targets: [{ url: "https://a.test/" }], thresholds: ["soon"] }, /^thresholds:/],
      [{ targets: [{ url: "https://a.test/" }], thresholds: ["10s"] }, /^thresholds:/],
    ];
    for (const [body, msg] of bad) {
      const res = await api("POST", `${path}/config/notifications`, { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.errors[0]).toMatch(msg);
    }
    await del(`${path}/config/notifications`);
    expect((await api("GET", `${path}/config/notifications`)).status).toBe(404);
  });
});

describe("scan and delivery", () => {
  it("tells each target once per threshold of certificates and issuers, and loses nothing while the collector is down", async () => {
    const now = Date.now();
    const { path } = await pkiWithRoot({ ttl: "100h", cn: "Short Root" });
    // Before any leaf: the only stored certificate is the root's.
    const [rootSerial = ""] = (await list(`${path}/certs`)).body.data.keys as string[];
    await write(`${path}/roles/r`, { allow_any_name: true, key_type: "ec", max_ttl: "99h" });
    const issue = async (cn: string, ttl: string) => (await write(`${path}/issue/r`, { common_name: cn, ttl })).body.data.serial_number as string;
    const a = await issue("a.example.com", "30h");
    const b = await issue("b.example.com", "90h");
    await issue("short.example.com", "10h");
    const gone = await issue("revoked.example.com", "30h");
    await write(`${path}/revoke`, { serial_number: gone });
    await write(`${path}/config/notifications`, {
      targets: [
        { url: "https://hooks.collector.test/lanyard", format: "json", headers: { Authorization: "Bearer hook-token" } },
        { url: "https://slack.collector.test/services/T/B/X", format: "slack" },
      ],
    });

    captured.length = 0;
    await notifyScanJob(env, now);
    await notifyScanJob(env, now);
    await notifyScanJob(env, now + 7 * HOUR);
    await notifyScanJob(env, now + 8 * HOUR);
    await notifyScanJob(env, now + 80 * HOUR);
    await notifyScanJob(env, now + 81 * HOUR);
    const mine = captured.filter((m) => m.serial === a || m.serial === b || m.serial === rootSerial || m.serial === gone);
    // Root: 720h and 168h at once (100 h left), 24h at +80 h; a and b: 24h each; two targets.
    expect(mine).toHaveLength(10);
    expect(new Set(mine.map((m) => `${m.serial}|${m.threshold}|${m.target}`)).size).toBe(10);

    // The collectors are down for the first three attempts of every message.
    hook.up = false;
    slack.up = false;
    let pending: { body: NotifyMessage; attempts: number }[] = mine.map((body) => ({ body, attempts: 1 }));
    const delays: number[] = [];
    for (let round = 0; round < 3; round++) {
      const r = await runBatch(pending);
      expect(r.acked).toBe(0);
      delays.push(...r.delays);
      pending = r.retried;
    }
    expect(pending).toHaveLength(10);
    expect(delays.slice(0, 10).every((d) => d === notifyRetryDelay(1))).toBe(true);
    expect(notifyRetryDelay(3)).toBe(120);
    expect(notifyRetryDelay(100)).toBe(6 * 3600);
    const row = await env.DB.prepare("SELECT attempts, last_error, state FROM pki_notify_sent WHERE serial = ? AND threshold = '24h' LIMIT 1").bind(a).first();
    expect(row).toEqual({ attempts: 3, last_error: "HTTP 500", state: "pending" });

    hook.up = true;
    slack.up = true;
    const r = await runBatch(pending);
    expect(r.retried).toEqual([]);
    // The queue delivering a message again (at-least-once) sends nothing more.
    const again = await runBatch(pending);
    expect(again.acked).toBe(10);
    expect(hook.posts).toHaveLength(5);
    expect(slack.posts).toHaveLength(5);
    for (const p of hook.posts) {
      expect(p.authorization).toBe("Bearer hook-token");
      expect(p.contentType).toBe("application/json");
    }
    for (const p of slack.posts) expect(p.authorization).toBeNull();
    const got = hook.posts.map((p) => p.body).sort((x, y) => `${x.serial_number}${x.threshold}`.localeCompare(`${y.serial_number}${y.threshold}`));
    const rfc = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
    const expected = [
      { kind: "certificate", serial_number: a, common_name: "a.example.com", threshold: "24h" },
      { kind: "certificate", serial_number: b, common_name: "b.example.com", threshold: "24h" },
      { kind: "issuer", serial_number: rootSerial, common_name: "Short Root", threshold: "168h" },
      { kind: "issuer", serial_number: rootSerial, common_name: "Short Root", threshold: "24h" },
      { kind: "issuer", serial_number: rootSerial, common_name: "Short Root", threshold: "720h" },
    ].sort((x, y) => `${x.serial_number}${x.threshold}`.localeCompare(`${y.serial_number}${y.threshold}`));
    expect(got.map((g) => ({ kind: g.kind, serial_number: g.serial_number, common_name: g.common_name, threshold: g.threshold }))).toEqual(expected);
    for (const g of got) {
      expect(g.mount).toBe(`${path}/`);
      expect(g.not_after).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
    }
    const aPost = got.find((g) => g.serial_number === a);
    expect(Math.abs(Date.parse(String(aPost?.not_after)) - (now + 30 * HOUR))).toBeLessThan(120_000);
    expect(rfc(Date.parse(String(aPost?.not_after)))).toBe(aPost?.not_after);
    for (const p of slack.posts) expect(Object.keys(p.body)).toEqual(["text"]);
    expect(slack.posts.some((p) => String(p.body.text).includes("a.example.com") && String(p.body.text).includes("24h"))).toBe(true);

    // A later scan queues nothing new; a lost message (pending, untouched) is queued again.
    captured.length = 0;
    await notifyScanJob(env, now + 82 * HOUR);
    expect(captured.filter((m) => m.serial === a || m.serial === b || m.serial === rootSerial)).toEqual([]);
    await env.DB.prepare("UPDATE pki_notify_sent SET state = 'pending', updated_at = ? WHERE serial = ? AND threshold = '24h' AND target = ?")
      .bind(Math.floor(Date.now() / 1000) - STALE_SECONDS - 10, a, mine.find((m) => m.serial === a)?.target ?? "")
      .run();
    await notifyScanJob(env, now + 82 * HOUR);
    expect(captured.filter((m) => m.serial === a)).toHaveLength(1);
  });
});
