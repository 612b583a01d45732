/**
 * The consumer of queue `lanyard-audit` (docs/audit.md): delivers each audit device's
 * queued entries to its sink, `http` (./http.ts) or `r2` (./r2.ts). The message format is
 * ../message.ts (a header line indexing the entries, then the entries as NDJSON lines), the
 * producer ../enqueue.ts and ../batcher.ts. Only the header is parsed: each entry's line goes to
 * the sink as the request path wrote it.
 *
 * INVARIANTS
 * - Per device, never across devices: a batch's messages are grouped by `device.id`, each group
 *   is delivered on its own (concurrently) and acked or retried on its own. A message names one
 *   device and is only ever sent to that device's sink, so one device's failure never re-sends
 *   anything to another device.
 * - One delivery per group: the group's entries go out as one POST / one object, de-duplicated
 *   by entry `id`, and ordered by request: requests in the order of their first entry's `time`,
 *   and a request's `request` entry always before its `response` entry. The group's messages are
 *   all acked after the sink took the batch, or all retried when it did not (at-least-once: a
 *   batch is re-sent only after a failed attempt; the stable `id`s let a sink drop duplicates).
 * - In order per device, also after a failure. The core queues each entry once: a request's
 *   `request` entry in one message (before the work), its `response` entry in a later one. When
 *   nothing fails they arrive in that order. When a delivery fails, its messages come back after
 *   their delay, and newer messages of that device may arrive first: those are held (retried
 *   without an attempt, due back when the failed ones are) until every older message of the
 *   failed delivery has been delivered (`held` below). The hold is this isolate's memory and
 *   lasts at most HOLD_MAX_MS per message: a message that never comes back (dead-lettered, or
 *   taken by another consumer isolate) does not stall the device.
 * - Backoff: `retry({ delaySeconds })` with 2, 4, 8, 16, then 20 s between attempts
 *   (`retryDelaySeconds`). With the 10 s POST timeout and the 1 s batch window
 *   (wrangler.toml), a collector that comes back receives the waiting entries within about 30 s.
 *   After the queue's `max_retries` the runtime moves the messages to the dead-letter queue
 *   `lanyard-audit-dlq`; nothing is acked without having been delivered, except below.
 * - A device disabled since its entries were queued (no delivery target): acked and dropped,
 *   as Vault drops the entries of a device that is gone. A message this code cannot read is not
 *   dropped: it is retried slowly until it reaches the dead-letter queue, where it can be read.
 * - No error escapes the handler (that would retry the whole batch, every device included).
 *   Logs name the device path and the failure, never entries, addresses or headers.
 */
import { deliveryTarget } from "../audit-store";
import { decodeMessage, type DecodedMessage, type QueuedLine } from "../message";
import { postNdjson } from "./http";
import { putNdjson } from "./r2";

/**
 * The dead-letter queue of `lanyard-audit` (wrangler.toml). The Worker consumes it with this same
 * consumer only when wrangler.toml has a [[queues.consumers]] block for it: that is how an
 * operator replays what a long outage sent there (docs/audit.md, "Dead-letter queue after max_retries").
 */
export const AUDIT_DLQ_NAME = "lanyard-audit-dlq";

/** Delay before the `attempts`-th retry (1-based): 2, 4, 8, 16, then at most 20 seconds. */
export const MAX_RETRY_DELAY_SECONDS = 20;
export function retryDelaySeconds(attempts: number): number {
  return Math.min(2 ** Math.max(1, attempts), MAX_RETRY_DELAY_SECONDS);
}

/** Delay for messages this consumer cannot read: they wait for the dead-letter queue. */
const UNREADABLE_DELAY_SECONDS = 60;

/** The message body if this version can read it (../message.ts), else null. */
export function parseAuditMessage(raw: unknown): DecodedMessage | null {
  return decodeMessage(raw);
}

/**
 * The entries of a device's messages as they are delivered: each `id` once (first occurrence),
 * requests in the order of their first entry's time (ties: the order met), and within a request
 * its `request` entry before its `response` entry.
 */
export function orderEntries(messages: readonly DecodedMessage[]): QueuedLine[] {
  const seen = new Set<string>();
  const byRequest = new Map<string, { first: number; order: number; entries: QueuedLine[] }>();
  for (const m of messages) {
    for (const e of m.lines) {
      if (seen.has(e.id)) continue;
      seen.add(e.id);
      let g = byRequest.get(e.request);
      if (!g) {
        g = { first: e.time, order: byRequest.size, entries: [] };
        byRequest.set(e.request, g);
      } else if (e.time < g.first) g.first = e.time;
      g.entries.push(e);
    }
  }
  return [...byRequest.values()]
    .sort((a, b) => a.first - b.first || a.order - b.order)
    .flatMap((g) => g.entries.sort((a, b) => a.type - b.type));
}

/** How long a failed message is waited for before newer ones of its device go ahead anyway. */
export const HOLD_MAX_MS = 3 * MAX_RETRY_DELAY_SECONDS * 1000;

interface Group {
  path: string;
  messages: Message<unknown>[];
  bodies: DecodedMessage[];
}

/**
 * Per device id: the messages of failed (or held) deliveries not yet delivered, by their first
 * entry's id (a message's identity across retries: each entry is in one message per device),
 * with their oldest entry time, when they are due back, when to stop waiting for them, whether a
 * delivery of theirs failed (else they only wait), and the requests whose `request` entry they hold.
 */
