/**
 * Per-isolate read caches of the hot path: configuration rows read from D1 (namespaces, mounts,
 * tokens, policies, PKI state, audit devices) kept for a bounded time. docs/architecture.md
 * "Caches and concurrency invariants" explains the choice and "Every cache" lists every cache,
 * its key, its bound and its invalidation.
 *
 * Invariants:
 * - **Bounded staleness.** An entry is used for at most `CACHE_TTL_MS` after the D1 read that
 *   produced it started (default 1000 ms; 0 turns every cache off). Past that it is read again.
 *   So a change made by another isolate (or another colo) is seen within CACHE_TTL_MS.
 * - **The isolate that writes sees its write at once.** Every store that writes a cached table
 *   calls `invalidate(area)` after the write and before its request answers; that clears the
 *   area's caches in this isolate (a whole-area clear: writes to these tables are rare and a
 *   finer key is one more thing to get wrong).
 * - **A read that raced a write is not kept.** Each area has a generation, bumped by
 *   `invalidate`; a value read before the bump and stored after it is dropped (`set` is given the
 *   generation seen before the read).
 * - **Values only, never promises, and a size bound**: each cache is a `BoundedCache`
 *   (./bounded-cache.ts) of at most `max` entries, the oldest evicted first. An expired entry is
 *   never served by `get`; it stays (for `last`) until it is replaced, evicted or invalidated.
 * - **One re-read at a time**: past 3/4 of an entry's life one caller re-reads it while the
 *   others keep using it (still inside the bound), so concurrent requests do not all miss at once.
 * - **Re-read in the background where a cache can**: a cache given a `reload` (the hot path's
 *   token, policy, namespace and mount caches) hands that caller the value too and queues the
 *   key; the Worker runs the queued re-reads after its answer (`refreshInBackground`, in the
 *   request's waitUntil), so a request that arrives while its entries are fresh waits for none of
 *   them. The bound is unchanged: the re-read starts inside it, and a re-read that fails or never
 *   runs leaves the entry to expire. The queue holds keys, never promises, and at most
 *   MAX_PENDING of them; past that the caller re-reads itself, as without `reload`.
 */
import { BoundedCache } from "./bounded-cache";
import type { Db } from "./db/client";

/** The areas a write can invalidate; each cache belongs to one. */
export type CacheArea = "tokens" | "policies" | "namespaces" | "mounts" | "pki" | "audit" | "identity";

/** The default and the largest accepted CACHE_TTL_MS (docs/configuration.md). */
export const DEFAULT_CACHE_TTL_MS = 1000;
export const MAX_CACHE_TTL_MS = 60_000;

let ttlMs = DEFAULT_CACHE_TTL_MS;
/** The share of an entry's life after which one caller re-reads it ahead of its expiry. */
const REFRESH_AT = 0.75;
const generations = new Map<CacheArea, number>();
const caches = new Map<CacheArea, Set<ReadCache<unknown>>>();

/** CACHE_TTL_MS as a number, or null when it is set to something unusable (config.ts reports it). */
export function parseCacheTtl(raw: string | undefined): number | null {
  if (raw === undefined || raw.trim() === "") return DEFAULT_CACHE_TTL_MS;
  if (!/^\d+$/.test(raw.trim())) return null;
  const n = Number(raw.trim());
  return n <= MAX_CACHE_TTL_MS ? n : null;
}

/** Applies the Worker's CACHE_TTL_MS to this isolate's caches (cheap; called per request). */
export function configureCaches(raw: string | undefined): void {
  const next = parseCacheTtl(raw) ?? DEFAULT_CACHE_TTL_MS;
  if (next === ttlMs) return;
  ttlMs = next;
  if (next === 0) for (const area of caches.keys()) invalidate(area);
}

export function cacheTtl(): number {
  return ttlMs;
}

/** The area's generation: pass it to `set` after a read started under it. */
export function generationOf(area: CacheArea): number {
  return generations.get(area) ?? 0;
}

const AREAS: readonly CacheArea[] = ["tokens", "policies", "namespaces", "mounts", "pki", "audit"];

/** Forgets everything this isolate cached, in every area (after a storage snapshot was restored). */
export function invalidateAll(): void {
  for (const area of AREAS) invalidate(area);
}

/** Forgets everything this isolate cached for `area` (after a write to its tables). */
export function invalidate(area: CacheArea): void {
  generations.set(area, generationOf(area) + 1);
  for (const c of caches.get(area) ?? []) c.clear();
}

interface Entry<V> {
  value: V;
  at: number;
  refreshing: boolean;
}

