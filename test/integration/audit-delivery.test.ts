/**
 * Audit delivery (docs/audit.md): the `lanyard-audit` queue consumer and its sinks.
 * The queue is driven by hand as in sync-engine-queue.test.ts: the core's Queue send is captured
 * (setAuditQueueSendForTests) and the captured messages are handed to the Worker's `queue`
 * handler in batches (createMessageBatch / getQueueResult), so a collector outage and the
 * retries are under the test's control. Collectors are in-process fakes behind the global fetch
 * (test/helpers/fake-router.ts): each checks the Content-Type, decodes the NDJSON (gunzip when
 * `Content-Encoding: gzip`), records entries and can be switched down.
 */
import { createExecutionContext, createMessageBatch, env, getQueueResult } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { deleteDevice, deviceAt, insertDevice } from "../../src/audit/audit-store";
import { retryDelaySeconds } from "../../src/audit/delivery/consumer";
import { enqueueEntries, setAuditQueueSendForTests } from "../../src/audit/enqueue";
import { hmacValue } from "../../src/audit/hmac";
import type { AuditDevice, AuditEntry } from "../../src/audit/types";
import { asQueued, type Queued } from "../helpers/audit-queue";
import worker from "../../src/app/index";
import { loadConfig } from "../../src/core/config";
import { openDb } from "../../src/core/db/client";
import { api, del, mount, read, ROOT, write, type ApiResult } from "../helpers/api";
import { CLOUDONE_HOSTS, FakeCloudone } from "../helpers/fake-cloudone";
import { pkiWithRoot } from "../helpers/pki";
import { installFakes, type FakeProvider } from "../helpers/fake-router";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { destPath, kvSecret, setAssoc } from "../helpers/sync-engine";

/** A log collector: accepts NDJSON POSTs while up, answers 503 while down. */
class Collector implements FakeProvider {
  up = true;
  /** While down: the answer (a status) or no answer at all (the connection fails). */
  downAs: number | "unreachable" = 503;
  entries: AuditEntry[] = [];
  posts: { encoding: string | null; authorization: string | null; lines: number }[] = [];
  problems: string[] = [];
  async handle(req: Request): Promise<Response> {
    if (!this.up) {
      if (this.downAs === "unreachable") throw new TypeError("Network connection lost.");
      return new Response("down", { status: this.downAs, headers: this.downAs === 302 ? { location: "https://elsewhere.test/" } : {} });
    }
    if (req.method !== "POST") this.problems.push(`method ${req.method}`);
    if (req.headers.get("content-type") !== "application/x-ndjson") this.problems.push(`content-type ${req.headers.get("content-type")}`);
    const encoding = req.headers.get("content-encoding");
    const raw = encoding === "gzip" ? req.body?.pipeThrough(new DecompressionStream("gzip")) : req.body;
    const text = await new Response(raw).text();
    if (!text.endsWith("\n")) this.problems.push("body does not end with a newline");
    const lines = text.split("\n").filter((l) => l !== "");
    for (const l of lines) this.entries.push(JSON.parse(l) as AuditEntry);
    this.posts.push({ encoding, authorization: req.headers.get("authorization"), lines: lines.length });
    return new Response(null, { status: 204 });
  }
  ids(): string[] {
    return this.entries.map((e) => e.id);
  }
}

const a = new Collector();
const b = new Collector();
const e2e = new Collector();
let uninstall: () => void;
const captured: Queued[] = [];
let seq = 0;

beforeAll(() => {
  uninstall = installFakes([
    { hosts: ["collector-a.test"], fake: a },
    { hosts: ["collector-b.test"], fake: b },
    { hosts: ["collector-e2e.test"], fake: e2e },
    { hosts: CLOUDONE_HOSTS, fake: new FakeCloudone({ [SECRETS.awsKey]: SECRETS.awsSecret }) },
  ]);
  setAuditQueueSendForTests(async (_device, messages) => {
    captured.push(...messages.map(asQueued));
  });
});
afterAll(() => {
  setAuditQueueSendForTests(null);
  uninstall();
});