interface Undelivered {
  time: number;
  due: number;
  until: number;
  failed: boolean;
  requests: Set<string>;
}
const held = new Map<string, Map<string, Undelivered>>();

const messageKey = (b: DecodedMessage): string => b.lines[0]?.id ?? "";
function messageTime(b: DecodedMessage): number {
  let t = Number.POSITIVE_INFINITY;
  for (const e of b.lines) if (e.time < t) t = e.time;
  return t;
}

/** Remembers messages as undelivered (a failed delivery, or held behind one). */
function hold(deviceId: string, bodies: readonly DecodedMessage[], delaySeconds: number, now: number, failed: boolean): void {
  let h = held.get(deviceId);
  if (!h) held.set(deviceId, (h = new Map()));
  for (const b of bodies) {
    const requests = new Set(b.lines.filter((e) => e.type === 0).map((e) => e.request));
    h.set(messageKey(b), { time: messageTime(b), due: now + delaySeconds * 1000, until: now + HOLD_MAX_MS, failed, requests });
  }
}

/**
 * Whether `b` must wait for the undelivered `u`: `u` is older, or as old (clocks tie) and either
 * failed or holds the request entry of a response in `b`.
 */
function mustWait(b: DecodedMessage, u: Undelivered): boolean {
  const t = messageTime(b);
  if (u.time !== t) return u.time < t;
  return u.failed || b.lines.some((e) => e.type === 1 && u.requests.has(e.request));
}

/**
 * Splits a device's group into what may be delivered now (older than every undelivered message
 * of an earlier failure that is not in this batch) and what must wait, with the seconds to wait.
 */
function inOrder(deviceId: string, group: Group, now: number): { go: Group; wait: Group; delaySeconds: number } {
  const go: Group = { path: group.path, messages: [], bodies: [] };
  const wait: Group = { path: group.path, messages: [], bodies: [] };
  const h = held.get(deviceId);
  if (!h) return { go: group, wait, delaySeconds: 0 };
  const here = new Set(group.bodies.map(messageKey));
  const away: Undelivered[] = [];
  for (const [k, v] of h) {
    if (v.until <= now) h.delete(k);
    else if (!here.has(k)) away.push(v);
  }
  if (h.size === 0) held.delete(deviceId);
  if (away.length === 0) return { go: group, wait, delaySeconds: 0 };
  let due = now;
  group.bodies.forEach((b, i) => {
    const blockers = away.filter((u) => mustWait(b, u));
    for (const u of blockers) due = Math.max(due, u.due);
    const to = blockers.length > 0 ? wait : go;
    to.bodies.push(b);
    to.messages.push(group.messages[i] as Message<unknown>);
  });
  return { go, wait, delaySeconds: Math.max(1, Math.ceil((due - now) / 1000)) };
}

async function deliverDevice(env: Env, deviceId: string, group: Group): Promise<void> {
  const now = Date.now();
  const { go, wait, delaySeconds } = inOrder(deviceId, group, now);
  if (wait.messages.length > 0) {
    console.warn(`audit: holding ${wait.messages.length} message(s) of device ${group.path} behind a failed delivery (${delaySeconds} s)`);
    hold(deviceId, wait.bodies, delaySeconds, now, false);
    for (const m of wait.messages) m.retry({ delaySeconds });
  }
  if (go.messages.length > 0) await deliverNow(env, deviceId, go);
}

async function deliverNow(env: Env, deviceId: string, group: Group): Promise<void> {
  const { path, messages, bodies } = group;
  try {
    const target = await deliveryTarget(env, deviceId);
    const entries = orderEntries(bodies);
    if (!target) {
      console.warn(`audit: device ${path} is no longer enabled; dropping ${entries.length} queued entries`);
      for (const m of messages) m.ack();
      return;
    }
    if (entries.length > 0) {
      // The NDJSON body: the entries' lines as queued, joined (nothing parsed or re-serialized).
      let text = "";
      for (const e of entries) text += `${e.line}\n`;
      if (target.type === "http") await postNdjson(target, text);
      else await putNdjson(env.AUDIT_BUCKET, target, entries, text);
    }
    for (const m of messages) m.ack();
    const h = held.get(deviceId);
    if (h) for (const b of bodies) h.delete(messageKey(b));
  } catch (e) {
    const attempts = Math.max(...messages.map((m) => m.attempts));
    const delaySeconds = retryDelaySeconds(attempts);
    hold(deviceId, bodies, delaySeconds, Date.now(), true);
    console.error(`audit: delivery to device ${path} failed (attempt ${attempts}), retrying in ${delaySeconds} s:`, e instanceof Error ? `${e.name}: ${e.message}` : "unknown error");
    for (const m of messages) m.retry({ delaySeconds });
  }
}

/** The Worker's `queue` handler for `lanyard-audit` (src/app/index.ts routes batches by queue name). */
export async function auditQueueConsumer(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const groups = new Map<string, Group>();
  for (const msg of batch.messages) {
    const body = parseAuditMessage(msg.body);
    if (!body) {
      console.error(`audit: message ${msg.id} is not an audit batch this version reads; kept for the dead-letter queue`);
      msg.retry({ delaySeconds: UNREADABLE_DELAY_SECONDS });
      continue;
    }
    let g = groups.get(body.device.id);
    if (!g) {
      g = { path: body.device.path, messages: [], bodies: [] };
      groups.set(body.device.id, g);
    }
    g.messages.push(msg);
    g.bodies.push(body);
  }
  await Promise.all([...groups].map(([id, g]) => deliverDevice(env, id, g)));
}
