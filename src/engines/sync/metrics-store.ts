/**
 * Secrets sync's gauges for sys/metrics (docs/operations.md "Metrics"), read with one aggregate
 * statement over sync_associations (GROUP BY namespace, destination type and status; removed
 * associations, kept only as tombstones, left out) plus the sync queue's backlog as its binding
 * reports it. Nothing is scanned in JavaScript.
 */
import { gauge, namespaceLabel, queueBacklog, type GaugeFamily, type MetricsContext } from "../../core/metrics";

interface AssociationAggregate {
  namespace_id: string;
  destination_type: string;
  sync_status: string;
  n: number;
  drift: number;
  dead: number;
  pending: number;
  oldest_pending: number | null;
}

/** A removed association whose unsync finished (the tombstone of ./association-store.ts). */
const LIVE = "NOT (desired = 'unsynced' AND sync_status = 'UNSYNCED')";

export async function syncMetrics(ctx: MetricsContext, queueName: string): Promise<GaugeFamily[]> {
  const { results } = await ctx.db.$client
    .prepare(
      `SELECT namespace_id, destination_type, sync_status, count(*) AS n, sum(drift_count) AS drift,
         sum(dead_lettered_at IS NOT NULL) AS dead, sum(generation > done_generation) AS pending,
         min(CASE WHEN generation > done_generation THEN updated_at END) AS oldest_pending
       FROM sync_associations WHERE ${LIVE} GROUP BY namespace_id, destination_type, sync_status`,
    )
    .all<AssociationAggregate>();
  const by = (r: AssociationAggregate) => ({ namespace: namespaceLabel(ctx.namespacePath(r.namespace_id)), destination_type: r.destination_type });
  // Drift, dead letters and pending work summed over the statuses of each namespace and type.
  const perType = new Map<string, { labels: Record<string, string>; drift: number; dead: number; pending: number }>();
  let oldest: number | null = null;
  for (const r of results) {
    const labels = by(r);
    const key = `${labels.namespace}\u0000${labels.destination_type}`;
    const t = perType.get(key) ?? { labels, drift: 0, dead: 0, pending: 0 };
    t.drift += r.drift;
    t.dead += r.dead;
    t.pending += r.pending;
    perType.set(key, t);
    if (r.oldest_pending !== null && (oldest === null || r.oldest_pending < oldest)) oldest = r.oldest_pending;
  }
  const types = [...perType.values()];
  return [
    gauge(
      "lanyard.sync.associations",
      "Sync associations by namespace, destination type and status (PENDING, SYNCING, SYNCED, UNSYNCING, UNSYNCED, *_ERROR).",
      results.map((r) => ({ labels: { ...by(r), status: r.sync_status }, value: r.n })),
    ),
    gauge("lanyard.sync.drift.detected", "Drift found by reconciliation (the provider's copy changed or gone), summed over current associations.", types.map((t) => ({ labels: t.labels, value: t.drift }))),
    gauge("lanyard.sync.dead_letters", "Associations whose last operation exhausted its retries (dead-lettered).", types.map((t) => ({ labels: t.labels, value: t.dead }))),
    gauge("lanyard.sync.pending", "Associations with an operation not yet final (queued, running or retrying).", types.map((t) => ({ labels: t.labels, value: t.pending }))),
    gauge(
      "lanyard.sync.pending.oldest_age_seconds",
      "Seconds since the least recently changed association with an unfinished operation last changed state (0 when none).",
      [{ labels: {}, value: oldest === null ? 0 : Math.max(0, Math.round((ctx.now - oldest) / 1000)) }],
    ),
    ...(await queueBacklog(ctx.env.SYNC_QUEUE, queueName, "lanyard.sync.queue", ctx.now)),
  ];
}
