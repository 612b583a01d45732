/**
 * Provider-side rate limits for the fake providers (docs/secrets-sync.md "4. Provider limits are respected"): a configurable limit
 * (requests per sliding window, optionally per bucket such as "per secret", and requests in
 * flight at once), the window a provider announces when it throttles (Retry-After, or the quiet
 * time a provider without Retry-After expects), and a record a test can assert on: every request
 * that went beyond the limit, every request that arrived inside an announced window, the most
 * requests seen in flight at once. Each fake calls `enter` for its API requests (not for its
 * token endpoint, which real providers serve from another host) and answers with its own
 * throttling error when `enter` says so.
 */

export interface FakeLimitRule {
  /** Requests allowed in any window of `windowMs` (sliding, counted on arrival). */
  perWindow: number;
  windowMs: number;
  /** The bucket a request counts in (e.g. one per secret), or null when the rule ignores it; default one bucket for all. */
  bucket?: (req: Request) => string | null;
}

export interface FakeLimitConfig {
  rules: FakeLimitRule[];
  /** Requests handled at once; one more is throttled. */
  concurrency?: number;
  /** The window announced on throttling, in seconds (sent as Retry-After where the provider sends one). */
  retryAfterSeconds: number;
}

export interface Admission {
  /** Answer with the provider's throttling error instead of handling the request. */
  throttled: boolean;
  /** Seconds announced (the window). */
  retryAfter: number;
  /** Call when the answer is ready (ends the request's time in flight). */
  leave(): void;
}

export class FakeThrottle {
  config: FakeLimitConfig | null = null;
  /** Arrival times per rule and bucket. */
  private readonly logs = new Map<string, number[]>();
  private inFlight = 0;
  private forced = 0;
  maxInFlight = 0;
  /** Requests counted (API requests only). */
  requests = 0;
  /** Requests answered with the throttling error because they went beyond the configured limit. */
  readonly overLimit: string[] = [];
  /**
   * Windows announced, [from, until) in ms. A window starts when the throttling answer leaves
   * the fake (the client cannot know of it before), and lasts the announced seconds.
   */
  readonly windows: { from: number; until: number }[] = [];
  /** Requests that arrived inside a window the fake had announced (after its answer was sent). */
  readonly insideWindow: string[] = [];

  /** Sets the limit (null: none) and forgets what was recorded. */
  configure(config: FakeLimitConfig | null): void {
    this.config = config;
    this.reset();
  }

  reset(): void {
    this.logs.clear();
    this.forced = 0;
    this.maxInFlight = this.inFlight;
    this.requests = 0;
    this.overLimit.length = 0;
    this.windows.length = 0;
    this.insideWindow.length = 0;
  }

  /** The next `n` requests are throttled as if over the limit (a window is announced each time). */
  throttleNext(n = 1): void {
    this.forced += n;
  }

  /** The window in force at `now`, if any. */
  activeWindow(now = Date.now()): { from: number; until: number } | undefined {
    return this.windows.find((w) => w.from <= now && now < w.until);
  }

  enter(req: Request, label: string): Admission {
    const now = Date.now();
    this.requests++;
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    let left = false;
    let announced: { from: number; until: number } | undefined;
    const leave = () => {
      if (!left) this.inFlight--;
      left = true;
      if (announced && announced.from === Infinity) {
        announced.from = Date.now();
        announced.until = announced.from + announced.until;
      }
    };
    const retryAfter = this.config?.retryAfterSeconds ?? 1;
    const inside = this.activeWindow(now);
    if (inside) {
      this.insideWindow.push(label);
      return { throttled: true, retryAfter: Math.max(1, Math.ceil((inside.until - now) / 1000)), leave };
    }
    let over = false;
    const cfg = this.config;
    if (cfg) {
      cfg.rules.forEach((rule, i) => {
        const bucket = rule.bucket ? rule.bucket(req) : "";
        if (bucket === null) return;
        const key = `${i}\u0000${bucket}`;
        const log = (this.logs.get(key) ?? []).filter((t) => t > now - rule.windowMs);
        log.push(now);
        this.logs.set(key, log);
        if (log.length > rule.perWindow) over = true;
      });
      if (cfg.concurrency !== undefined && this.inFlight > cfg.concurrency) over = true;
    }
    if (over) this.overLimit.push(label);
    if (this.forced > 0) {
      this.forced--;
      over = true;
    }
    if (!over) return { throttled: false, retryAfter: 0, leave };
    // Until the answer leaves, `until` holds the window's length.
    announced = { from: Infinity, until: retryAfter * 1000 };
    this.windows.push(announced);
    return { throttled: true, retryAfter, leave };
  }
}
