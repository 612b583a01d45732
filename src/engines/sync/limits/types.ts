/**
 * What a provider states about its rate limits (each provider's limits.ts fills these in), in a
 * module of types only so that the connector context can carry them without importing the gate.
 */
import type { Connection } from "../destinations/types";

/** One request as the gate sees it. */
export interface GatedRequest {
  method: string;
  url: URL;
  headers: Headers;
}

/** A budget of cost units over a sliding window. */
export interface WindowLimit {
  id: string;
  budget: number;
  windowMs: number;
  /** The request's cost in this window; 0 = not counted. */
  cost(r: GatedRequest): number;
  /** Counted per resource (e.g. per secret): the request's resource; null = not counted. */
  resource?(r: GatedRequest): string | null;
}

/** Lanyard's caps for one limit scope (tests may replace them, ./index.ts overrideLimits). */
export interface LimitBudget {
  /** Requests in flight at once per scope. */
  concurrency: number;
  windows: WindowLimit[];
  /** Pause after a throttling answer that states no wait (doubled for each one in a row). */
  throttleMs: number;
}

/**
 * What an answer says beyond the common signals (a 429, Retry-After, x-ratelimit-*): `throttled`
 * replaces "status is 429" when set; `delayMs` is a wait stated in the body.
 */
export interface ThrottleSignal {
  throttled?: boolean;
  delayMs?: number;
}

export interface ProviderLimits extends LimitBudget {
  /**
   * What the provider counts its limits against (an account and region, a vault, a project, a
   * token): destinations with the same scope share one gate. May contain credentials: the gate's
   * name carries only a digest of it.
   */
  scope(conn: Connection): string[];
  /** The provider's own throttling answers; absent when a 429 is its only one. */
  throttleSignal?(res: Response): Promise<ThrottleSignal>;
}

/** What one request is charged in each window it counts in (sent to the gate). */
export interface WindowCharge {
  key: string;
  budget: number;
  windowMs: number;
  cost: number;
  /** A per-resource window: a request blocked only here does not hold up the ones behind it. */
  resource: boolean;
}