const keys = () => loadConfig(env).seal;
const db = () => openDb(env.DB);

async function enable(path: string, type: "http" | "r2", options: Record<string, string>, headers: Record<string, string> | null = null): Promise<AuditDevice> {
  expect(await insertDevice(db(), keys(), { path, type, description: "", options, headers, local: false })).toBe(true);
  const d = await deviceAt(db(), keys(), path);
  if (!d) throw new Error(`device ${path} not found`);
  return d;
}

/** Takes every captured message (the queue's backlog). */
const drain = (): Queued[] => captured.splice(0);

interface Delivered {
  body: Queued;
  attempts: number;
}

interface BatchResult {
  outcome: string;
  explicitAcks: string[];
  retryMessages: unknown[];
  /** The retried messages with the delay each asked for. */
  retried: (Delivered & { delay: number | undefined })[];
}

/** Hands messages to the Worker's queue handler as one batch; returns acks, retries and delays. */
async function runBatch(messages: Delivered[], queue = "lanyard-audit"): Promise<BatchResult> {
  const batch = createMessageBatch(
    queue,
    messages.map((m) => ({ id: `m${++seq}`, timestamp: new Date(), attempts: m.attempts, body: m.body.text })),
  );
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
  const result = await getQueueResult(batch, ctx);
  const bodyOf = new Map(batch.messages.map((m, i) => [m.id, messages[i] as Delivered]));
  const retried: BatchResult["retried"] = result.retryMessages.map((r: { msgId: string }) => ({ ...(bodyOf.get(r.msgId) as Delivered), delay: delays[r.msgId] }));
  return { outcome: result.outcome, explicitAcks: result.explicitAcks, retryMessages: result.retryMessages, retried };
}

// Entry times: workerd's clock stands still between I/O in a test, so each pair gets its own.
let clock = Date.parse("2026-03-04T23:59:58.000Z");

/** A request/response pair as the dispatcher would build it (before HMAC). */
function pair(path: string, operation: string, data: Record<string, unknown> | null, answer: Record<string, unknown> | null, token: string): AuditEntry[] {
  const id = crypto.randomUUID();
  clock += 700;
  const now = new Date(clock).toISOString();
  const auth = { client_token: token, accessor: `acc-${id.slice(0, 8)}`, policies: ["root"], display_name: "root" };
  const request = { id, operation, path, namespace: { id: "root", path: "" }, data, client_token: token, remote_address: "203.0.113.9" };
  return [
    { id: `${id}:request`, time: now, type: "request", auth, request },
    { id: `${id}:response`, time: now, type: "response", auth, request, response: { data: answer, status_code: 200 } },
  ];
}

/** What the dispatcher hands over for one request: the request entry first, then the response entry. */
async function record(devices: AuditDevice[], entries: AuditEntry[]): Promise<void> {
  const [req] = entries;
  if (!req) throw new Error("no entries");
  await enqueueEntries(env, devices, [req]);
  await enqueueEntries(env, devices, entries.slice(1));
}

