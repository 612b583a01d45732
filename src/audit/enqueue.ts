/**
 * Handing audit entries over: the one function the request path calls,
 * `enqueueEntries`. For each enabled device, concurrently, the entries are HMAC'd with the
 * device's salt (hmac.ts), then
 * - `stdout`: written to the Worker's log, one JSON line per entry (console.log). Workers Logs /
 *   Logpush / `wrangler tail` keep it; that is as durable as the log pipeline is (sampling, the
 *   plan's retention, a tail that is not connected): documented in docs/audit.md;
 * - `http`, `r2`: sent to the Queue `lanyard-audit` (binding AUDIT_QUEUE), one message per device
 *   per call (more only when the entries exceed the message size), awaited, so the entries are
 *   durable when this returns. The delivery side (src/audit/delivery/) takes it from there.
 * The call succeeds when at least one device recorded the entries (Vault's audit broker); when
 * every device failed it throws AuditUnavailableError and the caller answers 503. Failures are
 * logged with the device path and the error, never with the entries.
 * The message format is in types.ts.
 */
import { hashEntry } from "./hmac";
import { AuditUnavailableError, MAX_AUDIT_MESSAGE_BYTES, type AuditDevice, type AuditEntry, type AuditQueueMessage } from "./types";

/** Hashed entries per device id, as a call produced them. */
export type HashedEntries = Map<string, AuditEntry[]>;

type QueueSend = (device: AuditDevice, messages: AuditQueueMessage[]) => Promise<void>;

/** Test seam: replaces the Queue send (capture messages, or make the send fail). */
let sendOverride: QueueSend | null = null;
export function setAuditQueueSendForTests(fn: QueueSend | null): void {
  sendOverride = fn;
}

export async function enqueueEntries(env: Env, devices: AuditDevice[], entries: AuditEntry[]): Promise<HashedEntries> {
  const hashed: HashedEntries = new Map();
  if (devices.length === 0 || entries.length === 0) return hashed;
  const results = await Promise.allSettled(
    devices.map(async (device) => {
      const own = await Promise.all(entries.map(async (e) => {
        // Elided after hashing: the counts are the server's numbers, not data to HMAC (as Vault's formatter).
        const hashed = await hashEntry(device, e);
        return device.elideListResponses ? elideList(hashed) : hashed;
      }));
      hashed.set(device.id, own);
      if (device.type === "stdout") {
        for (const e of own) console.log(JSON.stringify(e));
        return;
      }
      const messages = pack(device, own);
      if (sendOverride) return sendOverride(device, messages);
      if (messages.length === 1 && messages[0]) await env.AUDIT_QUEUE.send(messages[0], { contentType: "json" });
      else await env.AUDIT_QUEUE.sendBatch(messages.map((body) => ({ body, contentType: "json" as const })));
    }),
  );
  let ok = 0;
  results.forEach((r, i) => {
    if (r.status === "fulfilled") ok++;
    else console.error(`audit: device ${devices[i]?.path ?? "?"} could not record ${entries.length} entr${entries.length === 1 ? "y" : "ies"}:`, errorText(r.reason));
  });
  if (ok === 0) throw new AuditUnavailableError(results.find((r) => r.status === "rejected")?.reason);
  return hashed;
}

function errorText(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

const encoder = new TextEncoder();
const sizeOf = (v: unknown): number => encoder.encode(JSON.stringify(v)).length;

/**
 * Entries packed into as few messages as fit MAX_AUDIT_MESSAGE_BYTES, in order. An entry too big
 * for a message on its own keeps everything but its `data`, replaced by a marker naming its size
 * (the Queue cannot carry it; docs/audit.md states the limit). Still too big: the device fails.
 */
function pack(device: AuditDevice, entries: AuditEntry[]): AuditQueueMessage[] {
  const base = { v: 1 as const, device: { id: device.id, path: device.path, type: device.type === "r2" ? ("r2" as const) : ("http" as const) } };
  const room = MAX_AUDIT_MESSAGE_BYTES - sizeOf({ ...base, entries: [] });
  const messages: AuditQueueMessage[] = [];
  let current: AuditEntry[] = [];
  let used = 0;
  for (const original of entries) {
    let entry = original;
    let size = sizeOf(entry) + 1;
    if (size > room) {
      entry = elideData(original, size);
      size = sizeOf(entry) + 1;
      if (size > room) throw new Error(`an audit entry of ${size} bytes exceeds the queue message limit even without its data`);
    }
    if (used + size > room && current.length > 0) {
      messages.push({ ...base, entries: current });
      current = [];
      used = 0;
    }
    current.push(entry);
    used += size;
  }
  if (current.length > 0) messages.push({ ...base, entries: current });
  return messages;
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
