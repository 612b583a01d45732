/**
 * `cloudtwo-kv` rate limits. Published (Azure Key Vault service limits): 4,000 transactions per
 * 10 s per vault. Lanyard's caps per vault: 10 in flight, 1,000 per 10 s. A throttled call
 * answers 429 with Retry-After.
 */
import { trimEndChar } from "../../../../core/text";
import { str } from "../../destinations/types";
import type { ProviderLimits } from "../../limits/types";

export const limits: ProviderLimits = {
  concurrency: 10,
  windows: [{ id: "all", budget: 1000, windowMs: 10_000, cost: () => 1 }],
  throttleMs: 10_000,
  scope: (c) => [trimEndChar(str(c, "key_vault_uri").toLowerCase(), "/")],
};