describe("audit delivery: the consumer", () => {
  it("delivers every entry to each http device in request order, once, HMAC'd, gzip'd on request", async () => {
    const da = await enable("coll-a/", "http", { address: "https://collector-a.test/ingest" }, { Authorization: "Bearer collector-cred-a" });
    const db2 = await enable("coll-b/", "http", { address: "https://collector-b.test/v1/logs", compress: "true" });
    const token = "hvs.session-token-0123456789";
    const secret = "kv-plaintext-value-42";
    const session = [
      pair("auth/token/create", "update", { policies: ["default"] }, { client_token: "hvs.child-token-abcdef" }, token),
      pair("secret/data/app", "update", { data: { password: secret } }, { version: 1 }, token),
      pair("secret/data/app", "read", null, { data: { password: secret } }, token),
    ];
    for (const entries of session) await record([da, db2], entries);
    const msgs = drain();
    // Two devices × (request message + response message) per request.
    expect(msgs).toHaveLength(12);
    // The queue may deliver out of order: hand them over reversed, in one batch.
    const r = await runBatch(msgs.reverse().map((body) => ({ body, attempts: 1 })));
    expect(r.outcome).toBe("ok");
    expect(r.retryMessages).toEqual([]);
    expect(r.explicitAcks).toHaveLength(12);
    const expected = session.flat().map((e) => e.id);
    for (const [c, d] of [
      [a, da],
      [b, db2],
    ] as const) {
      expect(c.problems).toEqual([]);
      expect(c.ids()).toEqual(expected);
      expect(c.posts).toHaveLength(1);
      const readAnswer = c.entries[5];
      expect(readAnswer?.response?.data).toEqual({ data: { password: await hmacValue(d.salt, secret) } });
      expect(c.entries[0]?.auth?.client_token).toBe(await hmacValue(d.salt, token));
      expect(JSON.stringify(c.entries)).not.toContain(secret);
      expect(JSON.stringify(c.entries)).not.toContain(token);
    }
    expect(a.posts[0]).toMatchObject({ encoding: null, authorization: "Bearer collector-cred-a" });
    expect(b.posts[0]).toMatchObject({ encoding: "gzip", authorization: null });
    // Two devices hash the same value differently (per-device salt).
    expect(a.entries[0]?.auth?.client_token).not.toBe(b.entries[0]?.auth?.client_token);
  });
});

