/**
 * `cloudthree-sm` rate limits. Published (Google Secret Manager quotas), per project: 600
 * writes/min, 600 reads/min, 90,000 accesses/min; per secret 2 AddSecretVersion/s and 120/min.
 * Lanyard's caps per project: 10 in flight; 300 writes/min, 300 reads/min, 1,000 accesses/min;
 * per secret 1 AddSecretVersion/s and 60/min. A throttled call answers 429 RESOURCE_EXHAUSTED,
 * with a RetryInfo `retryDelay` in the body when it states a wait.
 */
import { str } from "../../destinations/types";
import { bodyText } from "../../limits/throttle";
import type { GatedRequest, ProviderLimits } from "../../limits/types";

const isRead = (r: GatedRequest) => r.method === "GET" || r.method === "HEAD";
const gcpAccess = (r: GatedRequest) => r.method === "GET" && r.url.pathname.endsWith(":access");
const gcpAddVersion = (r: GatedRequest) => (r.method === "POST" && r.url.pathname.endsWith(":addVersion") ? r.url.pathname.replace(/:addVersion$/, "") : null);

/** Google's RetryInfo delay ("30s", "1.5s") in a RESOURCE_EXHAUSTED answer, in ms. */
function googleRetryDelay(text: string): number | undefined {
  const m = /"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"/.exec(text);
  return m ? Math.ceil(Number(m[1]) * 1000) : undefined;
}

/** The project of a destination without project_id: the service-account key's own. */
function projectOfCredentials(json: string): string {
  try {
    const v: unknown = JSON.parse(json);
    const p = typeof v === "object" && v !== null ? (v as { project_id?: unknown }).project_id : undefined;
    return typeof p === "string" ? p : json;
  } catch {
    return json;
  }
}

export const limits: ProviderLimits = {
  concurrency: 10,
  windows: [
    { id: "writes", budget: 300, windowMs: 60_000, cost: (r) => (isRead(r) ? 0 : 1) },
    { id: "reads", budget: 300, windowMs: 60_000, cost: (r) => (isRead(r) && !gcpAccess(r) ? 1 : 0) },
    { id: "access", budget: 1000, windowMs: 60_000, cost: (r) => (gcpAccess(r) ? 1 : 0) },
    { id: "version-s", budget: 1, windowMs: 1000, cost: () => 1, resource: gcpAddVersion },
    { id: "version-min", budget: 60, windowMs: 60_000, cost: () => 1, resource: gcpAddVersion },
  ],
  throttleMs: 2000,
  scope: (c) => [str(c, "project_id") || projectOfCredentials(str(c, "credentials"))],
  async throttleSignal(res) {
    return res.status === 429 ? { delayMs: googleRetryDelay(await bodyText(res)) } : {};
  },
};
