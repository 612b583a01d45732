/**
 * The gate's state, pure: the permits in flight, the sliding-window logs and the pause of one
 * limit scope, and the decisions over them (may a request start now; if not, when). ../gate.ts
 * keeps one GateState in each SyncGate Durable Object and runs one call at a time, so these
 * checks cannot race; unit tests use it over MemoryGateStore.
 */
import type { Throttle } from "./throttle";
import type { WindowCharge } from "./types";

/** A permit's lifetime: the request timeout (../connectors/http.ts) plus slack. */
export const PERMIT_TTL_MS = 15_000;
/** Longest pause after repeated throttling answers that state no wait. */
export const MAX_THROTTLE_MS = 5 * 60_000;
/** Windows up to this long are logged in memory only; longer ones in the gate's storage. */
export const MEMORY_WINDOW_MS = 10_000;

export interface AcquireArgs {
  concurrency: number;
  charges: WindowCharge[];
  maxWaitMs: number;
}

export type AcquireResult = { ok: true; permit: string } | { ok: false; waitMs: number; reason: "paused" | "budget" };

export interface ReleaseArgs {
  permit: string;
  throttle: Throttle | null;
  /** The type's pause for a throttling answer that states no wait. */
  throttleMs: number;
}

/** Where the gate keeps its window logs and its pause (SQLite in the Durable Object, memory in unit tests). */
export interface GateStore {
  /** Sum of the costs recorded under `key` after `since`. */
  used(key: string, since: number): number;
  /** The entries under `key` after `since`, oldest first. */
  entries(key: string, since: number): { at: number; cost: number }[];
  add(key: string, at: number, cost: number, expires: number): void;
  /** Forgets entries that expired before `now`. */
  prune(now: number): void;
  getNumber(name: "paused_until" | "throttles"): number;
  setNumber(name: "paused_until" | "throttles", v: number): void;
}

export type Check = { ok: true } | { ok: false; at: number; reason: "paused" | "busy" | "budget" | "resource" };

export class GateState {
  private readonly inFlight = new Map<string, number>();
  private readonly memory = new MemoryGateStore();
  private grants = 0;

  /** `store` keeps the pause and the logs of windows longer than MEMORY_WINDOW_MS. */
  constructor(private readonly store: GateStore) {}

  private logOf(windowMs: number): GateStore {
    return windowMs > MEMORY_WINDOW_MS ? this.store : this.memory;
  }

  private expire(now: number): void {
    for (const [p, until] of this.inFlight) if (until <= now) this.inFlight.delete(p);
  }

  pausedUntil(): number {
    return this.store.getNumber("paused_until");
  }

  /** Earliest expiry of a permit in flight (when a "busy" check may change without a release). */
  nextExpiry(): number | undefined {
    let min: number | undefined;
    for (const t of this.inFlight.values()) min = min === undefined ? t : Math.min(min, t);
    return min;
  }

  /** Whether a request could start now; if not, when it could at the earliest and why. */
  check(args: AcquireArgs, now: number): Check {
    this.expire(now);
    const paused = this.pausedUntil();
    if (now < paused) return { ok: false, at: paused, reason: "paused" };
    if (this.inFlight.size >= args.concurrency) return { ok: false, at: this.nextExpiry() ?? now, reason: "busy" };
    let at = 0;
    let resourceOnly = true;
    for (const c of args.charges) {
      const cost = Math.min(c.cost, c.budget);
      const since = now - c.windowMs;
      const log = this.logOf(c.windowMs);
      const used = log.used(c.key, since);
      if (used + cost <= c.budget) continue;
      let excess = used + cost - c.budget;
      let free = now + c.windowMs;
      for (const e of log.entries(c.key, since)) {
        excess -= e.cost;
        if (excess <= 0) {
          free = e.at + c.windowMs;
          break;
        }
      }
      at = Math.max(at, free);
      if (!c.resource) resourceOnly = false;
    }
    return at > 0 ? { ok: false, at, reason: resourceOnly ? "resource" : "budget" } : { ok: true };
  }

  /** Starts a request (after a successful check): a permit, and its costs in the logs. */
  grant(args: AcquireArgs, now: number): string {
    const permit = crypto.randomUUID();
    this.inFlight.set(permit, now + PERMIT_TTL_MS);
    for (const c of args.charges) this.logOf(c.windowMs).add(c.key, now, Math.min(c.cost, c.budget), now + c.windowMs);
    if (++this.grants % 100 === 0) {
      this.store.prune(now);
      this.memory.prune(now);
    }
    return permit;
  }

  /** Ends a request; a throttling answer pauses the scope. Returns the pause's end (0 = none). */
  release(args: ReleaseArgs, now: number): number {
    this.inFlight.delete(args.permit);
    const t = args.throttle;
    if (!t) {
      if (this.store.getNumber("throttles") !== 0) this.store.setNumber("throttles", 0);
      return 0;
    }
    const inARow = this.store.getNumber("throttles") + 1;
    this.store.setNumber("throttles", inARow);
    const wait = t.stated ? t.waitMs : Math.min(args.throttleMs * 2 ** Math.min(inARow - 1, 20), MAX_THROTTLE_MS);
    const until = Math.max(this.pausedUntil(), now + wait);
    this.store.setNumber("paused_until", until);
    return until;
  }
}

/** A GateStore in memory (unit tests). */
export class MemoryGateStore implements GateStore {
  private readonly logs = new Map<string, { at: number; cost: number; expires: number }[]>();
  private readonly numbers = new Map<string, number>();

  used(key: string, since: number): number {
    return this.entries(key, since).reduce((s, e) => s + e.cost, 0);
  }
  entries(key: string, since: number): { at: number; cost: number }[] {
    return (this.logs.get(key) ?? []).filter((e) => e.at > since);
  }
  add(key: string, at: number, cost: number, expires: number): void {
    const log = this.logs.get(key) ?? [];
    log.push({ at, cost, expires });
    this.logs.set(key, log);
  }
  prune(now: number): void {
    for (const [k, log] of this.logs) {
      const kept = log.filter((e) => e.expires > now);
      if (kept.length === 0) this.logs.delete(k);
      else this.logs.set(k, kept);
    }
  }
  getNumber(name: "paused_until" | "throttles"): number {
    return this.numbers.get(name) ?? 0;
  }
  setNumber(name: "paused_until" | "throttles", v: number): void {
    this.numbers.set(name, v);
  }
}
