/**
 * The SyncGate Durable Object (docs/secrets-sync.md "4. Provider limits are respected"): one per provider limit scope (./limits.ts
 * gateName), the single place that decides when a request to that scope may start, across every
 * isolate. The rules are ./limits.ts GateState; this class holds the waiters and the storage.
 *
 * INVARIANTS
 * - First come, first served: waiters are granted in arrival order. A waiter held up only by a
 *   per-resource window (one GCP secret's versions) lets the ones behind it pass; anything else
 *   (pause, concurrency, a scope-wide budget) holds the whole line, so a large request is not
 *   starved by small ones.
 * - A waiter is answered within its maxWaitMs: granted, or refused with the remaining wait. It
 *   is refused at once when the pause (or its window) ends after its deadline.
 * - The pause ("paused_until") and the window logs are in the object's SQLite storage, written
 *   in the same synchronous block as the decision, so they survive eviction and a restart cannot
 *   reopen a closed window. Permits in flight are memory only (they expire after PERMIT_TTL_MS).
 */
import { DurableObject } from "cloudflare:workers";
import { GateState, type AcquireArgs, type AcquireResult, type GateStore, type ReleaseArgs } from "./limits/gate-state";

interface Waiter {
  args: AcquireArgs;
  deadline: number;
  resolve(r: AcquireResult): void;
}

/** GateStore over the object's SQLite storage. */
class SqlGateStore implements GateStore {
  constructor(private readonly sql: SqlStorage) {
    sql.exec("CREATE TABLE IF NOT EXISTS log (key TEXT NOT NULL, at INTEGER NOT NULL, cost INTEGER NOT NULL, expires INTEGER NOT NULL)");
    sql.exec("CREATE INDEX IF NOT EXISTS log_key_at ON log (key, at)");
    sql.exec("CREATE TABLE IF NOT EXISTS numbers (name TEXT PRIMARY KEY, value INTEGER NOT NULL)");
  }
  used(key: string, since: number): number {
    return this.sql.exec<{ n: number }>("SELECT coalesce(sum(cost), 0) AS n FROM log WHERE key = ? AND at > ?", key, since).one().n;
  }
  entries(key: string, since: number): { at: number; cost: number }[] {
    return this.sql.exec<{ at: number; cost: number }>("SELECT at, cost FROM log WHERE key = ? AND at > ? ORDER BY at", key, since).toArray();
  }
  add(key: string, at: number, cost: number, expires: number): void {
    this.sql.exec("INSERT INTO log (key, at, cost, expires) VALUES (?, ?, ?, ?)", key, at, cost, expires);
  }
  prune(now: number): void {
    this.sql.exec("DELETE FROM log WHERE expires <= ?", now);
  }
  getNumber(name: "paused_until" | "throttles"): number {
    return this.sql.exec<{ value: number }>("SELECT value FROM numbers WHERE name = ?", name).toArray()[0]?.value ?? 0;
  }
  setNumber(name: "paused_until" | "throttles", v: number): void {
    this.sql.exec("INSERT INTO numbers (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value", name, v);
  }
}

export class SyncGate extends DurableObject<Env> {
  private readonly state: GateState;
  private readonly waiters: Waiter[] = [];
  private timer: ReturnType<typeof setTimeout> | null = null;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.state = new GateState(new SqlGateStore(ctx.storage.sql));
  }

  /** Waits for a permit to send one request (at most args.maxWaitMs). */
  acquire(args: AcquireArgs): Promise<AcquireResult> {
    return new Promise((resolve) => {
      this.waiters.push({ args, deadline: Date.now() + args.maxWaitMs, resolve });
      this.pump();
    });
  }

  /** Ends a request, pausing the scope if the provider throttled it, and lets the next ones in. */
  release(args: ReleaseArgs): void {
    this.state.release(args, Date.now());
    this.pump();
  }

  /** Grants what can start now, refuses what cannot start in time, and sets the next wake-up. */
  private pump(): void {
    const now = Date.now();
    let wake = Infinity;
    let blocked = false;
    for (let i = 0; i < this.waiters.length; ) {
      const w = this.waiters[i];
      if (!w) break;
      const c = this.state.check(w.args, now);
      if (c.ok && !blocked) {
        this.waiters.splice(i, 1);
        w.resolve({ ok: true, permit: this.state.grant(w.args, now) });
        continue;
      }
      // Behind a waiter held by the scope (not by its own resource), everyone waits in line.
      const at = c.ok ? now : c.at;
      const knownLate = !c.ok && c.reason !== "busy" && at > w.deadline;
      if (knownLate || w.deadline <= now) {
        this.waiters.splice(i, 1);
        w.resolve({ ok: false, waitMs: Math.max(at - now, 1000), reason: !c.ok && c.reason === "paused" ? "paused" : "budget" });
        continue;
      }
      if (!c.ok && c.reason !== "resource") blocked = true;
      wake = Math.min(wake, w.deadline, c.ok ? Infinity : c.at);
      i++;
    }
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.waiters.length > 0 && wake < Infinity) this.timer = setTimeout(() => this.pump(), Math.max(1, wake - now));
  }
}
