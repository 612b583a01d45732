/**
 * The audit trail's gauges for sys/metrics (docs/operations.md "Metrics"): enabled devices by type
 * and the delivery backlog of http and r2 devices, which is the backlog of queue `lanyard-audit`
 * as its binding reports it (every device's entries share that queue, so the backlog is not split
 * by device; docs/audit.md).
 */
import type { Db } from "../core/db/client";
import { gauge, queueBacklog, type GaugeFamily } from "../core/metrics";
import { deviceCounts } from "./audit-store";
import { AUDIT_QUEUE_NAME } from "./types";

export async function auditMetrics(db: Db, env: Env, now: number): Promise<GaugeFamily[]> {
  const [devices, backlog] = await Promise.all([deviceCounts(db), queueBacklog(env.AUDIT_QUEUE, AUDIT_QUEUE_NAME, "lanyard.audit.queue", now)]);
  return [gauge("lanyard.audit.devices", "Enabled audit devices by type.", devices.map((d) => ({ labels: { type: d.type }, value: d.n }))), ...backlog];
}
