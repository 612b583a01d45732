/**
 * `repohost` rate limits. Published (GitHub REST API rate limits): 100 concurrent requests;
 * 900 points/min (GET 1, others 5); 5,000 requests/h per token. Lanyard's caps per token or app
 * installation: 10 in flight; 600 points/min; 4,000 requests/h. A secondary limit answers 403
 * or 429 with `retry-after` or `x-ratelimit-remaining: 0`; a 403 without them is a permission
 * error, not a throttle.
 */
import { str } from "../../destinations/types";
import { parseRetryAfter } from "../../limits/throttle";
import type { GatedRequest, ProviderLimits } from "../../limits/types";

const isRead = (r: GatedRequest) => r.method === "GET" || r.method === "HEAD";

export const limits: ProviderLimits = {
  concurrency: 10,
  windows: [
    { id: "points", budget: 600, windowMs: 60_000, cost: (r) => (isRead(r) ? 1 : 5) },
    { id: "hour", budget: 4000, windowMs: 3_600_000, cost: () => 1 },
  ],
  throttleMs: 60_000,
  scope: (c) => (str(c, "access_token") ? ["token", str(c, "access_token")] : ["app", str(c, "app_name"), str(c, "installation_id")]),
  async throttleSignal(res) {
    if (res.status !== 403) return {};
    const h = res.headers;
    return { throttled: parseRetryAfter(h.get("retry-after")) !== undefined || h.get("x-ratelimit-remaining") === "0" };
  },
};
