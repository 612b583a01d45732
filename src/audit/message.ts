/**
 * The text of one message on queue `lanyard-audit` (docs/audit.md "Batching"), written by the
 * batcher (./batcher.ts) and read by the consumer (./delivery/consumer.ts):
 *
 *   {"v":3,"device":{"id":…,"path":…,"type":"http"|"r2"},"shared":<n>,"index":[<item>,…]}\n
 *   <shared member 1>\n … <shared member n>\n
 *   <entry 1, its shared members cut out>\n
 *   <entry 2>\n …
 *
 * The header line names the device and indexes the entries: each item is `["<entry id>",<time
 * ms>]` (from the id follow the request id and the entry type), or, for an entry with shared
 * members, `["<id>",<ms>,<at>,<k>,…]`: the shared lines numbered k (from 0, in the lines after the
 * header) go, in that order, at offset `at` of the entry's line. They are the `,"auth":{…}` and
 * `,"request":{…}` members, each stated once per message however many entries carry it: a
 * read's request and response entries repeat the same `request` (and `auth`), and the requests of
 * one token repeat the same `auth`, about 1 KB of a KV read's 2.6 KB pair. The consumer parses the
 * small header only, splices the members back and hands the lines on: an entry is serialized once,
 * on the request path, and never parsed again on its way to the collector, which gets each entry
 * whole. JSON text holds no raw newline (RFC 8259 section 7: control characters are escaped in
 * strings), so "\n" ends a line.
 *
 * Messages of the earlier formats are still read, so that what was queued before an upgrade is
 * delivered after it: `{"v":2,…,"index":[["<id>",<ms>],…]}` followed by the whole entries as
 * lines, and `{"v":1,"device":…,"entries":[…]}` (as text or as an object).
 */
import { utf8Length } from "../core/text";
import type { AuditDevice, AuditEntry } from "./types";

/** The device a message names (the consumer looks its delivery target up by `id`). */
export interface MessageDevice {
  id: string;
  path: string;
  type: "http" | "r2";
}

/** One queued entry: its id, its request's id, request (0) or response (1), its time (ms), and its JSON line (no newline). */
export interface QueuedLine {
  id: string;
  request: string;
  type: 0 | 1;
  time: number;
  line: string;
}

/** A message as the consumer reads it. */
export interface DecodedMessage {
  device: MessageDevice;
  lines: QueuedLine[];
}

/** A member several entries share (`,"auth":{…}`, `,"request":{…}`), and its UTF-8 length. */
export interface SharedMember {
  text: string;
  bytes: number;
}

/**
 * What the batcher needs of an entry (made once, in enqueue.ts): its id and time, and its JSON
 * line as `head`, then its `shared` members in order, then `tail`; `bytes` is the UTF-8 length of
 * head and tail (a shared member's own length is in the member).
 */
export interface QueuedEntry {
  id: string;
  time: number;
  head: string;
  shared: SharedMember[];
  tail: string;
  bytes: number;
}

/** The entry's whole JSON line. */
export function entryLine(e: QueuedEntry): string {
  return e.shared.length === 0 ? e.head + e.tail : e.head + e.shared.map((p) => p.text).join("") + e.tail;
}

/** The device as a message names it. */
export function messageDevice(d: AuditDevice): MessageDevice {
  return { id: d.id, path: d.path, type: d.type === "r2" ? "r2" : "http" };
}

/**
 * Bytes of an entry's index item `["<id>",<ms>,<at>,<k>,…],` at most (ids are ASCII: a UUID
 * and a suffix; an offset within 120,000 bytes, a member number within the message's entries).
 */
export function indexBytes(e: QueuedEntry): number {
  return e.id.length + 24 + (e.shared.length > 0 ? 7 + 7 * e.shared.length : 0);
}

/** Bytes of a header without index items (`index` empty, `shared` a large number). */
export function headerBytes(device: MessageDevice): number {
  return utf8Length(JSON.stringify({ v: 3, device, shared: 100000, index: [] })) + 1;
}

/** The message text of a device's entries, in order: each shared member's text stated once. */
export function encodeMessage(device: MessageDevice, entries: readonly QueuedEntry[]): string {
  const numbers = new Map<string, number>();
  const index: (string | number)[][] = [];
  let lines = "";
  for (const e of entries) {
    if (e.shared.length === 0) {
      index.push([e.id, e.time]);
    } else {
      const item: (string | number)[] = [e.id, e.time, e.head.length];
      for (const p of e.shared) {
        let n = numbers.get(p.text);
        if (n === undefined) numbers.set(p.text, (n = numbers.size));
        item.push(n);
      }
      index.push(item);
    }
    lines += `${e.head}${e.tail}\n`;
  }
  let body = `${JSON.stringify({ v: 3, device, shared: numbers.size, index })}\n`;
  for (const text of numbers.keys()) body += `${text}\n`;
  return body + lines;
}

