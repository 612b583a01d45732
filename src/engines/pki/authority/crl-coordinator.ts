/**
 * CRL rebuilds inside the mount's Authority Durable Object: one at a time, coalesced, and never
 * missing a revocation (docs/pki-revocation-crl.md "How rebuilds are serialized"; the builder is src/engines/pki/revocation/crl-rebuild.ts).
 *
 * Invariants:
 * - Builds never interleave. A DO lets other calls in while a build awaits D1, so builds are
 *   chained on one promise (`tail`): a build starts only after the previous one settled.
 * - A request is answered by a build that STARTED AFTER the request arrived. The caller wrote its
 *   revocation to D1 before calling, so that build reads it. While a build runs, requests join
 *   one queued build (`next`); `next` is cleared synchronously when that build starts, so a
 *   request arriving later queues a new one. Hence 100 concurrent revocations cost at most a
 *   few builds, and each answer covers its own revocation.
 * - Joined requests merge: a complete request upgrades a queued delta (a complete build writes a
 *   fresh delta too); `force` is or-ed. Scopes merge too (docs/pki-revocation-crl.md "Sharded
 *   CRLs"): shard-only requests join into one build of the union of their shards; a request for
 *   every scope (no `shards`) makes the build cover every scope. A queued delta of every scope
 *   joined by a shard's complete request becomes a complete build of every scope (a superset of
 *   both). So revocations in one shard, however many, cost builds of that shard only.
 * - The DO's storage keeps the last CRL number of each group ("crl:number:<group>"), written by
 *   the build before the CRL itself: numbers only grow, across restarts too. It is a guard, not
 *   the source: a build also reads the numbers stored in D1 and never numbers below its clock in
 *   milliseconds, so a new or wiped Authority, or a D1 restored to an earlier point, still
 *   numbers upward (src/engines/pki/revocation/crl-rebuild.ts).
 * - `history` (in memory, last HISTORY builds) records each build's start/end and numbers, so
 *   tests can check ordering; `building` asserts non-interleaving at run time.
 * - Disabling the mount wipes the storage (Authority.purge); a build in flight then writes CRL
 *   rows for a mount whose rows are being deleted, which the purge's D1 batch removes anyway.
 */
import type { MountRow } from "../../../core/mount-store";
import { buildMountCrls, type CrlBuildReport, type CrlBuildRequest, type CrlCounters } from "../revocation/crl-rebuild";

const HISTORY = 500;

export interface CrlBuildRecord {
  seq: number;
  kind: CrlBuildReport["built"];
  requested: CrlBuildRequest["kind"];
  startedAt: number;
  finishedAt: number;
  /** How many requests this build answered. */
  requests: number;
  numbers: CrlBuildReport["numbers"];
  maxSeq: number;
  error: string | null;
}

interface Pending {
  req: CrlBuildRequest;
  mount: MountRow;
  requests: number;
  promise: Promise<CrlBuildReport>;
  resolve(r: CrlBuildReport): void;
  reject(e: unknown): void;
}

/** One request covering two (see the invariants above). */
export function mergeRequests(a: CrlBuildRequest, b: CrlBuildRequest): CrlBuildRequest {
  const kind = a.kind === "complete" || b.kind === "complete" ? "complete" : "delta";
  const merged: CrlBuildRequest = { kind, force: a.force || b.force };
  if (a.shards && b.shards && a.kind === b.kind) merged.shards = [...new Set([...a.shards, ...b.shards])];
  return merged;
}

export class CrlCoordinator {
  private tail: Promise<void> = Promise.resolve();
  private next: Pending | null = null;
  private building = false;
  private seq = 0;
  readonly history: CrlBuildRecord[] = [];

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly env: Env,
  ) {}

  private counters(): CrlCounters {
    return {
      last: async (group) => (await this.storage.get<number>(`crl:number:${group}`)) ?? 0,
      store: (group, n) => this.storage.put(`crl:number:${group}`, n),
    };
  }

  /** Resolves with the report of a build that started after this call. */
  request(mount: MountRow, req: CrlBuildRequest): Promise<CrlBuildReport> {
    const queued = this.next;
    if (queued) {
      queued.mount = mount;
      queued.requests++;
      queued.req = mergeRequests(queued.req, req);
      return queued.promise;
    }
    let resolve: (r: CrlBuildReport) => void = () => undefined;
    let reject: (e: unknown) => void = () => undefined;
    const promise = new Promise<CrlBuildReport>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    const pending: Pending = { req: { ...req, ...(req.shards ? { shards: [...req.shards] } : {}) }, mount, requests: 1, promise, resolve, reject };
    this.next = pending;
    this.tail = this.tail.then(() => this.run(pending));
    return promise;
  }

  private async run(p: Pending): Promise<void> {
    // From here on, new requests queue a later build: they may have written after our reads.
    if (this.next === p) this.next = null;
    if (this.building) {
      p.reject(new Error("CRL builds interleaved"));
      return;
    }
    this.building = true;
    const record: CrlBuildRecord = {
      seq: ++this.seq,
      kind: "none",
      requested: p.req.kind,
      startedAt: Date.now(),
      finishedAt: 0,
      requests: p.requests,
      numbers: {},
      maxSeq: 0,
      error: null,
    };
    try {
      const report = await buildMountCrls(this.env, p.mount, p.req, this.counters());
      record.kind = report.built;
      record.numbers = report.numbers;
      record.maxSeq = report.maxSeq;
      p.resolve(report);
    } catch (e) {
      record.error = e instanceof Error ? e.message : String(e);
      console.error(`CRL build on mount ${p.mount.accessor} failed: ${record.error}`);
      p.reject(e);
    } finally {
      this.building = false;
      record.finishedAt = Date.now();
      record.requests = p.requests;
      this.history.push(record);
      if (this.history.length > HISTORY) this.history.shift();
    }
  }
}