describe("audit delivery: failures", () => {
  it("a collector down: its messages retry with 2, 4, 8, 16, 20 s backoff; the other device is never re-sent; all arrive once it is back", async () => {
    const dc = await enable("down-c/", "http", { address: "https://collector-a.test/down" });
    const dd = await enable("up-d/", "http", { address: "https://collector-b.test/up" });
    const session = [pair("secret/data/x", "update", { data: { k: "v1" } }, { version: 1 }, "hvs.t1-0123456789"), pair("secret/data/x", "read", null, { data: { k: "v1" } }, "hvs.t1-0123456789")];
    for (const entries of session) await record([dc, dd], entries);
    const expected = session.flat().map((e) => e.id);
    const [aBefore, bBefore] = [a.entries.length, b.posts.length];
    let pending: Delivered[] = drain().map((body) => ({ body, attempts: 1 }));
    const delays: (number | undefined)[] = [];
    a.up = false;
    // Each round: the down device's messages come back with one more attempt; the up device's
    // messages were acked in the first round and never come back.
    for (const downAs of [503, 302, "unreachable", 500, 429, 503] as const) {
      a.downAs = downAs;
      const r = await runBatch(pending);
      expect(r.outcome).toBe("ok");
      expect(r.retried.every((m) => m.body.device.id === dc.id)).toBe(true);
      expect(r.retried).toHaveLength(4);
      delays.push(...new Set(r.retried.map((m) => m.delay)));
      pending = r.retried.map((m) => ({ body: m.body, attempts: m.attempts + 1 }));
    }
    expect(delays).toEqual([2, 4, 8, 16, 20, 20]);
    expect(a.entries.length).toBe(aBefore);
    expect(b.posts.length).toBe(bBefore + 1);
    expect(b.ids().slice(-4)).toEqual(expected);
    a.up = true;
    const r = await runBatch(pending);
    expect(r.retryMessages).toEqual([]);
    expect(r.explicitAcks).toHaveLength(4);
    expect(a.ids().slice(aBefore)).toEqual(expected);
    expect(b.posts.length).toBe(bBefore + 1);
    expect(retryDelaySeconds(100)).toBe(20);
  });

  it("each entry is queued once; after a failed delivery, newer messages wait so a response never reaches the collector before its request", async () => {
    const dh = await enable(`order-${uid()}/`, "http", { address: "https://collector-a.test/order" });
    const pairs = [pair("secret/data/o", "update", { data: { k: "1" } }, { version: 1 }, "hvs.t3-0123456789"), pair("secret/data/o", "read", null, { data: { k: "1" } }, "hvs.t3-0123456789")];
    for (const entries of pairs) await record([dh], entries);
    const queued = drain();
    const ids = queued.flatMap((m) => m.entries.map((e) => e.id));
    expect(ids).toEqual(pairs.flat().map((e) => e.id)); // each entry once, no repeated request entry
    const before = a.entries.length;
    // The first request's entry fails; its response (and the next request) arrive first.
    a.up = false;
    const first = await runBatch([{ body: queued[0] as Queued, attempts: 1 }]);
    expect(first.retried).toHaveLength(1);
    a.up = true;
    const newer = await runBatch(queued.slice(1).map((body) => ({ body, attempts: 1 })));
    expect(newer.retried).toHaveLength(3); // held behind the failed one, not delivered
    expect(a.entries.length).toBe(before);
    await runBatch(first.retried.map((m) => ({ body: m.body, attempts: m.attempts + 1 })));
    await runBatch(newer.retried.map((m) => ({ body: m.body, attempts: m.attempts + 1 })));
    expect(a.ids().slice(before)).toEqual(pairs.flat().map((e) => e.id));
  });

  it("a device disabled meanwhile: acked and dropped without a POST; unreadable messages wait for the dead-letter queue, which replays like the queue", async () => {
    const dg = await enable("gone-g/", "http", { address: "https://collector-a.test/gone" });
    const dk = await enable("kept-k/", "http", { address: "https://collector-b.test/kept" });
    await record([dg, dk], pair("sys/mounts", "read", null, { "secret/": { type: "kv" } }, "hvs.t2-0123456789"));
    await deleteDevice(db(), "gone-g/");
    const [aPosts, bPosts] = [a.posts.length, b.posts.length];
    const msgs = drain().map((body) => ({ body, attempts: 3 }));
    const junk = { body: { text: '{"v":3,"device":{"id":"x"}}\n', device: { id: "x", path: "x/", type: "http" }, entries: [] } as Queued, attempts: 1 };
    const r = await runBatch([...msgs, junk]);
    expect(r.explicitAcks).toHaveLength(4);
    expect(r.retried).toHaveLength(1);
    expect(r.retried[0]).toMatchObject({ body: junk.body, delay: 60 });
    expect(a.posts.length).toBe(aPosts);
    expect(b.posts.length).toBe(bPosts + 1);
    // Replay from the dead-letter queue (when wrangler.toml gives it a consumer): same delivery.
    const replay = await runBatch(msgs.filter((m) => m.body.device.id === dk.id), "lanyard-audit-dlq");
    expect(replay.explicitAcks).toHaveLength(2);
    expect(b.posts.length).toBe(bPosts + 2);
  });
});

