/**
 * Group commit of certificate rows: concurrent issues in one isolate share one D1 batch
 * (at most one D1 round trip per issued certificate, which may be shared; docs/pki-issuance-benchmark.md).
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
 * - **Nothing crosses requests but data.** workerd ties I/O, statements and promise continuations
 *   to the request that made them. So a waiter hands over its rows as data (the leader prepares
 *   the statements) and learns its outcome by looking at a field on timers of its own
 *   (`settled`); the leader only writes that field. The leader runs the batch inside
 *   its own request, which it keeps open until the batch ends, since its own row is in it; the
 *   batch is also handed to waitUntil so a client going away cannot cut it short.
 */
import type { Db } from "../../../core/db/client";
import { insertCertRowsStmts, insertCertsBatch, type CertInsert } from "../storage/store";

/** Rows per batch: well under D1's statement limits, and a bounded wait for the last joiner. */
const MAX_GROUP = 64;

/** A leader with fewer than COMPANY rows waiting waits up to COMPANY_TICKS polls for more. */
const COMPANY = 4;
const COMPANY_TICKS = 3;

type Outcome = { kind: "committed" } | { kind: "failed"; error: unknown } | { kind: "lead" };

interface Waiter {
  /** The caller's handle; the batch runs on its leader's (runGroup). */
  db: Db;
  /**
   * Rows as data, not statements: a D1 statement belongs to the request that prepared it
   * ("Cannot perform I/O on behalf of a different request"), so the leader prepares them.
   */
  rows: CertInsert[];
  /** Set by whoever settles it (the leader of its batch, or the leader handing over). */
  outcome: Outcome | null;
}

const waiting: Waiter[] = [];
let inFlight = false;

/**
 * Stores `rows` (one certificate's) in a D1 batch shared with the concurrent callers of this
 * isolate; resolves once committed, rejects with the row's own error.
 */
export async function commitCertificate(db: Db, rows: CertInsert[], waitUntil?: (p: Promise<unknown>) => void): Promise<void> {
  const me: Waiter = { db, rows, outcome: null };
  waiting.push(me);
  if (!inFlight) {
    inFlight = true;
    me.outcome = { kind: "lead" };
  }
  const outcome = await settled(me);
  if (outcome.kind === "lead") {
    // A leader with little company waits a few ticks for more: at c=8 one tick took a stored
    // issue's CPU from 4.0x to 3.3x cfssl's and its rate from 0.17x to 0.28x (npm run bench);
    // up to three ticks for four rows, with multi-row INSERTs, to ~3.2x / 0.29x. Six for six
    // measured no better within the machine's noise.
    for (let tick = 0; tick < COMPANY_TICKS && waiting.length < COMPANY; tick++) await new Promise((r) => setTimeout(r, POLL_MS));
    return lead(me, waitUntil);
  }
  if (outcome.kind === "failed") throw outcome.error;
}

/**
 * How often a waiter looks at its outcome: the bound on how late it notices it. Each look is a
 * timer event of the waiter's request (a few microseconds of CPU).
 */
const POLL_MS = 1;

/**
 * Waits for the waiter's outcome by looking at it on timers of this request's own. Not a promise
 * the leader resolves: tried, a waiter handed the lead that way ran its D1 batch in the resolving
 * request's context ("Cannot perform I/O on behalf of a different request"), and a request
 * waiting on such a promise alone was cancelled as hung ("the Workers runtime canceled this
 * request because it detected that your Worker's code had hung").
 */
async function settled(me: Waiter): Promise<Outcome> {
  while (!me.outcome) await new Promise((r) => setTimeout(r, POLL_MS));
  return me.outcome;
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
  for (const w of group) if (w !== me) w.outcome = results.get(w) ?? lost();
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
  if (next) next.outcome = { kind: "lead" };
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
    await insertCertsBatch(db, insertCertRowsStmts(db, group.flatMap((w) => w.rows)));
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
        await insertCertsBatch(db, insertCertRowsStmts(db, w.rows));
        out.set(w, { kind: "committed" });
      } catch (error) {
        out.set(w, { kind: "failed", error });
      }
    }),
  );
  return out;
}
