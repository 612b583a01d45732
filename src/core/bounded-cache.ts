/**
 * The one shape of a per-isolate cache. Every mutable cache in src/ is a `BoundedCache`, or a
 * `ReadCache` (./read-cache.ts: a BoundedCache with the staleness bound and invalidation by
 * area); docs/architecture.md "Every cache" lists each by its name, bound and invalidation, and
 * test/unit/caches-doc.test.ts fails when the list and the code disagree.
 *
 * Invariants:
 * - **Values, never promises.** `set` refuses a promise type at compile time. workerd ties I/O
 *   and promise continuations to the request that started them, so a request must not await a
 *   promise another request made; a cache miss computes its own value, and two requests missing
 *   together both compute (the values are equal). Where a cache wants one fetch for concurrent
 *   misses, that is a separate map of in-flight promises emptied when each settles
 *   (src/auth/methods/jwt/keys.ts), never the cache.
 * - **A size bound.** At most `max` entries, and, when a weight is given, at most `weight.max` of
 *   their summed weight. Storing past a bound evicts the oldest-stored entries first (a Map keeps
 *   insertion order, and `set` moves its key to the end), so a flood of distinct keys costs the
 *   coldest entries a recomputation, never memory, and never empties the cache at once.
 * - **Cheap.** `get` is one Map lookup (no reordering on a hit); `set` is a delete, a set and,
 *   when full, one eviction. Nothing here awaits.
 */

/** A type that is not a promise: what a cache may hold. */
export type NotPromise<V> = V extends PromiseLike<unknown> ? never : V;

/** A second bound on the summed weight of the entries (e.g. body bytes). */
export interface WeightBound<V> {
  max: number;
  of: (value: V) => number;
}

export class BoundedCache<V> {
  private readonly entries = new Map<string, V>();
  private weight = 0;

  /** `name` is the cache's row in docs/architecture.md "Every cache". */
  constructor(
    readonly name: string,
    readonly max: number,
    private readonly weightBound?: WeightBound<V>,
  ) {}

  get(key: string): V | undefined {
    return this.entries.get(key);
  }

  get size(): number {
    return this.entries.size;
  }

  /** Stores `value` as the newest entry, evicting the oldest ones while a bound would be exceeded. */
  set(key: string, value: NotPromise<V>): void {
    this.delete(key);
    const w = this.weightBound ? this.weightBound.of(value) : 0;
    while (this.entries.size > 0 && (this.entries.size >= this.max || (this.weightBound !== undefined && this.weight + w > this.weightBound.max))) {
      const oldest = this.entries.keys().next();
      if (oldest.done) break;
      this.delete(oldest.value);
    }
    this.entries.set(key, value);
    this.weight += w;
  }

  delete(key: string): void {
    if (this.weightBound) {
      const old = this.entries.get(key);
      if (old !== undefined) this.weight -= this.weightBound.of(old);
    }
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
    this.weight = 0;
  }
}