describe("audit delivery: the r2 device", () => {
  async function objects(prefix: string): Promise<{ key: string; entries: AuditEntry[]; contentType?: string; encoding?: string }[]> {
    const listed = await env.AUDIT_BUCKET.list({ prefix });
    return Promise.all(
      listed.objects.map(async (o) => {
        const obj = await env.AUDIT_BUCKET.get(o.key);
        if (!obj) throw new Error(`object ${o.key} vanished`);
        const gz = obj.httpMetadata?.contentEncoding === "gzip";
        const text = await new Response(gz ? obj.body.pipeThrough(new DecompressionStream("gzip")) : obj.body).text();
        expect(text.endsWith("\n")).toBe(true);
        const entries = text
          .split("\n")
          .filter((l) => l !== "")
          .map((l) => JSON.parse(l) as AuditEntry);
        return { key: o.key, entries, contentType: obj.httpMetadata?.contentType, encoding: obj.httpMetadata?.contentEncoding };
      }),
    );
  }

  it("writes each batch as one NDJSON object under <prefix><YYYYMMDD>/<start>_<end>_<id>.log[.gz]; a re-sent batch overwrites its object", async () => {
    const plain = await enable("r2-plain/", "r2", {});
    const gz = await enable("r2-gz/", "r2", { prefix: "logs/vault/", compress: "true" });
    clock = Date.parse("2026-03-04T23:59:58.900Z");
    const session = [pair("secret/data/r", "update", { data: { s: "r2-secret" } }, { version: 1 }, "hvs.t3-0123456789"), pair("secret/data/r", "read", null, { data: { s: "r2-secret" } }, "hvs.t3-0123456789")];
    for (const entries of session) await record([plain, gz], entries);
    const msgs = drain();
    const first = await runBatch(msgs.map((body) => ({ body, attempts: 1 })));
    expect(first.explicitAcks).toHaveLength(8);
    // At-least-once: the same batch delivered again lands on the same keys.
    await runBatch(msgs.map((body) => ({ body, attempts: 2 })));
    const expected = session.flat().map((e) => e.id);
    const p = await objects("audit/");
    expect(p).toHaveLength(1);
    expect(p[0]?.key).toMatch(/^audit\/20260304\/20260304T235959Z_20260305T000000Z_[0-9a-f]{16}\.log$/);
    expect(p[0]?.contentType).toBe("application/x-ndjson");
    expect(p[0]?.entries.map((e) => e.id)).toEqual(expected);
    expect(JSON.stringify(p[0]?.entries)).not.toContain("r2-secret");
    const g = await objects("logs/vault/");
    expect(g).toHaveLength(1);
    expect(g[0]?.key).toMatch(/^logs\/vault\/20260304\/20260304T235959Z_20260305T000000Z_[0-9a-f]{16}\.log\.gz$/);
    expect(g[0]?.encoding).toBe("gzip");
    expect(g[0]?.entries.map((e) => e.id)).toEqual(expected);
    expect(g[0]?.entries[3]?.response?.data).toEqual({ data: { s: await hmacValue(gz.salt, "r2-secret") } });
  });
});

