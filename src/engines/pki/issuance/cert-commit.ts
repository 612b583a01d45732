/**
 * Group commit of certificate rows: concurrent issues in one isolate share one D1 batch
 * (issue 14: "≤ 1 D1 round trip per issued certificate, which may be shared").
 *
 * Invariants:
 * - **Durable before the answer.** `commitCertificate` resolves only after the D1 batch holding
 *   its row has committed; it rejects if that row was not stored. No request answers from a
 *   batch that is still in flight.
 * - **One batch in flight per isolate.** The first caller with nothing in flight leads: it takes
 *   every waiting row (its own included, at most MAX_GROUP) and runs them as one batch. Callers
 *   arriving meanwhile wait; when the batch ends, its leader hands the lead to the first waiter,
 *   which runs the next batch with everything waiting by then.
 * - **A failed batch fails no innocent row.** A D1 batch is one transaction (all or nothing), so
 *   after a failure nothing of it is stored: each row is then retried alone, and only the rows
 *   that fail alone fail, each with its own error (a duplicate serial, a mount being disabled).
 * - **No promise crosses requests.** Each caller waits on a promise it created itself (workerd
 *   ties I/O and promises to the request that made them: a continuation of a finished request's
 *   promise would be cancelled); the leader only settles them. The leader runs the batch inside
 *   its own request, which it keeps open until the batch ends, since its own row is in it; the
 *   batch is also handed to waitUntil so a client going away cannot cut it short.
 */
import type { Db } from "../../../core/db/client";
import { insertCertsBatch, type Stmt } from "../storage/store";

/** Rows per batch: well under D1's statement limits, and a bounded wait for the last joiner. */
const MAX_GROUP = 64;

type Outcome = { kind: "committed" } | { kind: "failed"; error: unknown } | { kind: "lead" };

interface Waiter {
  /** The caller's handle; the batch runs on its leader's (runGroup). */
  db: Db;
  stmts: Stmt[];
  settle(o: Outcome): void;
}

const waiting: Waiter[] = [];
let inFlight = false;

/**
 * Stores `stmts` (one certificate's rows) in a D1 batch shared with the concurrent callers of
 * this isolate; resolves once committed, rejects with the row's own error.
 */
export async function commitCertificate(db: Db, stmts: Stmt[], waitUntil?: (p: Promise<unknown>) => void): Promise<void> {
  let resolve: (o: Outcome) => void = () => undefined;
  const promise = new Promise<Outcome>((r) => (resolve = r));
  const me: Waiter = { db, stmts, settle: resolve };
  waiting.push(me);
  if (!inFlight) {
    inFlight = true;
    resolve({ kind: "lead" });
  }
  const outcome = await promise;
  if (outcome.kind === "lead") return lead(me, waitUntil);
  if (outcome.kind === "failed") throw outcome.error;
}

/** Runs one batch of what is waiting (`me` first), settles the others and passes the lead on. */
async function lead(me: Waiter, waitUntil?: (p: Promise<unknown>) => void): Promise<void> {
  const group = takeGroup(me);
  const run = runGroup(me.db, group);
  waitUntil?.(run);
  let results: Map<Waiter, Outcome>;
  try {
    results = await run;
  } finally {
    handOver();
  }
  const lost = (): Outcome => ({ kind: "failed", error: new Error("certificate row was not committed") });
  for (const w of group) if (w !== me) w.settle(results.get(w) ?? lost());
  const own = results.get(me) ?? lost();
  if (own.kind === "failed") throw own.error;
}

function takeGroup(me: Waiter): Waiter[] {
  const group: Waiter[] = [me];
  for (let i = 0; i < waiting.length && group.length < MAX_GROUP; ) {
    const w = waiting[i];
    if (w && w !== me) {
      group.push(w);
      waiting.splice(i, 1);
    } else i++;
  }
  const mine = waiting.indexOf(me);
  if (mine >= 0) waiting.splice(mine, 1);
  return group;
}

/** The next waiter leads the next batch; with none waiting the isolate is idle again. */
function handOver(): void {
  const next = waiting[0];
  if (next) next.settle({ kind: "lead" });
  else inFlight = false;
}

/**
 * Runs the group's rows through the leader's database handle: every request's handle wraps the
 * Worker's one D1 binding, and a statement runs on whichever handle's batch it is put in. Never
 * rejects: each waiter gets its outcome.
 */
async function runGroup(db: Db, group: Waiter[]): Promise<Map<Waiter, Outcome>> {
  const out = new Map<Waiter, Outcome>();
  const [first] = group;
  if (!first) return out;
  try {
    await insertCertsBatch(db, group.flatMap((w) => w.stmts));
    for (const w of group) out.set(w, { kind: "committed" });
    return out;
  } catch (e) {
    if (group.length === 1) {
      out.set(first, { kind: "failed", error: e });
      return out;
    }
  }
  // The transaction stored nothing: each row alone, so one bad row fails only itself.
  await Promise.all(
    group.map(async (w) => {
      try {
        await insertCertsBatch(db, w.stmts);
        out.set(w, { kind: "committed" });
      } catch (error) {
        out.set(w, { kind: "failed", error });
      }
    }),
  );
  return out;
}
