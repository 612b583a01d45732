/**
 * `webhost-project` rate limits. Published (Vercel REST API limits): 120 requests/min, the API's
 * default. Lanyard's caps per token and team: 5 in flight, 60 requests/min. A throttled call
 * answers 429 with Retry-After or x-ratelimit-reset.
 */
import { str } from "../../destinations/types";
import type { ProviderLimits } from "../../limits/types";

export const limits: ProviderLimits = {
  concurrency: 5,
  windows: [{ id: "minute", budget: 60, windowMs: 60_000, cost: () => 1 }],
  throttleMs: 60_000,
  scope: (c) => [str(c, "access_token"), str(c, "team_id")],
};
