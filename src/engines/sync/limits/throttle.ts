/**
 * Reading the provider's answers: whether one asks to slow down, and for how long (./index.ts
 * "THROTTLING ANSWERS"). The signals every provider shares are read here (a 429, Retry-After,
 * x-ratelimit-remaining / x-ratelimit-reset); a provider's own (an AWS 400 ThrottlingException,
 * the repository host's 403 secondary limit, Google's RetryInfo) come from its limits'
 * `throttleSignal`.
 */
import type { ProviderLimits } from "./types";

/** Seconds from a Retry-After header (delta-seconds or an HTTP date); undefined when absent. */
export function parseRetryAfter(h: string | null, now = Date.now()): number | undefined {
  if (h === null || h.trim() === "") return undefined;
  const n = Number(h.trim());
  if (Number.isFinite(n) && n >= 0) return Math.ceil(n);
  const at = Date.parse(h);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}

/** A pause the provider asked for: `waitMs`, and whether it said how long (`stated`). */
export interface Throttle {
  waitMs: number;
  stated: boolean;
}

/** Ms until an `x-ratelimit-reset` (epoch seconds), when present. */
function resetWait(h: Headers, now: number): number | undefined {
  const reset = Number(h.get("x-ratelimit-reset") ?? "");
  return Number.isFinite(reset) && reset > 0 ? Math.max(0, reset * 1000 - now) : undefined;
}

/** A copy of an answer's body, for a provider that puts its throttling signal there. */
export async function bodyText(res: Response): Promise<string> {
  try {
    return await res.clone().text();
  } catch {
    return "";
  }
}

/**
 * Whether an answer is the provider asking to slow down, and for how long; null otherwise.
 * Reads a copy of the body only where the provider puts the signal there (AWS 400s, Google 429s).
 */
export async function throttleOf(limits: Pick<ProviderLimits, "throttleSignal">, res: Response, now = Date.now()): Promise<Throttle | null> {
  const h = res.headers;
  const retryAfter = parseRetryAfter(h.get("retry-after"), now);
  const reset = resetWait(h, now);
  const stated = (ms: number | undefined): Throttle | null => (ms === undefined ? null : { waitMs: ms, stated: true });
  const own = (await limits.throttleSignal?.(res)) ?? {};
  const throttled = own.throttled ?? res.status === 429;
  if (!throttled) {
    // A quota used up by this very answer: the next request would be refused until the reset.
    return h.get("x-ratelimit-remaining") === "0" ? stated(reset) : null;
  }
  return stated(retryAfter !== undefined ? retryAfter * 1000 : undefined) ?? stated(reset) ?? stated(own.delayMs) ?? { waitMs: 0, stated: false };
}
