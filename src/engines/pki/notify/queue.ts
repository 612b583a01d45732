/**
 * The `lanyard-notify` queue's messages (wrangler.toml): ids only, never a header or a URL; the
 * consumer (./deliver.ts) reloads the notification row and the target.
 */
export interface NotifyMessage {
  mount_id: string;
  serial: string;
  threshold: string;
  target: string;
}

type Send = (messages: NotifyMessage[]) => Promise<void>;
let sendForTests: Send | null = null;

/** Test seam: captures what would be queued (the tests hand it to the consumer themselves). */
export function setNotifyQueueSendForTests(fn: Send | null): void {
  sendForTests = fn;
}

/** Queues messages, 100 a call (a Queue's sendBatch limit). */
export async function sendNotifyMessages(env: Env, messages: NotifyMessage[]): Promise<void> {
  for (let i = 0; i < messages.length; i += 100) {
    const chunk = messages.slice(i, i + 100);
    if (sendForTests) await sendForTests(chunk);
    else await env.NOTIFY_QUEUE.sendBatch(chunk.map((body) => ({ body })));
  }
}

export function isNotifyMessage(v: unknown): v is NotifyMessage {
  if (typeof v !== "object" || v === null) return false;
  const o = v as Record<string, unknown>;
  return ["mount_id", "serial", "threshold", "target"].every((k) => typeof o[k] === "string");
}
