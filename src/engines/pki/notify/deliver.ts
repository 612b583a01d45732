/**
 * The `lanyard-notify` queue consumer (docs/pki-notifications.md): sends each queued expiry
 * notification to its target and records the outcome in pki_notify_sent.
 *
 * Invariants:
 * - A notification is marked sent only after its target answered 2xx; until then its message is
 *   retried (`retry({ delaySeconds })`, RETRY_BASE_SECONDS doubling up to RETRY_CAP_SECONDS),
 *   and every attempt touches the row (attempts, last_error, updated_at), so the scan's
 *   re-queue of lost messages (./scan.ts, STALE_SECONDS) leaves a live one alone.
 * - A message whose row is no longer pending (sent meanwhile, or its mount removed) is acked
 *   without sending: at most one 2xx answer per row, unless a target that answered 2xx is
 *   asked again because the row could not be marked (then it may hear of it twice; never zero).
 * - A target removed from the configuration drops its pending notifications (state "dropped").
 * - Each message is acked or retried on its own; no error escapes the handler (that would retry
 *   the whole batch).
 * - Redirects are not followed, and the URL is checked again before every POST (outbound rules,
 *   src/core/outbound-url.ts). Errors recorded name the status or the failure kind, never the
 *   URL or a header.
 */
import { openDb, type Db } from "../../../core/db/client";
import { checkOutboundUrl } from "../../../core/outbound-url";
import { getNotification, getNotifyConfig, markAttempt, markDropped, markSent, type NotifyKey, type NotifyRow } from "../storage/notify-store";
import { targetOf } from "./config";
import { isNotifyMessage } from "./queue";

export const RETRY_BASE_SECONDS = 30;
export const RETRY_CAP_SECONDS = 6 * 3600;
const TIMEOUT_MS = 10_000;

/** Delay before the next attempt after `attempts` failed ones: 30 s doubling, at most 6 h. */
export function notifyRetryDelay(attempts: number): number {
  return Math.min(RETRY_CAP_SECONDS, RETRY_BASE_SECONDS * 2 ** Math.max(0, Math.min(attempts - 1, 20)));
}

const rfc3339 = (sec: number): string => new Date(sec * 1000).toISOString().replace(".000Z", "Z");

/** The POST body: the json form, or a Slack incoming-webhook message ({"text": ...}). */
export function notificationBody(r: NotifyRow, format: string): string {
  if (format === "slack") {
    const what = r.kind === "issuer" ? "Issuer" : "Certificate";
    const name = r.commonName === "" ? "(no common name)" : r.commonName;
    return JSON.stringify({ text: `${what} ${name} (serial ${r.serial}) on mount ${r.mountPath} expires ${rfc3339(r.notAfter)} (within ${r.threshold}).` });
  }
  return JSON.stringify({ kind: r.kind, mount: r.mountPath, serial_number: r.serial, common_name: r.commonName, not_after: rfc3339(r.notAfter), threshold: r.threshold });
}

type Outcome = { ok: true } | { ok: false; error: string } | { dropped: string };

async function attempt(env: Env, db: Db, row: NotifyRow): Promise<Outcome> {
  const target = await targetOf(env, row.mountId, await getNotifyConfig(db, row.mountId), row.target);
  if (!target) return { dropped: "the target is no longer configured" };
  try {
    checkOutboundUrl(env, "url", target.target.url, "NOTIFY_ALLOW_HTTP");
  } catch {
    return { ok: false, error: "the target URL is not allowed by the outbound URL rules" };
  }
  let res: Response;
  try {
    res = await fetch(target.target.url, {
      method: "POST",
      headers: { ...target.headers, "content-type": "application/json" },
      body: notificationBody(row, target.target.format),
      redirect: "manual",
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (e) {
    return { ok: false, error: e instanceof Error && e.name === "TimeoutError" ? "timed out" : "connection failed" };
  }
  await res.body?.cancel();
  return res.status >= 200 && res.status < 300 ? { ok: true } : { ok: false, error: `HTTP ${res.status}` };
}

async function deliverOne(env: Env, db: Db, msg: Message<unknown>): Promise<void> {
  if (!isNotifyMessage(msg.body)) {
    msg.ack();
    return;
  }
  const key: NotifyKey = { mountId: msg.body.mount_id, serial: msg.body.serial, threshold: msg.body.threshold, target: msg.body.target };
  const row = await getNotification(db, key);
  if (!row || row.state !== "pending") {
    msg.ack();
    return;
  }
  const now = Math.floor(Date.now() / 1000);
  const outcome = await attempt(env, db, row);
  if ("dropped" in outcome) {
    await markDropped(db, key, now, outcome.dropped);
    msg.ack();
  } else if (outcome.ok) {
    await markSent(db, key, now);
    msg.ack();
  } else {
    await markAttempt(db, key, now, outcome.error);
    msg.retry({ delaySeconds: notifyRetryDelay(msg.attempts) });
  }
}

export async function consumeNotifications(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const db = openDb(env.DB);
  await Promise.all(
    batch.messages.map(async (msg) => {
      try {
        await deliverOne(env, db, msg);
      } catch (e) {
        console.error("pki notify: delivery failed:", e instanceof Error ? e.name : "unknown error");
        msg.retry({ delaySeconds: notifyRetryDelay(msg.attempts) });
      }
    }),
  );
}
