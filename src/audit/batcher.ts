/**
 * Group commit of audit entries to the Queue: the entries of concurrent requests in one isolate
 * share Queue messages and one `sendBatch` per flush, through the group commit the PKI's
 * certificate rows use too (src/core/group-commit.ts: leader, hand-over, stale lead, wake-up).
 * Entries arrive HMAC'd and serialized (enqueue.ts), one JSON text each, and are never parsed
 * again: a message is a header line indexing its entries, then their texts as NDJSON lines
 * (./message.ts), which the consumer hands to the sink as they are.
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
 * - **A bounded linger, only in company.** The leader waits for the hand-offs it expects
 *   (`expectedGroup`): the isolate's other audited requests in flight (`auditedRequestBegins`:
 *   their work started, their last hand-off not ended), or as many as the largest flush of the
 *   last PEAK_HOLD_MS (under steady load they come again, some not yet inside the Worker). Fewer
 *   waiting than that, it waits at most LINGER_STEPS times 1 ms within LINGER_MS (`gather`); with
 *   nothing else in flight and no recent flush of company it does not linger. The in-flight count
 *   is exact but for requests cancelled mid-way, which count until IN_FLIGHT_MAX_MS; a wrong
 *   count or peak costs at most the bound.
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
}

/** A Queue message being built: its entries, size, whose entries it carries, then its text. */
interface Built {
  device: AuditDevice;
  entries: QueuedEntry[];
  bytes: number;
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

/**
 * Audited requests of this isolate whose entries may still reach the batcher: from the start of
 * their work (src/app/audit-hook.ts `beforeWork`) to the end of their last hand-off, which the
 * trail ends in a `finally` (an answer that fails to render, a hand-off that throws). A request
 * cancelled mid-way (the client went away) never runs its code again, not even a `finally`: it
 * stops counting IN_FLIGHT_MAX_MS after it began. Oldest first (a Set keeps insertion order).
 */
const inFlight = new Set<{ since: number }>();

/** Longer than any audited request's work; a request counted longer than this was cancelled. */
export const IN_FLIGHT_MAX_MS = STALE_LEAD_MS;

/** Counts one audited request in flight; the function returned (idempotent) stops counting it. */
export function auditedRequestBegins(): () => void {
  const me = { since: Date.now() };
  inFlight.add(me);
  return () => {
    inFlight.delete(me);
  };
}

/** The audited requests in flight now (those counted longer than IN_FLIGHT_MAX_MS dropped). */
export function auditedInFlight(now = Date.now()): number {
  for (const r of inFlight) {
    if (now - r.since <= IN_FLIGHT_MAX_MS) break;
    inFlight.delete(r);
  }
  return inFlight.size;
}

/** The linger's bounds: at most LINGER_STEPS waits of 1 ms, and LINGER_MS since the first tick. */
export const LINGER_STEPS = 2;
export const LINGER_MS = 2;
/** How long the largest recent flush is expected again (then the next flush's size replaces it). */
export const PEAK_HOLD_MS = 1_000;

const tick = (): Promise<void> => new Promise((r) => setTimeout(r, 0));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * The largest flush of the last PEAK_HOLD_MS: under steady load as many requests hand over per
 * flush again, though at a given moment some are still on their way into the Worker (not yet
 * counted in flight): reading the HTTP request, in their D1 round trip.
 */
const peak = { size: 0, at: 0 };

/** Test seam: no recent flush (a fresh isolate). */
export function forgetFlushPeak(): void {
  peak.size = 0;
  peak.at = 0;
}

/** Records a flush's size in the peak. */
export function recordFlush(size: number, now = Date.now()): void {
  if (size >= peak.size || now - peak.at > PEAK_HOLD_MS) {
    peak.size = size;
    peak.at = now;
  }
}

/** The hand-offs a leader expects in its flush: those in flight now, or the recent peak. */
export function expectedGroup(inFlightNow: number, now = Date.now()): number {
  return Math.max(inFlightNow, now - peak.at <= PEAK_HOLD_MS ? peak.size : 0);
}

/**
 * The leader's wait for company, while fewer hand-offs wait than it expects (`expectedGroup`):
 * one tick (the requests of this turn join), then at most LINGER_STEPS waits of 1 ms within
 * LINGER_MS. When as many already wait, or it is alone (nothing else in flight, no recent flush
 * larger than one), it does not wait at all: each wait is a timer event, CPU of its own.
 * Bounded by its own timers, so it always ends.
 */
export async function gather(waiting: () => number, inFlightNow: () => number = auditedInFlight): Promise<void> {
  if (waiting() >= expectedGroup(inFlightNow())) return;
  await tick();
  const start = Date.now();
  for (let i = 0; i < LINGER_STEPS && waiting() < expectedGroup(inFlightNow()) && Date.now() - start < LINGER_MS; i++) await sleep(1);
}

const commit = new GroupCommit<Waiter, SendFailures, Queue>({
  maxGroup: MAX_GROUP,
  staleLeadMs: STALE_LEAD_MS,
  gather: (waiting) => gather(waiting),
  run: flush,
  lost: (w) => new Map(w.parts.map((p) => [p.device.id, new Error("audit entries were not queued")])),
});

/** Queues the parts with those of concurrent requests; resolves once sent, with the devices that failed. */
export async function queueEntries(queue: Queue, parts: DevicePart[], waitUntil?: (p: Promise<unknown>) => void): Promise<SendFailures> {
  batchStats.handoffs++;
  return commit.submit(queue, { parts }, waitUntil);
}

/** The group's entries packed per device into messages within MAX_AUDIT_MESSAGE_BYTES, in order. */
export function build(group: readonly Waiter[]): Built[] {
  const out: Built[] = [];
  const open = new Map<string, Built>();
  for (const w of group) {
    for (const part of w.parts) {
      for (const entry of part.entries) {
        // Its line and newline, and its item in the header's index.
        const size = entry.bytes + 1 + indexBytes(entry);
        let m = open.get(part.device.id);
        if (m && m.bytes + size > MAX_AUDIT_MESSAGE_BYTES) m = undefined;
        if (!m) {
          m = { device: part.device, entries: [], bytes: headerBytes(messageDevice(part.device)), from: new Set(), body: "" };
          open.set(part.device.id, m);
          out.push(m);
        }
        m.entries.push(entry);
        m.bytes += size;
        m.from.add(w);
      }
    }
  }
  for (const m of out) m.body = encodeMessage(messageDevice(m.device), m.entries);
  return out;
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