describe("audit delivery: end to end through the dispatcher", () => {
  /** The request id of an answer: the envelope's request_id, else X-Request-Id (204s). */
  function requestId(r: ApiResult): string {
    const header = r.headers.get("x-request-id");
    const body = r.body as { request_id?: string } | null;
    if (body?.request_id && header) expect(body.request_id).toBe(header);
    const id = body?.request_id ?? header;
    if (!id) throw new Error("answer without a request id");
    return id;
  }

  it("a scripted session reaches the collector (down for a while) and the r2 device: every entry, request before response, HMACs as sys/audit-hash, no plaintext secret", async () => {
    // Start from no device: the earlier tests' devices are disabled through the API.
    for (const p of Object.keys((await read("sys/audit")).body.data as object)) await del(`sys/audit/${p}`);
    drain();
    const collectorCredential = `Bearer e2e-collector-credential-${uid()}`;
    const ids: string[] = [];
    const call = async (r: Promise<ApiResult>): Promise<ApiResult> => {
      const res = await r;
      ids.push(requestId(res));
      return res;
    };
    // The r2 device first, so it records the http device's enablement (its header in request.data).
    await call(write("sys/audit/e2e-r2", { type: "r2", options: { prefix: "e2e/" } }, {}, 204));
    await call(write("sys/audit/e2e-http", { type: "http", options: { address: "https://collector-e2e.test/ingest", headers: { Authorization: collectorCredential } } }, {}, 204));
    const enabledAt = ids.length; // the http device records from the next request on
    // The session: a token, a KV secret written and read, a certificate issued, a sync association.
    const created = await call(write("auth/token/create", { policies: ["default"], ttl: "1h" }));
    const child = created.body.auth.client_token as string;
    const childAccessor = created.body.auth.accessor as string;
    await call(api("GET", "auth/token/lookup-self", { token: child }));
    const kv = await mount("kv");
    ids.push("(mount)");
    const kvValue = `e2e-kv-password-${uid()}`;
    await call(write(`${kv}/data/app/db`, { data: { password: kvValue } }));
    await call(read(`${kv}/data/app/db`));
    const pki = await pkiWithRoot();
    ids.push("(mount)", "(root/generate)");
    await call(write(`${pki.path}/roles/web`, { allowed_domains: ["example.com"], allow_subdomains: true, key_type: "ec", key_bits: 256 }));
    const issued = await call(write(`${pki.path}/issue/web`, { common_name: "app.example.com" }));
    const privateKey = issued.body.data.private_key as string;
    expect(privateKey).toContain("PRIVATE KEY");
    await call(api("PATCH", "sys/sync/config", { body: { disabled: false } }));
    const dest = `e2e-${uid()}`;
    await call(write(destPath("cloudone-sm", dest), BODIES["cloudone-sm"]));
    const synced = await kvSecret({ token: "sync-payload" });
    ids.push("(mount)", "(write)", "(sys/mounts)");
    await call(setAssoc("cloudone-sm", dest, synced));
    // The helper calls (mount, root/generate, kvSecret) went through the dispatcher too: take the
    // ids from the queued entries in send order, and check the ones recorded above among them.
    const queued = drain();
    const forHttp = queued.filter((m) => m.device.path === "e2e-http/");
    const sent = [...new Set(forHttp.flatMap((m) => m.entries.map((e) => e.request.id)))];
    const known = ids.slice(enabledAt).filter((i) => !i.startsWith("("));
    expect(sent.filter((i) => known.includes(i))).toEqual(known);
    expect(sent).toHaveLength(ids.length - enabledAt);
    const expected = sent.flatMap((i) => [`${i}:request`, `${i}:response`]);

    // Deliver as the queue would: batches of 10 in send order; the collector is down for the
    // second and third batch, whose messages come back (one more attempt) with the next batches.
    const before = e2e.entries.length;
    let backlog: Delivered[] = queued.map((body) => ({ body, attempts: 1 }));
    let round = 0;
    while (backlog.length > 0) {
      e2e.up = round !== 1 && round !== 2;
      const r = await runBatch(backlog.slice(0, 10));
      backlog = [...backlog.slice(10), ...r.retried.map((m) => ({ body: m.body, attempts: m.attempts + 1 }))];
      if (!e2e.up) expect(r.retried.length).toBeGreaterThan(0);
      round++;
      expect(round).toBeLessThan(50);
    }
    expect(e2e.problems).toEqual([]);
    const got = e2e.entries.slice(before);
    const firstAt = new Map<string, number>();
    got.forEach((e, i) => firstAt.has(e.id) || firstAt.set(e.id, i));
    // Every entry arrived (duplicates allowed: at-least-once, same id), nothing else did.
    expect([...firstAt.keys()].sort()).toEqual([...expected].sort());
    // For each request, its request entry arrived no later than its response entry.
    for (const i of sent) expect(firstAt.get(`${i}:request`) ?? -1).toBeLessThan(firstAt.get(`${i}:response`) ?? -1);
    // A request entry's request.id is the answer's request_id.
    for (const e of got) expect(e.id).toBe(`${e.request.id}:${e.type}`);
    expect(e2e.posts.every((p) => p.authorization === collectorCredential)).toBe(true);

    // HMACs: what sys/audit-hash gives for a value is what the entries carry.
    const hash = async (input: string) => (await write("sys/audit-hash/e2e-http", { input })).body.hash as string;
    const kvRead = got.find((e) => e.type === "response" && e.request.path === `${kv}/data/app/db` && e.request.operation === "read");
    expect(kvRead?.response?.data).toMatchObject({ data: { password: await hash(kvValue) } });
    const createAnswer = got.find((e) => e.id === `${ids[enabledAt]}:response`);
    expect(createAnswer?.response?.auth?.client_token).toBe(await hash(child));
    expect(createAnswer?.response?.auth?.accessor).toBe(await hash(childAccessor));
    const lookup = got.find((e) => e.id === `${ids[enabledAt + 1]}:request`);
    expect(lookup?.auth?.client_token).toBe(await hash(child));
    expect(got.find((e) => e.id === `${ids[enabledAt - 1]}:request`)).toBeUndefined();

    // The r2 device: objects under e2e/<YYYYMMDD>/, NDJSON, every entry of the session.
    const listed = await env.AUDIT_BUCKET.list({ prefix: "e2e/" });
    const r2Entries: AuditEntry[] = [];
    for (const o of listed.objects) {
      expect(o.key).toMatch(/^e2e\/\d{8}\/\d{8}T\d{6}Z_\d{8}T\d{6}Z_[0-9a-f]{16}\.log$/);
      const text = (await (await env.AUDIT_BUCKET.get(o.key))?.text()) ?? "";
      for (const line of text.split("\n").filter((l) => l !== "")) r2Entries.push(JSON.parse(line) as AuditEntry);
    }
    const r2Ids = new Set(r2Entries.map((e) => e.id));
    for (const id of expected) expect(r2Ids.has(id)).toBe(true);
    expect(r2Ids.has(`${ids[enabledAt - 1]}:request`)).toBe(true);

    // No secret of the session in plaintext in anything either sink received.
    const everything = JSON.stringify(got) + JSON.stringify(r2Entries);
    const pemBody = privateKey.split("\n").filter((l) => l !== "" && !l.startsWith("-----"));
    const secrets = [ROOT, child, childAccessor, kvValue, privateKey, ...pemBody, SECRETS.awsSecret, collectorCredential, "sync-payload"];
    for (const s of secrets) expect(everything.includes(s), `plaintext secret found: ${s.slice(0, 12)}…`).toBe(false);
    await del("sys/audit/e2e-http");
    await del("sys/audit/e2e-r2");
  });

  it("through the real Queue (wrangler.toml's lanyard-audit consumer): a healthy collector has the entries within 10 s, with one device (a flush is one send) and with two (one sendBatch of two messages)", async () => {
    setAuditQueueSendForTests(null);
    const prefix = `live-${uid()}/`;
    try {
      await write("sys/audit/live", { type: "http", options: { address: "https://collector-e2e.test/live" } }, {}, 204);
      const r = await read("sys/mounts");
      const started = Date.now();
      await vi.waitFor(() => expect(e2e.ids()).toContain(`${r.body.request_id}:response`), { timeout: 10_000, interval: 100 });
      expect(Date.now() - started).toBeLessThan(10_000);
      const mine = e2e.entries.filter((e) => e.request.id === r.body.request_id);
      expect(mine[0]?.type).toBe("request");

      // A second device: each flush now carries two messages, one per device.
      await write("sys/audit/live-r2", { type: "r2", options: { prefix } }, {}, 204);
      const r2 = await read("sys/mounts");
      const id = r2.body.request_id as string;
      await vi.waitFor(() => expect(e2e.ids()).toContain(`${id}:response`), { timeout: 10_000, interval: 100 });
      const inBucket = async (): Promise<string[]> => {
        const ids: string[] = [];
        for (const o of (await env.AUDIT_BUCKET.list({ prefix })).objects) {
          const text = (await (await env.AUDIT_BUCKET.get(o.key))?.text()) ?? "";
          for (const line of text.split("\n").filter((l) => l !== "")) ids.push((JSON.parse(line) as AuditEntry).id);
        }
        return ids;
      };
      await vi.waitFor(async () => expect(await inBucket()).toEqual(expect.arrayContaining([`${id}:request`, `${id}:response`])), { timeout: 10_000, interval: 100 });
      expect(e2e.entries.filter((e) => e.request.id === id).map((e) => e.type)).toEqual(["request", "response"]);
      await del("sys/audit/live-r2");
      await del("sys/audit/live");
    } finally {
      setAuditQueueSendForTests(async (_device, messages) => {
        captured.push(...messages.map(asQueued));
      });
    }
  });
});
