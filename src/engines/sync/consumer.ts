/**
 * The sync queue's consumer (docs/secrets-sync.md "What changes propagate").
 *
 * INVARIANTS
 * - Every message is handled on its own (concurrently within a batch): one try/catch each, and
 *   each is acked or retried explicitly. No error escapes the handler (that would retry the whole batch).
 *   Messages of one batch for the same association are driven once (`dedupe`): the others are
 *   acked after it, since one drive converges the association to its newest intent.
 * - A message carries ids only. The handler reloads the association (or destination) and lets
 *   the engine converge it to the latest intent (./engine.ts), so handling is idempotent: a
 *   message delivered twice finds the generation already done and is acked; a late retry
 *   cannot undo a newer intent (the engine checks the generation before and after the call).
 * - Retryable failures (provider 5xx, 429, timeouts) are retried with exponential backoff that
 *   honours Retry-After, up to MAX_ATTEMPTS deliveries; then the status is left failed
 *   (EXTERNAL_SERVICE_ERROR) for reconciliation. Client-side failures are final at once.
 *   Anything else that goes wrong here is retried the same way, and the queue's dead-letter
 *   queue catches what exhausts `max_retries`.
 * - Never sleeps: waiting is the queue's job (`retry({ delaySeconds })`).
 * - Drift checks (`drift`, `drift-sweep`; ./reconcile.ts, docs/secrets-sync.md "3. Drift is detected and repaired") are nudges too: a
 *   check that cannot read back now is retried a few times, then left to the next pass.
 */
import { loadConfig } from "../../core/config";
import { openDb } from "../../core/db/client";
import { coalescingD1 } from "../../core/db/coalesce";
import { drive, type EngineDeps } from "./engine";
import { MAX_ATTEMPTS, backoffSeconds, parseMessage } from "./messages";
import { processPurge, sweepUnfinished } from "./operations";
import { checkDrift, driftSweep } from "./reconcile";

/** Delay before looking again at an association another worker holds. */
const BUSY_DELAY_SECONDS = 2;

async function handle(deps: EngineDeps, msg: Message<unknown>): Promise<void> {
  const m = parseMessage(msg.body);
  if (!m) {
    console.error(`sync consumer: dropping malformed message ${msg.id}`);
    msg.ack();
    return;
  }
  const final = msg.attempts >= MAX_ATTEMPTS;
  if (m.kind === "sweep") {
    await sweepUnfinished(deps, m.after, m.mountId);
    msg.ack();
    return;
  }
  if (m.kind === "drift-sweep") {
    await driftSweep(deps, m.after, m.destination);
    msg.ack();
    return;
  }
  if (m.kind === "drift") {
    // A drift check that could not read back is retried a few times; a later pass looks again.
    const r = await checkDrift(deps, m.id);
    if (r.kind === "busy" && !final) msg.retry({ delaySeconds: BUSY_DELAY_SECONDS });
    else if (r.kind === "failed" && r.retryable && !final) msg.retry({ delaySeconds: r.delaySeconds });
    else msg.ack();
    return;
  }
  if (m.kind === "purge") {
    const r = await processPurge(deps, { namespaceId: m.namespaceId, type: m.type, name: m.name }, final, msg.attempts);
    if (r.retry) msg.retry({ delaySeconds: r.delaySeconds });
    else msg.ack();
    return;
  }
  const r = await drive(deps, m.id, { finalOnRetryable: final });
  if (r.kind === "busy") msg.retry({ delaySeconds: BUSY_DELAY_SECONDS });
  // The engine recorded when it retries (next_retry_at, docs/secrets-sync.md "5. Failures are visible"): queue it for then.
  else if (r.kind === "done" && r.retryable) msg.retry({ delaySeconds: r.retryDelaySeconds ?? backoffSeconds(msg.attempts, r.retryAfter) });
  else msg.ack();
}

/** The Worker's `queue` handler for the sync queue. */
export async function handleSyncBatch(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  let deps: EngineDeps;
  try {
    // The batch's messages run concurrently: their D1 batches of one turn go as one.
    deps = { env, db: openDb(coalescingD1(env.DB)), keys: loadConfig(env).seal };
  } catch (e) {
    // Not configured (production without SEAL_KEY): nothing can be done yet; try again later.
    console.error("sync consumer: service not configured:", e instanceof Error ? e.message : "unknown error");
    for (const msg of batch.messages) msg.retry({ delaySeconds: 60 });
    return;
  }
  // Messages of a batch run concurrently: each association has its own lease. Several messages
  // for one association in a batch are one nudge: the engine converges it to its newest intent,
  // which every one of them was sent after, so only the least-tried one is driven and the others
  // are acked once it is handled (they would only meet its lease busy and come back in 2 s).
  const { primary, duplicates } = dedupe(batch.messages);
  await Promise.all(
    primary.map(async (msg) => {
      try {
        await handle(deps, msg);
      } catch (e) {
        console.error(`sync consumer: message ${msg.id} failed:`, e instanceof Error ? `${e.name}: ${e.message}` : "unknown error");
        msg.retry({ delaySeconds: backoffSeconds(msg.attempts) });
      }
    }),
  );
  for (const msg of duplicates) msg.ack();
}

/** Splits a batch: one message per association (the least-tried), and the other messages for the same associations. */
function dedupe<M extends { body: unknown; attempts: number }>(messages: readonly M[]): { primary: M[]; duplicates: M[] } {
  const byAssociation = new Map<string, M>();
  const primary: M[] = [];
  const duplicates: M[] = [];
  for (const msg of messages) {
    const m = parseMessage(msg.body);
    if (m?.kind !== "association") {
      primary.push(msg);
      continue;
    }
    const seen = byAssociation.get(m.id);
    if (!seen) byAssociation.set(m.id, msg);
    else if (msg.attempts < seen.attempts) {
      byAssociation.set(m.id, msg);
      duplicates.push(seen);
    } else duplicates.push(msg);
  }
  return { primary: [...primary, ...byAssociation.values()], duplicates };
}
