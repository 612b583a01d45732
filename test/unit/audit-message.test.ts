/**
 * The audit Queue message format (src/audit/message.ts), encoded and decoded directly: the
 * `auth` and `request` members several entries share are stated once per message and spliced
 * back whole; the messages of the earlier formats (v2: whole lines; v1: entries as objects) are
 * still read; a malformed v3 message is refused (null), never read as something else.
 */
import { describe, expect, it } from "vitest";
import { build } from "../../src/audit/batcher";
import { enqueueEntries, setAuditQueueSendForTests } from "../../src/audit/enqueue";
import { hashEntry } from "../../src/audit/hmac";
import { decodeMessage, encodeMessage, entryLine, type MessageDevice, type QueuedEntry } from "../../src/audit/message";
import { MAX_AUDIT_MESSAGE_BYTES, type AuditDevice, type AuditEntry } from "../../src/audit/types";

const device: MessageDevice = { id: "dev-1", path: "collector/", type: "http" };

/** An entry in the pieces enqueue.ts makes: head, the shared members, tail. */
function entry(request: string, type: "request" | "response", auth: string, extra = ""): QueuedEntry {
  const head = `{"id":"${request}:${type}","time":"2026-11-29T00:00:00.000Z","type":"${type}"`;
  const shared = [auth, `,"request":{"id":"${request}","path":"kv/data/app"}`].map((text) => ({ text, bytes: text.length }));
  const tail = `${extra}}`;
  return { id: `${request}:${type}`, time: Date.parse("2026-11-29T00:00:00.000Z"), head, shared, tail, bytes: head.length + tail.length };
}

const AUTH = `,"auth":{"client_token":"hmac-sha256:abc","policies":["bench","default"]}`;