/** What sets one cache apart from the rule. */
export interface ReadCacheOptions<V = unknown> {
  /** A bound below CACHE_TTL_MS, for a cache that must follow changes sooner. */
  maxAgeMs?: number;
  /** false: no early re-read, for a value asked for more than once per request (see `get`). */
  refreshAhead?: boolean;
  /**
   * Reads `key`'s value again, for the early re-read in the background; undefined: not to be
   * kept (the entry is dropped and the next caller reads it itself).
   */
  reload?: (db: Db, key: string) => Promise<V | undefined>;
}

/** Re-reads queued by `get`, run by the next `refreshInBackground`. */
interface Pending {
  cache: ReadCache<unknown>;
  key: string;
}
const MAX_PENDING = 256;
const pending: Pending[] = [];

/**
 * Runs the queued early re-reads through `waitUntil` (after the request's answer): one D1 read per
 * key, concurrently. Called by the Worker's fetch once per request (src/app/app.ts).
 *
 * The keys may have been queued by an earlier request of this isolate; they are read with this
 * request's `db`. That is the same database: every cache here holds rows of the one `DB` binding,
 * and a request's `db` differs from another's only in instrumentation (the bench's D1 delay,
 * src/core/db/bench-d1.ts). A cache over another binding would have to queue its handle too.
 */
export function refreshInBackground(db: Db, waitUntil: (p: Promise<unknown>) => void): void {
  if (pending.length === 0) return;
  const due = pending.splice(0);
  waitUntil(Promise.all(due.map((p) => p.cache.reloadNow(db, p.key))));
}

export class ReadCache<V> {
  private readonly entries: BoundedCache<Entry<V>>;
  private readonly maxAgeMs: number;
  private readonly refreshAhead: boolean;
  private readonly reload: ((db: Db, key: string) => Promise<V | undefined>) | undefined;

  /** `name` is the cache's row in docs/architecture.md "Every cache". */
  constructor(
    name: string,
    readonly area: CacheArea,
    max: number,
    options: ReadCacheOptions<V> = {},
  ) {
    this.entries = new BoundedCache<Entry<V>>(name, max);
    this.maxAgeMs = options.maxAgeMs ?? Infinity;
    this.refreshAhead = options.refreshAhead ?? true;
    this.reload = options.reload;
    const set = caches.get(area) ?? new Set();
    set.add(this as ReadCache<unknown>);
    caches.set(area, set);
  }

  /**
   * The value read for `key` less than the bound ago, else undefined. Past REFRESH_AT of its
   * life, the first caller gets undefined (it reads again and `set`s the new value) while the
   * others keep getting the value until it expires: one re-read per key and isolate instead of
   * one per concurrent request at the moment of expiry. Without `refreshAhead`, every caller gets
   * the value until it expires (a caller that would not re-read must not take the re-read).
   */
  get(key: string, now = Date.now()): V | undefined {
    if (ttlMs === 0) return undefined;
    const e = this.entries.get(key);
    if (!e) return undefined;
    const bound = ttlMs < this.maxAgeMs ? ttlMs : this.maxAgeMs;
    const age = now - e.at;
    if (age >= bound) return undefined;
    if (this.refreshAhead && age >= bound * REFRESH_AT && !e.refreshing) {
      e.refreshing = true;
      if (!this.reload || pending.length >= MAX_PENDING) return undefined;
      pending.push({ cache: this as ReadCache<unknown>, key });
    }
    return e.value;
  }

  /** One queued re-read (refreshInBackground); a failure leaves the entry to expire. */
  async reloadNow(db: Db, key: string): Promise<void> {
    if (!this.reload) return;
    const readAt = Date.now();
    const generation = generationOf(this.area);
    try {
      const value = await this.reload(db, key);
      if (value === undefined) {
        if (generation === generationOf(this.area)) this.entries.delete(key);
      } else {
        this.set(key, value, readAt, generation);
      }
    } catch {
      // Nothing kept: the entry expires at its bound and the next caller reads it itself.
    }
  }

  /**
   * The value last kept for `key` however old, until an invalidation or eviction drops it: for a
   * caller that must not wait for a read and accepts an old answer (the audit trail of a request
   * refused before its first read).
   */
  last(key: string): V | undefined {
    return this.entries.get(key)?.value;
  }

  /**
   * Keeps `value`, read at `readAt` (taken before the read) under `generation` (generationOf,
   * also taken before the read); a value an invalidation overtook is not kept.
   */
  set(key: string, value: V, readAt: number, generation: number): void {
    if (ttlMs === 0 || generation !== generationOf(this.area)) return;
    this.entries.set(key, { value, at: readAt, refreshing: false });
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }
}