const SUFFIX = /:(request|response)$/;

function queuedLine(id: string, time: number, line: string): QueuedLine | null {
  const m = SUFFIX.exec(id);
  if (!m) return null;
  return { id, request: id.slice(0, m.index), type: m[1] === "request" ? 0 : 1, time, line };
}

function readDevice(d: unknown): MessageDevice | null {
  if (typeof d !== "object" || d === null) return null;
  const { id, path, type } = d as Partial<MessageDevice>;
  if (typeof id !== "string" || typeof path !== "string" || (type !== "http" && type !== "r2")) return null;
  return { id, path, type };
}

/** A message body as queued, or null when this version cannot read it. */
export function decodeMessage(raw: unknown): DecodedMessage | null {
  if (typeof raw === "string") {
    const nl = raw.indexOf("\n");
    if (nl < 0) return decodeV1(parseJson(raw));
    const header = parseJson(raw.slice(0, nl));
    if (typeof header !== "object" || header === null) return null;
    const v = (header as { v?: unknown }).v;
    // Version 2 is version 3 without shared members: whole lines.
    if (v === 2) return decodeLines({ ...(header as Header), shared: 0 }, raw.slice(nl + 1));
    return v === 3 ? decodeLines(header as Header, raw.slice(nl + 1)) : null;
  }
  return decodeV1(raw);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}

interface Header {
  device?: unknown;
  index?: unknown;
  shared?: unknown;
}

/** Versions 2 and 3: the shared members' lines (none in v2), then the entries' lines with those members cut out. */
function decodeLines(header: Header, rest: string): DecodedMessage | null {
  const device = readDevice(header.device);
  const { index, shared } = header;
  if (!device || !Array.isArray(index) || !Number.isSafeInteger(shared) || (shared as number) < 0) return null;
  const texts = rest.split("\n");
  const n = shared as number;
  if (texts.length !== n + index.length + 1 || texts[n + index.length] !== "") return null;
  const lines: QueuedLine[] = [];
  for (let i = 0; i < index.length; i++) {
    const item: unknown = index[i];
    if (!Array.isArray(item) || typeof item[0] !== "string" || typeof item[1] !== "number") return null;
    const text = spliced(texts[n + i] as string, item.slice(2), texts, n);
    const l = text === null ? null : queuedLine(item[0], item[1], text);
    if (!l) return null;
    lines.push(l);
  }
  return { device, lines };
}

/** An entry's line with its shared members put back at `at` (`[at, k…]`, or nothing); null if malformed. */
function spliced(short: string, refs: unknown[], shared: readonly string[], n: number): string | null {
  if (!short.startsWith("{")) return null;
  if (refs.length === 0) return short;
  const [at, ...numbers] = refs;
  if (!Number.isSafeInteger(at) || (at as number) < 1 || (at as number) > short.length || numbers.length === 0) return null;
  let middle = "";
  for (const k of numbers) {
    if (!Number.isSafeInteger(k) || (k as number) < 0 || (k as number) >= n) return null;
    middle += shared[k as number];
  }
  return short.slice(0, at as number) + middle + short.slice(at as number);
}

/** The earlier format: the entries as objects, serialized here once. */
function decodeV1(body: unknown): DecodedMessage | null {
  if (typeof body !== "object" || body === null) return null;
  const m = body as { v?: unknown; device?: unknown; entries?: unknown };
  const device = readDevice(m.device);
  if (m.v !== 1 || !device || !Array.isArray(m.entries)) return null;
  const lines: QueuedLine[] = [];
  for (const e of m.entries as unknown[]) {
    if (typeof e !== "object" || e === null) return null;
    const entry = e as Partial<AuditEntry>;
    if (typeof entry.id !== "string" || (entry.type !== "request" && entry.type !== "response") || typeof entry.request?.id !== "string") return null;
    const t = Date.parse(typeof entry.time === "string" ? entry.time : "");
    const l = queuedLine(entry.id, Number.isNaN(t) ? Number.POSITIVE_INFINITY : t, JSON.stringify(e));
    if (!l) return null;
    lines.push(l);
  }
  return { device, lines };
}
