/**
 * Request rates through Workers Analytics Engine
 * (https://developers.cloudflare.com/analytics/analytics-engine/): with the optional
 * METRICS_DATASET binding, the dispatcher writes one data point per /v1 request once its answer
 * is known (src/app/dispatch.ts). Counters kept in an isolate would be wrong on Workers (many
 * isolates, each living minutes, none seeing the others' requests); Analytics Engine aggregates
 * every isolate's points and is queried with SQL (docs/operations.md "Metrics" has the queries).
 *
 * The point's layout is a contract with those queries, so it lives here, in one place:
 *   index1  route family (the sampling key)
 *   blob1   route family: the backend and the route's pattern, never the path itself
 *           ("pki/issue/:role", "sys/mounts/*path", "kv/data/*path"), so no secret name, token or
 *           serial reaches the dataset and the cardinality stays that of the route tables
 *   blob2   status class ("2xx", "4xx", "5xx")
 *   blob3   status ("200", "403")
 *   blob4   mount type ("pki", "kv", "system", "token", an auth method's type; "" when none)
 *   blob5   HTTP method
 *   double1 duration in milliseconds (wall time from the pipeline's start to its answer)
 *   double2 status
 *
 * `writeDataPoint` does not block and returns nothing to await; a throw (a malformed point, a
 * binding gone) is swallowed with a log line: metrics must never fail a request.
 */

/** What the dispatcher knows of a request once it is answered. */
export interface RequestObservation {
  family: string;
  mountType: string;
  method: string;
  status: number;
  durationMs: number;
}

/** Analytics Engine caps an index at 96 bytes. */
const MAX_INDEX_BYTES = 96;

/** The family of a request answered by layer 0 (src/core/public-answers.ts: public PKI reads only). */
export const LAYER0_FAMILY = "pki/public-answer";

/** A route's family: its backend and pattern; "?" where no route (or backend) matched. */
export function routeFamily(mountType: string | undefined, pattern: string | undefined): string {
  const backend = mountType === undefined ? "?" : mountType === "system" ? "sys" : mountType === "token" ? "auth/token" : mountType;
  return `${backend}/${pattern ?? "?"}`;
}

export function statusClass(status: number): string {
  return `${Math.floor(status / 100)}xx`;
}

/** Cuts a string to at most `max` UTF-8 bytes without splitting a character. */
function cutBytes(s: string, max: number): string {
  const bytes = new TextEncoder().encode(s);
  if (bytes.length <= max) return s;
  return new TextDecoder().decode(bytes.slice(0, max)).replace(/\uFFFD+$/, "");
}

/** The data point of one request, in the layout above. */
export function requestDataPoint(o: RequestObservation): AnalyticsEngineDataPoint {
  return {
    indexes: [cutBytes(o.family, MAX_INDEX_BYTES)],
    blobs: [o.family, statusClass(o.status), String(o.status), o.mountType, o.method],
    doubles: [o.durationMs, o.status],
  };
}

/** Writes the request's point; never throws. */
export function recordRequest(dataset: AnalyticsEngineDataset, o: RequestObservation): void {
  try {
    dataset.writeDataPoint(requestDataPoint(o));
  } catch (e) {
    console.warn(`metrics: a request data point was not written: ${e instanceof Error ? e.message : String(e)}`);
  }
}
