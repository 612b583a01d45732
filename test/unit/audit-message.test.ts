/**
 * The audit Queue message format (src/audit/message.ts), encoded and decoded directly: the
 * `auth` and `request` members several entries share are stated once per message and spliced
 * back whole; the messages of the earlier formats (v2: whole lines; v1: entries as objects) are
 * still read; a malformed v3 message is refused (null), never read as something else.
 */
import { describe, expect, it } from "vitest";
import { decodeMessage, encodeMessage, entryLine, type MessageDevice, type QueuedEntry } from "../../src/audit/message";

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
});
