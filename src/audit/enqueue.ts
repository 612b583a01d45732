/**
 * Handing audit entries over: the one function the request path calls,
 * `enqueueEntries`. For each enabled device, the entries are HMAC'd with the device's salt
 * (hmac.ts) and serialized once (their `auth` and `request` members apart, so that a message
 * states each once: ./message.ts), then
 * - `stdout`: written to the Worker's log, one JSON line per entry (console.log). Workers Logs /
 *   Logpush / `wrangler tail` keep it; that is as durable as the log pipeline is (sampling, the
 *   plan's retention, a tail that is not connected): documented in docs/audit.md;
 * - `http`, `r2`: handed to the isolate's batcher (batcher.ts), which packs the entries of
 *   concurrent requests into Queue messages (one device's entries each) and sends them with one
 *   `sendBatch` per flush to the Queue `lanyard-audit` (binding AUDIT_QUEUE); awaited, so the
 *   entries are durable when this returns. The delivery side (src/audit/delivery/) takes it
 *   from there.
 * The call succeeds when at least one device recorded the entries (Vault's audit broker); when
 * every device failed it throws AuditUnavailableError and the caller answers 503. Failures are
 * logged with the device path and the error, never with the entries.
 * The message format is in types.ts.
 */
import { utf8Length } from "../core/text";
import { queueEntries, setBatchSendForTests, type DevicePart } from "./batcher";
import { hashEntry } from "./hmac";
import { entryLine, type QueuedEntry, type SharedMember } from "./message";
import { AuditUnavailableError, MAX_AUDIT_MESSAGE_BYTES, type AuditDevice, type AuditEntry } from "./types";

/** Room for one entry in a message: the limit less the envelope (device id, path, type). */
const ENTRY_ROOM = MAX_AUDIT_MESSAGE_BYTES - 512;

/** Test seam: replaces the Queue send (capture the message texts, or make the send fail), per device. */
export function setAuditQueueSendForTests(fn: ((device: AuditDevice, messages: string[]) => Promise<void>) | null): void {
  setBatchSendForTests(fn);
}

export async function enqueueEntries(env: Env, devices: AuditDevice[], entries: AuditEntry[], waitUntil?: (p: Promise<unknown>) => void): Promise<void> {
  if (devices.length === 0 || entries.length === 0) return;
  const errors = new Map<string, unknown>();
  const parts: DevicePart[] = [];
  for (const device of devices) {
    try {
      const queued = entries.map((e) => serialized(device, hashEntry(device, e)));
      if (device.type === "stdout") for (const q of queued) console.log(entryLine(q));
      else parts.push({ device, entries: queued });
    } catch (e) {
      errors.set(device.id, e);
    }
  }
  if (parts.length > 0) {
    for (const [id, e] of await queueEntries(env.AUDIT_QUEUE, parts, waitUntil, isReadHandOff(entries))) errors.set(id, e);
  }
  for (const d of devices) {
    const e = errors.get(d.id);
    if (e !== undefined) console.error(`audit: device ${d.path} could not record ${entries.length} entr${entries.length === 1 ? "y" : "ies"}:`, errorText(e));
  }
  if (errors.size === devices.length) throw new AuditUnavailableError(errors.values().next().value);
}

/**
 * A read's hand-off: it ends with the response entry of a `read` or `list`, so it comes at the end
 * of a short request, and the batcher's leader waits for the recent peak (./linger.ts).
 */
export function isReadHandOff(entries: readonly AuditEntry[]): boolean {
  const last = entries[entries.length - 1];
  return last?.type === "response" && (last.request.operation === "read" || last.request.operation === "list");
}

function errorText(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

/**
 * An entry as a message carries it (./message.ts `QueuedEntry`): its JSON line in pieces, the
 * `auth` and `request` members apart so that a message states each once. `elide_list_responses`
 * applies after hashing (the counts are the server's numbers, not data to HMAC, as Vault's
 * formatter). An entry too big for a message on its own keeps everything but its `data`,
 * replaced by a marker naming its size (the Queue cannot carry it; docs/audit.md states the
 * limit). Still too big: the device fails.
 */
function serialized(device: AuditDevice, hashed: AuditEntry): QueuedEntry {
  const entry = device.elideListResponses ? elideList(hashed) : hashed;
  const q = pieces(entry);
  // A stdout line has no size limit and is not measured.
  if (device.type === "stdout") return q;
  const size = entrySize(q);
  if (size <= ENTRY_ROOM) return q;
  const smaller = pieces(elideData(entry, size));
  const bytes = entrySize(smaller);
  if (bytes > ENTRY_ROOM) throw new Error(`an audit entry of ${bytes} bytes exceeds the queue message limit even without its data`);
  return smaller;
}

function entrySize(q: QueuedEntry): number {
  let size = q.bytes;
  for (const p of q.shared) size += p.bytes;
  return size;
}

/**
 * The entry's line as `head` (id, time, type), the `auth` and `request` members, and `tail` (the
 * rest): the same members as JSON.stringify of the entry, in the order of AuditEntry. A request's
 * hashed `auth` and `request` objects are the same for both its entries (hmac.ts), so each is
 * serialized once.
 */
function pieces(entry: AuditEntry): QueuedEntry {
  const time = Date.parse(entry.time);
  const head = `{"id":${JSON.stringify(entry.id)},"time":${JSON.stringify(entry.time)},"type":${JSON.stringify(entry.type)}`;
  const shared: SharedMember[] = [];
  if (entry.auth !== undefined) shared.push(member("auth", entry.auth));
  shared.push(member("request", entry.request));
  const { response, error } = entry;
  const tail = `${response === undefined ? "" : `,"response":${JSON.stringify(response)}`}${error === undefined ? "" : `,"error":${JSON.stringify(error)}`}}`;
  return { id: entry.id, time: Number.isNaN(time) ? 0 : time, head, shared, tail, bytes: utf8Length(head) + utf8Length(tail) };
}

/** `,"<name>":<JSON of value>`, serialized once per object (the two entries of a request share theirs). */
const members = new WeakMap<object, SharedMember>();
function member(name: "auth" | "request", value: object): SharedMember {
  const known = members.get(value);
  if (known) return known;
  const text = `,"${name}":${JSON.stringify(value)}`;
  const part = { text, bytes: utf8Length(text) };
  members.set(value, part);
  return part;
}

function elideData(entry: AuditEntry, size: number): AuditEntry {
  const marker = { lanyard_elided: `entry of ${size} bytes exceeds the audit queue message limit; data omitted` };
  const out: AuditEntry = { ...entry, request: { ...entry.request, data: entry.request.data ? marker : entry.request.data } };
  if (entry.response) out.response = { ...entry.response, data: entry.response.data ? marker : entry.response.data };
  return out;
}

/** Vault's `elide_list_responses`: a list response's `data.keys` becomes the number of keys. */
function elideList(entry: AuditEntry): AuditEntry {
  const data = entry.response?.data;
  if (entry.type !== "response" || entry.request.operation !== "list" || !data || !Array.isArray(data.keys)) return entry;
  const elided: Record<string, unknown> = { ...data, keys: data.keys.length };
  if (data.key_info && typeof data.key_info === "object") elided.key_info = Object.keys(data.key_info).length;
  return { ...entry, response: { ...entry.response, data: elided } };
}
