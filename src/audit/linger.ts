/**
 * How long an audit flush's leader waits for company (src/audit/batcher.ts, through the group
 * commit's `gather`): fewer, fuller Queue messages against a few milliseconds of latency.
 *
 * Invariants:
 * - **Bounded.** A leader waits at most a timer tick, COMPANY_TICKS more, then LINGER_STEPS waits
 *   of 1 ms, within LINGER_MS after the first tick, on timers of its own request; it never waits
 *   for a promise another request resolves, so a linger always ends.
 * - **Only for company it expects.** First the isolate's audited requests in flight
 *   (`auditedRequestBegins`: from the start of their work to the end of their last hand-off):
 *   a few ticks while fewer hand-offs wait than are in flight. Then as many as the largest flush
 *   of the last PEAK_HOLD_MS (`expectedGroup`: under steady load as many come back each flush,
 *   some not yet inside the Worker: reading their HTTP request, in their D1 round trip). As many
 *   waiting, or alone, it does not wait.
 * - **A read's leader always waits for the peak; a write's only while it pays.** A read hands
 *   its entries over once, at the end of a short request, and its company (the same clients'
 *   next reads) is on its way in: waiting for the peak took a KV read from ~0.2 to ~0.15 Queue
 *   calls at concurrency 8. A write's company is often still in its work (signing, a D1 write)
 *   and does not come within the bound, so for writes the linger keeps a recent average of the
 *   hand-offs its 1 ms waits brought per millisecond; below MIN_GAIN_PER_MS it flushes after the
 *   ticks, and waits again in one flush of PROBE_EVERY to notice when waiting would pay again.
 *   Reads neither read nor move that average. Measured with the audit bench: docs/audit.md
 *   "Where the rest went".
 * - **No wait once the company is there.** The hand-off that brings the waiting count to what the
 *   leader expects (`groupComplete`) flushes the group itself at once (src/core/group-commit.ts
 *   `complete`), instead of the leader noticing it on its next timer, up to 1 ms later with every
 *   request of the group held meanwhile.
 * - **Wrong counts cost only the bound.** The in-flight count is exact but for requests
 *   cancelled mid-way (workerd never resumes their code, not even a `finally`), which count until
 *   IN_FLIGHT_MAX_MS; a peak that does not come back costs one flush the bound, then the next
 *   flush's size replaces it.
 * State is per isolate; JavaScript runs one event at a time in it, so no lock is needed.
 */

/** Longer than any audited request's work; a request counted longer than this was cancelled. */
export const IN_FLIGHT_MAX_MS = 15_000;
/** The linger's bounds: COMPANY_TICKS timer ticks, then LINGER_STEPS waits of 1 ms, within LINGER_MS after the first tick. */
export const COMPANY_TICKS = 3;
export const LINGER_STEPS = 2;
export const LINGER_MS = 2;
/** How long the largest recent flush is expected again (then the next flush's size replaces it). */
export const PEAK_HOLD_MS = 1_000;
/** Lingering goes on while it recently brought at least this many hand-offs per millisecond. */
export const MIN_GAIN_PER_MS = 0.5;
/** When it did not, one flush in this many lingers anyway, to measure again. */
export const PROBE_EVERY = 16;

/** Oldest first (a Set keeps insertion order). */
const inFlight = new Set<{ since: number }>();
const peak = { size: 0, at: 0 };
const payoff = { perMs: MIN_GAIN_PER_MS, skipped: 0 };

/** Counts one audited request in flight; the function returned (idempotent) stops counting it. */
export function auditedRequestBegins(): () => void {
  const me = { since: Date.now() };
  inFlight.add(me);
  return () => {
    inFlight.delete(me);
  };
}

/** The audited requests in flight now (those counted longer than IN_FLIGHT_MAX_MS dropped). */
export function auditedInFlight(now = Date.now()): number {
  for (const r of inFlight) {
    if (now - r.since <= IN_FLIGHT_MAX_MS) break;
    inFlight.delete(r);
  }
  return inFlight.size;
}

/** Test seam: a fresh isolate's linger (no recent flush, lingering presumed to pay). */
export function resetLinger(): void {
  peak.size = 0;
  peak.at = 0;
  payoff.perMs = MIN_GAIN_PER_MS;
  payoff.skipped = 0;
}

/** Records a flush's size in the peak. */
export function recordFlush(size: number, now = Date.now()): void {
  if (size >= peak.size || now - peak.at > PEAK_HOLD_MS) {
    peak.size = size;
    peak.at = now;
  }
}

/** The hand-offs a leader expects in its flush: those in flight now, or the recent peak. */
export function expectedGroup(inFlightNow: number, now = Date.now()): number {
  return Math.max(inFlightNow, now - peak.at <= PEAK_HOLD_MS ? peak.size : 0);
}

/** Whether `waiting` hand-offs are all a leader expects (its gather then ends; the batcher lets the one that completes the group flush it at once). */
export function groupComplete(waiting: number, inFlightNow: () => number = auditedInFlight): boolean {
  return waiting >= expectedGroup(inFlightNow());
}

const tick = (): Promise<void> => new Promise((r) => setTimeout(r, 0));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * The leader's wait for company (see the invariants above); `waiting()` counts the hand-offs
 * waiting, its own included. First the requests already in the Worker: a tick, then up to
 * COMPANY_TICKS more within LINGER_MS while fewer wait than are in flight (cheap timer events, a
 * fraction of a millisecond each). Then those the recent peak says are still on their way in (a
 * read's leader always, a write's while it pays): up to LINGER_STEPS waits of 1 ms, within
 * LINGER_MS of the start. `read`: the leader's hand-off is a read's (src/audit/enqueue.ts).
 * `leads()`: false once a hand-off completed the group and flushed it (the group commit's
 * `complete`): the wait is over, and its company came.
 */
export async function gather(waiting: () => number, inFlightNow: () => number = auditedInFlight, read = false, leads: () => boolean = () => true): Promise<void> {
  const short = () => leads() && !groupComplete(waiting(), inFlightNow);
  if (!short()) return;
  await tick();
  const start = Date.now();
  const within = () => Date.now() - start < LINGER_MS;
  for (let i = 0; i < COMPANY_TICKS && leads() && waiting() < inFlightNow() && within(); i++) await tick();
  if (!short() || !within()) return;
  const waitForPeak = async () => {
    for (let i = 0; i < LINGER_STEPS && short() && within(); i++) await sleep(1);
  };
  // A read's company comes back within the bound (see the invariants): no payoff to measure.
  if (read) return waitForPeak();
  if (payoff.perMs < MIN_GAIN_PER_MS && ++payoff.skipped < PROBE_EVERY) return;
  payoff.skipped = 0;
  const before = waiting();
  const expected = expectedGroup(inFlightNow());
  const from = Date.now();
  await waitForPeak();
  const ms = Date.now() - from;
  // Taken over: the hand-offs it waited for all came (they left with the group).
  const came = leads() ? waiting() - before : expected - before;
  if (ms > 0) payoff.perMs = 0.75 * payoff.perMs + 0.25 * (came / ms);
}
