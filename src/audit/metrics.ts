/**
 * The audit trail's gauges for sys/metrics (docs/operations.md "Metrics"): enabled devices by type
 * and the delivery backlog of http and r2 devices, which is the backlog of queue `lanyard-audit`
 * as its binding reports it (every device's entries share that queue, so the backlog is not split
 * by device; docs/audit.md).
 */
import type { Db } from "../core/db/client";
import { gauge, queueBacklog, type GaugeFamily } from "../core/metrics";
import { deviceCounts } from "./audit-store";
import { batchStats } from "./batcher";
import { AUDIT_QUEUE_NAME } from "./types";

export async function auditMetrics(db: Db, env: Env, now: number): Promise<GaugeFamily[]> {
  const [devices, backlog] = await Promise.all([deviceCounts(db), queueBacklog(env.AUDIT_QUEUE, AUDIT_QUEUE_NAME, "lanyard.audit.queue", now)]);
  return [gauge("lanyard.audit.devices", "Enabled audit devices by type.", devices.map((d) => ({ labels: { type: d.type }, value: d.n }))), ...backlog];
}

/** Random per isolate, drawn at the first read (Workers refuse random values at global scope). */
let isolateId: string | null = null;

/**
 * This isolate's audit hand-offs, flushes and `sendBatch` calls since it started (src/audit/batcher.ts),
 * read at every sys/metrics read (never cached): diagnostics of the isolate that answers, labelled
 * with its random id, not totals of the service (docs/audit.md "Batching").
 */
export function auditIsolateCounts(): GaugeFamily[] {
  isolateId ??= crypto.randomUUID().slice(0, 8);
  const labels = { isolate: isolateId };
  const s = (value: number) => [{ labels, value }];
  return [
    gauge("lanyard.audit.isolate.handoffs", "Audit hand-offs to the batcher by the isolate answering, since it started.", s(batchStats.handoffs)),
    gauge("lanyard.audit.isolate.flushes", "Audit batcher flushes by the isolate answering, since it started.", s(batchStats.flushes)),
    gauge("lanyard.audit.isolate.send_batch_calls", "Queue calls (send or sendBatch) of the audit batcher in the isolate answering, since it started.", s(batchStats.sendBatchCalls)),
  ];
}
