/**
 * GET sys/metrics (Vault API: https://developer.hashicorp.com/vault/api-docs/system/metrics):
 * Lanyard's gauges in Vault's JSON form, or with `format=prometheus` (or an Accept header asking
 * for OpenMetrics, as Vault) in the Prometheus text format 0.0.4. docs/operations.md "Metrics"
 * lists every gauge.
 *
 * Access: a token whose policy grants `read` on sys/metrics (checked by the dispatcher like every
 * sys path), or nobody's with METRICS_UNAUTHENTICATED=true (docs/configuration.md). Root
 * namespace only: the figures cover every namespace, so a child namespace's path answers 400,
 * and a namespaced token never reaches the root's path (the dispatcher's 403).
 *
 * INVARIANTS
 * - One computation per isolate per METRICS_CACHE_MS at most: the gauges are read from D1 with a
 *   handful of aggregate statements (each contributor's own: the engines' `metrics`, the audit
 *   trail, tokens, leases), kept as values in `app.metrics` (one entry) with the time their read
 *   started, and answered until that is METRICS_CACHE_MS old. So a figure is at most 10 s staler
 *   than D1, and a scraper polling every second costs one computation per 10 s per isolate.
 * - Two requests missing together both compute (docs/architecture.md "Caches and concurrency
 *   invariants": values, never promises); the later one to finish is kept.
 */
import { allNamespacePaths } from "../../auth/namespace-store";
import { liveTokenCounts } from "../../auth/token-store";
import { auditIsolateCounts, auditMetrics } from "../../audit/metrics";
import { BoundedCache } from "../../core/bounded-cache";
import type { Db } from "../../core/db/client";
import { badRequest } from "../../core/errors";
import { defineFields } from "../../core/fields";
import { liveLeaseCounts } from "../../core/lease-store";
import { gauge, metricsJson, metricsPrometheus, namespaceLabel, PROMETHEUS_CONTENT_TYPE, type GaugeFamily, type MetricsContext, type MountPlace } from "../../core/metrics";
import { allMountPlaces, ROOT_NAMESPACE } from "../../core/mount-store";
import { route, type RouteDef } from "../../core/route";
import { ENGINES } from "../engines";

/** How long one computation of the gauges is answered in an isolate. */
export const METRICS_CACHE_MS = 10_000;

interface Computed {
  /** Unix milliseconds when the read started: the figures' time. */
  at: number;
  families: GaugeFamily[];
}

const computed = new BoundedCache<Computed>("app.metrics", 1);

/** The label lookups of one read: every mount and namespace, read once. */
async function placesOf(db: Db): Promise<Pick<MetricsContext, "mountPlace" | "namespacePath">> {
  const [mounts, namespaces] = await Promise.all([allMountPlaces(db), allNamespacePaths(db)]);
  const nsPath = new Map<string, string>([[ROOT_NAMESPACE.id, ""], ...namespaces.map((n): [string, string] => [n.id, n.path])]);
  const places = new Map<string, MountPlace>(mounts.map((m) => [m.id, { namespace: nsPath.get(m.namespaceId) ?? m.namespaceId, mount: m.path }]));
  return {
    mountPlace: (id) => places.get(id) ?? { namespace: "", mount: id },
    namespacePath: (id) => nsPath.get(id) ?? id,
  };
}

/** Every contributor's gauges, read concurrently: the system's, the audit trail's, each engine's. */
async function collect(db: Db, env: Env, now: number): Promise<GaugeFamily[]> {
  const [places, tokens, leases] = await Promise.all([placesOf(db), liveTokenCounts(db, now), liveLeaseCounts(db, now)]);
  const ctx: MetricsContext = { db, env, now, ...places };
  const byNs = (rows: { namespaceId: string; n: number }[]) => rows.map((r) => ({ labels: { namespace: namespaceLabel(ctx.namespacePath(r.namespaceId)) }, value: r.n }));
  const parts = await Promise.all([auditMetrics(db, env, now), ...ENGINES.map((e) => e.metrics?.(ctx) ?? Promise.resolve([]))]);
  return [
    gauge("lanyard.token.count", "Live tokens (not expired) by namespace; the configured root token is not stored and not counted.", byNs(tokens)),
    gauge("lanyard.expire.num_leases", "Unexpired leases by namespace.", byNs(leases)),
    ...parts.flat(),
  ];
}

/** The gauges, from this isolate's last computation while it is younger than METRICS_CACHE_MS. */
export async function currentMetrics(db: Db, env: Env, now = Date.now()): Promise<Computed> {
  const hit = computed.get("");
  if (hit && now - hit.at < METRICS_CACHE_MS && now >= hit.at) return hit;
  const fresh: Computed = { at: now, families: await collect(db, env, now) };
  computed.set("", fresh);
  return fresh;
}

const fields = defineFields({
  format: { type: "string", description: 'The answer\'s format: "" (JSON, the default) or "prometheus".', default: "" },
});

const wantsOpenMetrics = (accept: string | null): boolean => (accept ?? "").toLowerCase().startsWith("application/openmetrics-text");

export const metricsRoutes: RouteDef[] = [
  route({
    pattern: "metrics",
    fields,
    publicWhen: (env, op) => op === "read" && env.METRICS_UNAUTHENTICATED === "true",
    handlers: {
      async read(req) {
        if (req.ns.id !== ROOT_NAMESPACE.id) throw badRequest("metrics cover every namespace: read sys/metrics from the root namespace (no namespace header)");
        const format = req.fields.format.trim().toLowerCase();
        if (format !== "" && format !== "prometheus") throw badRequest(`format: unsupported metrics format "${req.fields.format.slice(0, 32)}" (use "prometheus", or none for JSON)`);
        const { at, families: cached } = await currentMetrics(req.db, req.env);
        // The isolate's own audit counts are read now, never from the cache.
        const families = [...cached, ...auditIsolateCounts()];
        const headers = { "x-request-id": req.requestId, "cache-control": "no-store" };
        if (format === "prometheus" || wantsOpenMetrics(req.headers.get("accept"))) {
          return new Response(metricsPrometheus(families), { headers: { ...headers, "content-type": PROMETHEUS_CONTENT_TYPE } });
        }
        return new Response(JSON.stringify(metricsJson(families, at)), { headers: { ...headers, "content-type": "application/json" } });
      },
    },
  }),
];
