/**
 * Coalesced D1 batches for one invocation (the sync queue's consumer): the `batch()`
 * calls its concurrent tasks make in the same turn of the event loop go to D1 as one batch, so
 * 25 messages each doing "lease, load, claim, finish" cost a handful of round trips, not 100.
 *
 * INVARIANTS
 * - One handle per invocation (one queue batch, one request): pending batches and their
 *   promises are never shared across invocations (workerd cancels a request that waits only on
 *   another request's promise).
 * - Each caller's statements run contiguously and in its order, inside one D1 batch (one
 *   transaction) with the other callers' statements. D1 runs a batch's statements in sequence,
 *   so a caller sees exactly what it would see had its batch run alone just after the earlier
 *   callers' batches.
 * - A combined batch that fails is rolled back whole (D1 batches are atomic); then each caller's
 *   batch runs again alone, so one caller's failure (a constraint, a bad statement) fails only
 *   that caller, with its own error.
 * - A caller waits at most until the next turn of the event loop (setTimeout 0) before its batch
 *   is sent. Combined batches hold at most MAX_STATEMENTS statements; callers are never split.
 * - Only `batch` is coalesced; everything else (prepare, single statements, exec) goes straight
 *   to D1.
 */

/** Statements per combined batch: well under D1's 1,000 queries per invocation. */
const MAX_STATEMENTS = 100;

interface Pending {
  stmts: D1PreparedStatement[];
  resolve(results: D1Result[]): void;
  reject(e: unknown): void;
}

/** `d1` with concurrent `batch()` calls of this invocation coalesced (see the invariants above). */
export function coalescingD1(d1: D1Database): D1Database {
  let queue: Pending[] = [];
  let scheduled = false;

  const runAlone = (p: Pending): void => {
    d1.batch(p.stmts).then(p.resolve, p.reject);
  };

  const send = async (group: Pending[]): Promise<void> => {
    const first = group[0];
    if (group.length === 1 && first) return runAlone(first);
    let results: D1Result[];
    try {
      results = await d1.batch(group.flatMap((p) => p.stmts));
    } catch {
      // The combined batch changed nothing: each caller runs alone and meets its own outcome.
      for (const p of group) runAlone(p);
      return;
    }
    let at = 0;
    for (const p of group) {
      p.resolve(results.slice(at, at + p.stmts.length));
      at += p.stmts.length;
    }
  };

  const flush = (): void => {
    scheduled = false;
    const all = queue;
    queue = [];
    let group: Pending[] = [];
    let size = 0;
    for (const p of all) {
      if (group.length > 0 && size + p.stmts.length > MAX_STATEMENTS) {
        void send(group);
        group = [];
        size = 0;
      }
      group.push(p);
      size += p.stmts.length;
    }
    if (group.length > 0) void send(group);
  };

  const batch = <T = unknown>(stmts: D1PreparedStatement[]): Promise<D1Result<T>[]> =>
    new Promise<D1Result[]>((resolve, reject) => {
      queue.push({ stmts, resolve, reject });
      if (!scheduled) {
        scheduled = true;
        setTimeout(flush, 0);
      }
    }) as Promise<D1Result<T>[]>;

  return new Proxy(d1, {
    get(target, prop) {
      if (prop === "batch") return batch;
      const v: unknown = Reflect.get(target, prop, target);
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}
