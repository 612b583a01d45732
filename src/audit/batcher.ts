/**
 * Group commit of audit entries to the Queue: the entries of concurrent requests in one isolate
 * share Queue messages and one `sendBatch` per flush, through the group commit the PKI's
 * certificate rows use too (src/core/group-commit.ts: leader, hand-over, stale lead, wake-up).
 * Entries arrive HMAC'd and serialized (enqueue.ts), one JSON line each in pieces, and are never
 * parsed again: a message is a header line indexing its entries, the `auth` and `request` members
 * its entries share (each once), then the entries' lines without them (./message.ts); the
 * consumer splices them back and hands the lines to the sink.
 *
 * Invariants:
 * - **Durable before the answer.** `queueEntries` resolves only after the `sendBatch` holding
 *   every one of its entries has returned, and says which devices' entries could not be queued
 *   (the caller answers 503 when none could). No request answers from a flush still in flight.
 * - **One flush in flight per isolate.** The first caller with nothing in flight leads: after one
 *   timer tick it takes everything waiting and sends it. Callers arriving meanwhile wait; when the flush ends, the lead passes to the first
 *   waiter, which flushes everything waiting by then. Under load a flush thus carries the entries
 *   of every request that arrived during the previous one. A lead not flushed within
 *   STALE_LEAD_MS (its request cancelled) is taken over by the first waiter.
 * - **A bounded linger, only in company and only while it pays** (./linger.ts `gather`): the
 *   leader waits at most LINGER_MS for the hand-offs it expects, and not at all when they are
 *   there, when it is alone, or when lingering has recently not brought company; the hand-off
 *   that completes what it expects flushes the group at once, without waiting for its timer.
 * - **No waiter waits for ever.** Every waiter is settled by a flush that took its entries after
 *   they were added (the leader takes everything waiting once its linger ends, and the lead
 *   passes to the first waiter when a flush ends), and it looks at its result on timers of its
 *   own (src/core/group-commit.ts: first when the flush in flight should end, at most 8 ms on,
 *   then every 1 ms); a lead stuck longer than STALE_LEAD_MS is taken over.
 *   Each step is bounded by the caller's own timers, none by a promise another request resolves.
 * - **Within the Queue's limits** (https://developers.cloudflare.com/queues/platform/limits/):
 *   a message holds one device's entries, at most MAX_AUDIT_MESSAGE_BYTES (the limit is 128 KB);
 *   a `sendBatch` at most MAX_BATCH_MESSAGES messages and MAX_BATCH_BYTES (100 and 256 KB). A
 *   flush larger than one `sendBatch` sends several, concurrently.
 * - **A failed send fails only what it carried**: each (request, device) whose entries were in a
 *   failed `sendBatch` is reported failed to that request; the others stand.
 * - **Nothing crosses requests but data.** workerd ties I/O to the request that made it, so
 *   waiters hand over strings; the leader sends in its own request (kept open: its entries are in
 *   the flush) and hands the send to waitUntil.
 */
import { GroupCommit } from "../core/group-commit";
import { auditedInFlight, gather, groupComplete, recordFlush } from "./linger";
import { encodeMessage, headerBytes, indexBytes, messageDevice, type QueuedEntry } from "./message";
import { MAX_AUDIT_MESSAGE_BYTES, type AuditDevice } from "./types";

/**
 * This isolate's counts since it started (sys/metrics `lanyard.audit.isolate.*`, uncached, and
 * the audit bench's "sendBatch calls per request"): hand-offs (`queueEntries` calls), flushes,
 * `sendBatch` calls. Diagnostics of one isolate, not totals (docs/audit.md "Batching").
 */
export const batchStats = { handoffs: 0, flushes: 0, sendBatchCalls: 0 };

/** Cloudflare Queues: at most 100 messages and 256 KB in one sendBatch (a margin kept). */
export const MAX_BATCH_MESSAGES = 100;
export const MAX_BATCH_BYTES = 250_000;
/** Requests taken into one flush at most (a bound on one flush's work, not on throughput). */
const MAX_GROUP = 512;

/** One device's part of a request: its entries (id, time, JSON text), in order. */
export interface DevicePart {
  device: AuditDevice;
  entries: QueuedEntry[];
}

/** Device id → the error of a device whose entries could not be queued. */
export type SendFailures = Map<string, unknown>;

/** One request's parts, as the group commit carries them. */
interface Waiter {
  parts: DevicePart[];
  /** A read's one hand-off (src/audit/linger.ts: its company is on its way in, the wait pays). */
  read: boolean;
}

/** A Queue message being built: its entries, size, the shared members it states, whose entries it carries, then its text. */
interface Built {
  device: AuditDevice;
  entries: QueuedEntry[];
  bytes: number;
  shared: Set<string>;
  from: Set<Waiter>;
  body: string;
}

