/**
 * Gauges of sys/metrics (docs/operations.md "Metrics"): the shape every contributor answers (an
 * engine's `metrics`, src/core/engine.ts; the audit trail; the system tables), and the two
 * renderings of Vault's sys/metrics (https://developer.hashicorp.com/vault/api-docs/system/metrics):
 * go-metrics' JSON summary and the Prometheus text exposition format 0.0.4
 * (https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format).
 *
 * Only gauges: a value computed from the state in D1 (or a queue's backlog) at the time of the
 * read is the same whichever isolate answers. Counters kept per isolate would not be (an isolate
 * is one of many and lives minutes), which is why request rates go to Workers Analytics Engine
 * instead (src/app/request-metrics.ts).
 */
import type { Db } from "./db/client";

/** One value of a gauge, with its labels. */
export interface GaugeSample {
  labels: Readonly<Record<string, string>>;
  value: number;
}

/** A gauge and all its samples; `name` is dotted as Vault's ("lanyard.pki.certificates"). */
export interface GaugeFamily {
  name: string;
  help: string;
  samples: GaugeSample[];
}

/** Where a mount lives, for labels: its namespace path ("" is the root) and its path ("pki/"). */
export interface MountPlace {
  namespace: string;
  mount: string;
}

/** What a contributor reads its gauges with. */
export interface MetricsContext {
  db: Db;
  env: Env;
  /** Unix milliseconds of the read, one value for every gauge of it. */
  now: number;
  /** The labels of a mount by id; a mount removed meanwhile answers its id. */
  mountPlace(mountId: string): MountPlace;
  /** The path of a namespace by id ("" for the root); one removed meanwhile answers its id. */
  namespacePath(namespaceId: string): string;
}

/** The label value of a namespace path: "root" for the root namespace, as Vault labels it. */
export const namespaceLabel = (path: string): string => (path === "" ? "root" : path);

/** A family from rows of `{labels, value}`. */
export function gauge(name: string, help: string, samples: GaugeSample[]): GaugeFamily {
  return { name, help, samples };
}

/**
 * The backlog of a queue as its binding reports it (Queue.metrics(): messages, bytes, the oldest
 * message's time). Empty when the runtime offers no metrics() or it fails: a gauge that cannot be
 * read is left out, never reported as 0.
 */
export async function queueBacklog(queue: Queue | undefined, queueName: string, prefix: string, now: number): Promise<GaugeFamily[]> {
  if (!queue || typeof queue.metrics !== "function") return [];
  let m: QueueMetrics;
  try {
    m = await queue.metrics();
  } catch (e) {
    console.warn(`metrics: the backlog of queue ${queueName} could not be read: ${e instanceof Error ? e.message : String(e)}`);
    return [];
  }
  const labels = { queue: queueName };
  const oldest = m.oldestMessageTimestamp === undefined ? 0 : new Date(m.oldestMessageTimestamp).getTime();
  const age = m.backlogCount > 0 && oldest > 0 ? Math.max(0, (now - oldest) / 1000) : 0;
  return [
    gauge(`${prefix}.backlog.messages`, `Messages waiting in queue ${queueName}.`, [{ labels, value: m.backlogCount }]),
    gauge(`${prefix}.backlog.bytes`, `Bytes waiting in queue ${queueName}.`, [{ labels, value: m.backlogBytes }]),
    gauge(`${prefix}.backlog.oldest_age_seconds`, `Seconds since the oldest message waiting in queue ${queueName} was sent (0 when none waits).`, [{ labels, value: age }]),
  ];
}

/** go-metrics' time format, which Vault's JSON answer carries: "2006-01-02 15:04:05 +0000 UTC". */
export function goTimestamp(ms: number): string {
  const iso = new Date(Math.round(ms / 1000) * 1000).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)} +0000 UTC`;
}

/**
 * Vault's JSON form (go-metrics' in-memory sink summary): Timestamp, Gauges of {Name, Value,
 * Labels}, and the Points, Counters and Samples that Lanyard does not keep (empty, see the top).
 */
export function metricsJson(families: readonly GaugeFamily[], at: number): Record<string, unknown> {
  const gauges = families.flatMap((f) => f.samples.map((s) => ({ Name: f.name, Value: s.value, Labels: { ...s.labels } })));
  return { Timestamp: goTimestamp(at), Gauges: gauges, Points: [], Counters: [], Samples: [] };
}

/** The Content-Type of the Prometheus text format. */
export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** A metric name in Prometheus' alphabet: dots (and anything else outside it) become "_". */
export const prometheusName = (name: string): string => name.replace(/[^a-zA-Z0-9_:]/g, "_").replace(/^[^a-zA-Z_:]/, "_");

const labelName = (name: string): string => name.replace(/[^a-zA-Z0-9_]/g, "_").replace(/^[^a-zA-Z_]/, "_");

/** A label value as the format requires: backslash, double quote and line feed escaped. */
export const escapeLabelValue = (v: string): string => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");

/** HELP text escapes only backslash and line feed. */
const escapeHelp = (v: string): string => v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");

/** A sample value: Go's float formatting for the special values, else the shortest decimal. */
function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return String(v);
}

/** The text exposition format 0.0.4: per family `# HELP`, `# TYPE … gauge`, then one line per sample. */
export function metricsPrometheus(families: readonly GaugeFamily[]): string {
  const lines: string[] = [];
  for (const f of families) {
    const name = prometheusName(f.name);
    lines.push(`# HELP ${name} ${escapeHelp(f.help)}`, `# TYPE ${name} gauge`);
    for (const s of f.samples) {
      const labels = Object.entries(s.labels).map(([k, v]) => `${labelName(k)}="${escapeLabelValue(v)}"`);
      lines.push(`${name}${labels.length > 0 ? `{${labels.join(",")}}` : ""} ${formatValue(s.value)}`);
    }
  }
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`;
}
