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
 * - **Nothing crosses requests but data.** A waiter hands over its rows as data (the leader
 *   prepares the statements: a D1 statement belongs to the request that prepared it, "Cannot
 *   perform I/O on behalf of a different request"); the leader runs the batch through its own
 *   database handle, inside its own request, which it keeps open until the batch ends (its own
 *   row is in it); the batch is also handed to waitUntil so a client going away cannot cut it
 *   short. Leader, hand-over, wake-up and a stale lead's takeover are src/core/group-commit.ts.
 * - **Body with its row.** `storeLeafCertificate` writes the certificate's DER to R2 while its
 *   slim row joins a group (both awaited: one round trip's wait, not two); the order of the two
 *   and what a failure of either leaves are ../storage/cert-bodies.ts's invariants.
 */
import type { Db } from "../../../core/db/client";
import { GroupCommit } from "../../../core/group-commit";
import { insertCertRowsStmts, insertCertsBatch, keepBodyInRow, type CertInsert } from "../storage/store";
import { deleteBodies, putBody } from "../storage/cert-bodies";

/** Rows per batch: well under D1's statement limits, and a bounded wait for the last joiner. */
const MAX_GROUP = 64;

/** A leader with fewer than COMPANY rows waiting waits up to COMPANY_TICKS ticks of TICK_MS for more. */
const COMPANY = 4;
const COMPANY_TICKS = 3;
const TICK_MS = 1;

/** Longer than any D1 batch: a lead this old (its request cancelled) is taken over. */
const STALE_LEAD_MS = 15_000;

type Outcome = { kind: "committed" } | { kind: "failed"; error: unknown };

const commit = new GroupCommit<CertInsert[], Outcome, Db>({
  maxGroup: MAX_GROUP,
  staleLeadMs: STALE_LEAD_MS,
  // A leader with little company waits a few ticks for more: at c=8 one tick took a stored
  // issue's CPU from 4.0x to 3.3x cfssl's and its rate from 0.17x to 0.28x (npm run bench);
  // up to three ticks for four rows, with multi-row INSERTs, to ~3.2x / 0.29x. Six for six
  // measured no better within the machine's noise.
  gather: async (waiting) => {
    for (let tick = 0; tick < COMPANY_TICKS && waiting() < COMPANY; tick++) await new Promise((r) => setTimeout(r, TICK_MS));
  },
  run: runGroup,
  lost: () => ({ kind: "failed", error: new Error("certificate row was not committed") }),
});

/**
 * Stores `rows` (one certificate's) in a D1 batch shared with the concurrent callers of this
 * isolate; resolves once committed, rejects with the row's own error.
 */
export async function commitCertificate(db: Db, rows: CertInsert[], waitUntil?: (p: Promise<unknown>) => void): Promise<void> {
  const outcome = await commit.submit(db, rows, waitUntil);
  if (outcome.kind === "failed") throw outcome.error;
}

/**
 * Stores a certificate: its body (base64 DER in `row.der`) in the CERTS bucket and its row, with
 * `der` '', group-committed; resolves once both are durable. A put that fails after the row
 * committed leaves the body in the row instead; a row that fails takes its body back out.
 */
export function storeLeafCertificate(db: Db, bodies: R2Bucket, row: CertInsert, der: Uint8Array, waitUntil?: (p: Promise<unknown>) => void): Promise<void> {
  return storeWithBody(db, bodies, row, der, (slim) => commitCertificate(db, [slim], waitUntil), waitUntil);
}

/**
 * As storeLeafCertificate, the slim row committed by `commitRow` (a D1 batch of the caller's
 * that holds it with other statements).
 */
export async function storeWithBody(
  db: Db,
  bodies: R2Bucket,
  row: CertInsert,
  der: Uint8Array,
  commitRow: (slim: CertInsert) => Promise<void>,
  waitUntil?: (p: Promise<unknown>) => void,
): Promise<void> {
  const [put, committed] = await Promise.allSettled([putBody(bodies, row.mountId, row.serial, der), commitRow({ ...row, der: "" })]);
  if (committed.status === "rejected") {
    if (put.status === "fulfilled") {
      const gone = deleteBodies(bodies, row.mountId, [row.serial]).catch(() => undefined);
      waitUntil?.(gone);
      await gone;
    }
    throw committed.reason;
  }
  if (put.status === "rejected") await keepBodyInRow(db, row.mountId, row.serial, row.der);
}

/**
 * Runs the group's rows through the leader's database handle: every request's handle wraps the
 * Worker's one D1 binding, and a statement runs on whichever handle's batch it is put in. Never
 * rejects: each waiter gets its outcome.
 */
async function runGroup(db: Db, group: CertInsert[][]): Promise<Outcome[]> {
  try {
    await insertCertsBatch(db, insertCertRowsStmts(db, group.flat()));
    return group.map(() => ({ kind: "committed" }));
  } catch (e) {
    if (group.length === 1) return [{ kind: "failed", error: e }];
  }
  // The transaction stored nothing: each row alone, so one bad row fails only itself.
  return Promise.all(
    group.map(async (rows): Promise<Outcome> => {
      try {
        await insertCertsBatch(db, insertCertRowsStmts(db, rows));
        return { kind: "committed" };
      } catch (error) {
        return { kind: "failed", error };
      }
    }),
  );
}