type QueueSend = (device: AuditDevice, messages: string[]) => Promise<void>;
let sendOverride: QueueSend | null = null;
/** Test seam (enqueue.ts `setAuditQueueSendForTests`): per device, the message texts as the Queue would carry them. */
export function setBatchSendForTests(fn: QueueSend | null): void {
  sendOverride = fn;
}

/**
 * A leader whose request was cancelled (the client went away before its flush was handed to
 * waitUntil) would hold the lead for ever; the first waiter takes it over after this long. Longer
 * than any Queue send, so at worst two flushes overlap.
 */
export const STALE_LEAD_MS = 15_000;

const commit = new GroupCommit<Waiter, SendFailures, Queue>({
  maxGroup: MAX_GROUP,
  staleLeadMs: STALE_LEAD_MS,
  gather: (waiting, first, leads) => gather(waiting, auditedInFlight, first.read, leads),
  complete: (waiting) => groupComplete(waiting),
  run: flush,
  lost: (w) => new Map(w.parts.map((p) => [p.device.id, new Error("audit entries were not queued")])),
});

/** Queues the parts with those of concurrent requests; resolves once sent, with the devices that failed. */
export async function queueEntries(queue: Queue, parts: DevicePart[], waitUntil?: (p: Promise<unknown>) => void, read = false): Promise<SendFailures> {
  batchStats.handoffs++;
  return commit.submit(queue, { parts, read }, waitUntil);
}

/** The group's entries packed per device into messages within MAX_AUDIT_MESSAGE_BYTES, in order. */
export function build(group: readonly Waiter[]): Built[] {
  const out: Built[] = [];
  const open = new Map<string, Built>();
  for (const w of group) {
    for (const part of w.parts) {
      for (const entry of part.entries) {
        let m = open.get(part.device.id);
        if (m && m.bytes + sizeIn(m, entry) > MAX_AUDIT_MESSAGE_BYTES) m = undefined;
        if (!m) {
          m = { device: part.device, entries: [], bytes: headerBytes(messageDevice(part.device)), shared: new Set(), from: new Set(), body: "" };
          open.set(part.device.id, m);
          out.push(m);
        }
        m.bytes += sizeIn(m, entry);
        m.entries.push(entry);
        for (const p of entry.shared) m.shared.add(p.text);
        m.from.add(w);
      }
    }
  }
  for (const m of out) m.body = encodeMessage(messageDevice(m.device), m.entries);
  return out;
}

/** What an entry adds to a message: its line and newline, its index item, and the shared members the message does not state yet. */
function sizeIn(m: Built, entry: QueuedEntry): number {
  let size = entry.bytes + 1 + indexBytes(entry);
  for (const p of entry.shared) if (!m.shared.has(p.text)) size += p.bytes + 1;
  return size;
}

/** The messages split into sendBatch calls within the Queue's per-call limits. */
function chunks(messages: Built[]): Built[][] {
  const out: Built[][] = [];
  let cur: Built[] = [];
  let bytes = 0;
  for (const m of messages) {
    if (cur.length > 0 && (cur.length >= MAX_BATCH_MESSAGES || bytes + m.bytes > MAX_BATCH_BYTES)) {
      out.push(cur);
      cur = [];
      bytes = 0;
    }
    cur.push(m);
    bytes += m.bytes;
  }
  if (cur.length > 0) out.push(cur);
  return out;
}

/** Sends the group's messages; never rejects: per waiter, in order, the devices whose messages failed. */
async function flush(queue: Queue, group: Waiter[]): Promise<SendFailures[]> {
  const failures = new Map<Waiter, SendFailures>();
  const fail = (sent: Built[], error: unknown) => {
    for (const m of sent) {
      for (const w of m.from) {
        let f = failures.get(w);
        if (!f) failures.set(w, (f = new Map()));
        f.set(m.device.id, error);
      }
    }
  };
  batchStats.flushes++;
  recordFlush(group.length);
  const messages = build(group);
  const batches = sendOverride ? perDevice(messages) : chunks(messages);
  await Promise.all(
    batches.map(async (batch) => {
      batchStats.sendBatchCalls++;
      try {
        if (sendOverride) await sendOverride(batch[0]?.device as AuditDevice, batch.map((m) => m.body));
        // One message (the usual flush: one device): a plain send, the same one call to the
        // Queue, and the local simulator takes its body as it is, not base64'd in JSON.
        else if (batch.length === 1 && batch[0]) await queue.send(batch[0].body, { contentType: "text" });
        else await queue.sendBatch(batch.map((m) => ({ body: m.body, contentType: "text" as const })));
      } catch (e) {
        fail(batch, e);
      }
    }),
  );
  return group.map((w) => failures.get(w) ?? new Map());
}

/** The test seam sees one device's messages per call, as a per-device queue would. */
function perDevice(messages: Built[]): Built[][] {
  const by = new Map<string, Built[]>();
  for (const m of messages) {
    const list = by.get(m.device.id);
    if (list) list.push(m);
    else by.set(m.device.id, [m]);
  }
  return [...by.values()];
}
