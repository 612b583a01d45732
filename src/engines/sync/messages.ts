/**
 * What travels on the sync queue: ids only, never a secret value. The
 * consumer reloads everything else, so a message is only a nudge: delivering one twice, late, or
 * after a newer one is harmless (see ./engine.ts).
 */
import type { DestinationKey } from "./store";
import { isDestinationType } from "./providers/registry";

export type SyncMessage =
  | { kind: "association"; id: string }
  | { kind: "purge"; namespaceId: string; type: DestinationKey["type"]; name: string }
  /** Queue every association with unfinished work whose id sorts after `after` (of one mount, when given), a page at a time. */
  | { kind: "sweep"; after: string; mountId?: string }
  /** Compare one association's external secrets with what Lanyard last wrote (docs/secrets-sync.md "3. Drift is detected and repaired", ./reconcile.ts). */
  | { kind: "drift"; id: string }
  /** Queue a drift check for every settled association whose id sorts after `after` (of one destination, when given), a page at a time. */
  | { kind: "drift-sweep"; after: string; destination?: { namespaceId: string; type: DestinationKey["type"]; name: string } };

/** Narrows an untrusted message body; null when it is not one of ours. */
export function parseMessage(body: unknown): SyncMessage | null {
  if (typeof body !== "object" || body === null) return null;
  const b = body as Record<string, unknown>;
  if (b.kind === "association" && typeof b.id === "string") return { kind: "association", id: b.id };
  if (b.kind === "purge" && typeof b.namespaceId === "string" && typeof b.type === "string" && isDestinationType(b.type) && typeof b.name === "string") {
    return { kind: "purge", namespaceId: b.namespaceId, type: b.type, name: b.name };
  }
  if (b.kind === "sweep" && typeof b.after === "string" && (b.mountId === undefined || typeof b.mountId === "string")) {
    return b.mountId === undefined ? { kind: "sweep", after: b.after } : { kind: "sweep", after: b.after, mountId: b.mountId };
  }
  if (b.kind === "drift" && typeof b.id === "string") return { kind: "drift", id: b.id };
  if (b.kind === "drift-sweep" && typeof b.after === "string") {
    if (b.destination === undefined) return { kind: "drift-sweep", after: b.after };
    const d = b.destination as Record<string, unknown> | null;
    if (d && typeof d.namespaceId === "string" && typeof d.type === "string" && isDestinationType(d.type) && typeof d.name === "string") {
      return { kind: "drift-sweep", after: b.after, destination: { namespaceId: d.namespaceId, type: d.type, name: d.name } };
    }
  }
  return null;
}

/** Attempts (deliveries) after which a retryable failure is left failed. */
export const MAX_ATTEMPTS = 5;
/** The longest delay a queue accepts (12 hours). */
const MAX_DELAY_SECONDS = 43_200;

/**
 * Exponential backoff for the `attempt`-th retry (1-based): 2, 4, 8, ... seconds, capped at 10
 * minutes, and never shorter than what the provider asked for with Retry-After.
 */
export function backoffSeconds(attempt: number, retryAfter?: number): number {
  const exp = Math.min(2 ** Math.max(1, attempt), 600);
  return Math.min(Math.max(exp, retryAfter ?? 0), MAX_DELAY_SECONDS);
}

/** Sends messages in batches of 100 (the queue's batch limit). */
export async function enqueue(env: Env, messages: SyncMessage[], delaySeconds = 0): Promise<void> {
  for (let i = 0; i < messages.length; i += 100) {
    const chunk = messages.slice(i, i + 100);
    await env.SYNC_QUEUE.sendBatch(chunk.map((body) => (delaySeconds > 0 ? { body, delaySeconds } : { body })));
  }
}