describe("audit message format", () => {
  it("states each shared member once and gives every entry back whole, in order", () => {
    const entries = [
      entry("r1", "request", AUTH),
      entry("r1", "response", AUTH, `,"response":{"status_code":200,"data":{"k":"hmac-sha256:1"}}`),
      entry("r2", "request", AUTH),
      entry("r2", "response", AUTH, `,"response":{"status_code":404},"error":"no secret \\"x\\""`),
    ];
    const text = encodeMessage(device, entries);
    // One auth member for all four entries, one request member per request.
    expect(text.split('"auth":').length - 1).toBe(1);
    expect(text.split('"request":{"id":"r1"').length - 1).toBe(1);
    expect(text.split('"request":{"id":"r2"').length - 1).toBe(1);
    const whole = entries.map(entryLine);
    expect(text.length).toBeLessThan(whole.join("\n").length);
    const decoded = decodeMessage(text);
    expect(decoded?.device).toEqual(device);
    expect(decoded?.lines.map((l) => l.line)).toEqual(whole);
    expect(decoded?.lines.map((l) => [l.request, l.type])).toEqual([
      ["r1", 0],
      ["r1", 1],
      ["r2", 0],
      ["r2", 1],
    ]);
    for (const l of decoded?.lines ?? []) expect(JSON.parse(l.line)).toHaveProperty("auth.policies", ["bench", "default"]);
  });

  it("carries an entry without shared members as its whole line", () => {
    const bare: QueuedEntry = { id: "r3:response", time: 5, head: '{"id":"r3:response","time":"t","type":"response","request":{}}', shared: [], tail: "", bytes: 60 };
    const decoded = decodeMessage(encodeMessage(device, [bare]));
    expect(decoded?.lines.map((l) => l.line)).toEqual([bare.head]);
  });

  it("still reads the earlier formats", () => {
    const lines = [entry("r1", "request", AUTH), entry("r1", "response", AUTH)].map(entryLine);
    const v2 = `${JSON.stringify({ v: 2, device, index: [["r1:request", 1], ["r1:response", 2]] })}\n${lines.join("\n")}\n`;
    expect(decodeMessage(v2)?.lines.map((l) => l.line)).toEqual(lines);
    const v1 = { v: 1, device, entries: lines.map((l) => JSON.parse(l) as unknown) };
    expect(decodeMessage(v1)?.lines.map((l) => JSON.parse(l.line) as unknown)).toEqual(v1.entries);
  });

  it("refuses a malformed message instead of delivering something else", () => {
    const good = encodeMessage(device, [entry("r1", "request", AUTH), entry("r1", "response", AUTH)]);
    const [header, ...rest] = good.split("\n");
    const h = JSON.parse(header as string) as { shared: number; index: (string | number)[][] };
    const withHeader = (change: (x: typeof h) => void) => {
      const copy = structuredClone(h);
      change(copy);
      return `${JSON.stringify(copy)}\n${rest.join("\n")}`;
    };
    expect(decodeMessage(good)).not.toBeNull();
    // A shared member number out of range, an offset beyond the line, a count that does not match the lines.
    expect(decodeMessage(withHeader((x) => ((x.index[0] as (string | number)[])[3] = 9)))).toBeNull();
    expect(decodeMessage(withHeader((x) => ((x.index[0] as (string | number)[])[2] = 10_000)))).toBeNull();
    expect(decodeMessage(withHeader((x) => ((x.index[0] as (string | number)[])[2] = 0)))).toBeNull();
    expect(decodeMessage(withHeader((x) => (x.shared = 1)))).toBeNull();
    expect(decodeMessage(withHeader((x) => (x.shared = -1)))).toBeNull();
    expect(decodeMessage(withHeader((x) => x.index.pop()))).toBeNull();
    expect(decodeMessage(good.replace('{"v":3', '{"v":4'))).toBeNull();
  });

  it("the batcher counts a shared member once per message when it packs: one token's reads fill a message by their own lines, and every message stays within the limit and its own estimate", () => {
    const auditDevice: AuditDevice = { ...device, description: "", options: {}, local: false, salt: "s", logRaw: false, hmacAccessor: true, elideListResponses: false };
    // A 2 KB auth member shared by 200 requests: 400 whole lines of ~2.2 KB would need 8 messages.
    const bigAuth = `,"auth":{"metadata":{"note":"${"m".repeat(2000)}"}}`;
    const group = Array.from({ length: 200 }, (_, i) => ({ read: true, parts: [{ device: auditDevice, entries: [entry(`r${i}`, "request", bigAuth), entry(`r${i}`, "response", bigAuth)] }] }));
    const whole = group.flatMap((w) => w.parts[0]?.entries ?? []).reduce((n, e) => n + entryLine(e).length + 1, 0);
    expect(whole).toBeGreaterThan(3 * MAX_AUDIT_MESSAGE_BYTES);
    const messages = build(group);
    expect(messages.length).toBe(1);
    for (const m of messages) {
      const bytes = new TextEncoder().encode(m.body).length;
      expect(bytes).toBeLessThanOrEqual(m.bytes);
      expect(bytes).toBeLessThanOrEqual(MAX_AUDIT_MESSAGE_BYTES);
      expect(m.body.split(bigAuth).length - 1).toBe(1);
    }
    expect(decodeMessage(messages[0]?.body)?.lines.length).toBe(400);
    // Each request with an auth member of its own: the members are counted, and messages split within the limit.
    const own = Array.from({ length: 200 }, (_, i) => ({ read: true, parts: [{ device: auditDevice, entries: [entry(`r${i}`, "request", `${bigAuth.slice(0, -2)}${i}"}}`)] }] }));
    const split = build(own);
    expect(split.length).toBeGreaterThan(1);
    for (const m of split) expect(new TextEncoder().encode(m.body).length).toBeLessThanOrEqual(Math.min(m.bytes, MAX_AUDIT_MESSAGE_BYTES));
    expect(split.flatMap((m) => decodeMessage(m.body)?.lines ?? []).map((l) => l.id)).toEqual(own.map((_, i) => `r${i}:request`));
  });

  it("measures members in UTF-8 bytes, not UTF-16 units, on the real path: entries with non-ASCII paths split within the limit and come back whole", async () => {
    const auditDevice: AuditDevice = { ...device, description: "", options: {}, local: false, salt: "s", logRaw: false, hmacAccessor: true, elideListResponses: false };
    // A path is not HMAC'd: 3,000 three-byte characters are 9 KB of a message but 3,000 units of a string.
    const path = `kv/data/${"日".repeat(3000)}`;
    const entries = (i: number): AuditEntry[] => {
      const request = { id: `q${i}`, operation: "read", namespace: { id: "root", path: "" }, path };
      const auth = { display_name: "token", policies: ["default"] };
      return [
        { id: `q${i}:request`, time: "2026-11-29T00:00:00.000Z", type: "request", auth, request },
        { id: `q${i}:response`, time: "2026-11-29T00:00:00.001Z", type: "response", auth, request, response: { status_code: 200 } },
      ];
    };
    const sent: string[] = [];
    setAuditQueueSendForTests(async (_d, messages) => {
      sent.push(...messages);
    });
    try {
      // Handed over in one turn: one flush takes all 30 requests (~270 KB of UTF-8, ~90,000 string units).
      await Promise.all(Array.from({ length: 30 }, (_, i) => enqueueEntries({} as Env, [auditDevice], entries(i))));
    } finally {
      setAuditQueueSendForTests(null);
    }
    expect(sent.length).toBeGreaterThan(2);
    for (const body of sent) expect(new TextEncoder().encode(body).length).toBeLessThanOrEqual(MAX_AUDIT_MESSAGE_BYTES);
    const lines = sent.flatMap((body) => decodeMessage(body)?.lines ?? []);
    expect(lines.map((l) => l.id).sort()).toEqual(Array.from({ length: 30 }, (_, i) => [`q${i}:request`, `q${i}:response`]).flat().sort());
    for (const l of lines) expect(JSON.parse(l.line)).toHaveProperty("request.path", path);
  });

  it("a request's two entries share one request object for a log_raw device too (serialized once for the message)", () => {
    const request = { id: "raw1", operation: "read", namespace: { id: "root", path: "" }, path: "kv/data/app", client_token: "hvs.secret-token" };
    const req: AuditEntry = { id: "raw1:request", time: "2026-11-29T00:00:00.000Z", type: "request", request };
    const res: AuditEntry = { ...req, id: "raw1:response", type: "response", response: { status_code: 200 } };
    for (const logRaw of [true, false]) {
      const d = { salt: "s", logRaw, hmacAccessor: true };
      const [a, b] = [hashEntry(d, req), hashEntry(d, res)];
      expect(a.request).toBe(b.request);
      expect(a.request.client_token === "hvs.secret-token").toBe(logRaw);
    }
  });
});
