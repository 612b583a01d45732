/**
 * The text of one message on queue `lanyard-audit` (docs/audit.md "Batching"), written by the
 * batcher (./batcher.ts) and read by the consumer (./delivery/consumer.ts):
 *
 *   {"v":2,"device":{"id":…,"path":…,"type":"http"|"r2"},"index":[["<entry id>",<time ms>],…]}\n
 *   <entry 1 as one JSON line>\n
 *   <entry 2>\n …
 *
 * The header line names the device and indexes the entries (their ids, from which the request
 * id and the entry type follow, and their times as milliseconds since the epoch); what follows is
 * the NDJSON the sink writes, one final (HMAC'd) entry a line, in order. The consumer parses the
 * small header only and hands the lines on as they are: an entry is serialized once, on the
 * request path, and never parsed again on its way to the collector. JSON text holds no raw
 * newline (RFC 8259 section 7: control characters are escaped in strings), so "\n" ends a line.
 *
 * Messages of the earlier format (`{"v":1,"device":…,"entries":[…]}`, as text or as an object)
 * are still read, so that what was queued before an upgrade is delivered after it.
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

/** What the batcher needs of an entry: its id and time, its JSON text and that text's UTF-8 length (measured once, in enqueue.ts). */
export interface QueuedEntry {
  id: string;
  time: number;
  text: string;
  bytes: number;
}

/** The device as a message names it. */
export function messageDevice(d: AuditDevice): MessageDevice {
  return { id: d.id, path: d.path, type: d.type === "r2" ? "r2" : "http" };
}

/** Bytes of an entry's index item `["<id>",<ms>],` at most (ids are ASCII: a UUID and a suffix). */
export function indexBytes(e: QueuedEntry): number {
  return e.id.length + 24;
}

/** Bytes of a header without index items (`index` empty). */
export function headerBytes(device: MessageDevice): number {
  return utf8Length(JSON.stringify({ v: 2, device, index: [] })) + 1;
}

/** The message text of a device's entries, in order. */
export function encodeMessage(device: MessageDevice, entries: readonly QueuedEntry[]): string {
  const header = JSON.stringify({ v: 2, device, index: entries.map((e) => [e.id, e.time]) });
  let body = `${header}\n`;
  for (const e of entries) body += `${e.text}\n`;
  return body;
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
    if (typeof header !== "object" || header === null || (header as { v?: unknown }).v !== 2) return null;
    return decodeV2(header as { device?: unknown; index?: unknown }, raw.slice(nl + 1));
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

function decodeV2(header: { device?: unknown; index?: unknown }, rest: string): DecodedMessage | null {
  const device = readDevice(header.device);
  const index = header.index;
  if (!device || !Array.isArray(index)) return null;
  const texts = rest.split("\n");
  // Each entry's line ends with "\n": one more piece than entries, the last empty.
  if (texts.length !== index.length + 1 || texts[index.length] !== "") return null;
  const lines: QueuedLine[] = [];
  for (let i = 0; i < index.length; i++) {
    const item: unknown = index[i];
    if (!Array.isArray(item) || typeof item[0] !== "string" || typeof item[1] !== "number") return null;
    const text = texts[i] as string;
    if (!text.startsWith("{")) return null;
    const l = queuedLine(item[0], item[1], text);
    if (!l) return null;
    lines.push(l);
  }
  return { device, lines };
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
