/**
 * Group commit within one isolate: concurrent requests hand their work over as data, one of them
 * (the leader) runs everything waiting in one go (one D1 batch, one Queue `sendBatch`), and every
 * request learns its own outcome. Used by the PKI's certificate rows
 * (src/engines/pki/issuance/cert-commit.ts) and the audit trail's Queue messages
 * (src/audit/batcher.ts); docs/architecture.md "Writes on the hot path".
 *
 * Invariants:
 * - **Done before the answer.** `submit` resolves only once the group holding its input has run,
 *   with that input's own outcome. No request answers from a group still in flight.
 * - **One group in flight per committer.** The first caller with nothing in flight leads: it
 *   waits for company (`gather`), takes what is waiting (itself first, at most `maxGroup`, in
 *   arrival order) and runs it. Callers arriving meanwhile wait; when the group ends, its leader
 *   hands the lead to the first waiter, which runs everything waiting by then.
 * - **A complete group does not wait for its leader's timer.** With `complete`, the caller whose
 *   arrival completes the group a leader is gathering for (or a waiter given the lead has not yet
 *   noticed) takes the lead and runs the group at once, in its own request; the former leader,
 *   back from its gather, finds itself taken over and waits for its result like any waiter. Only
 *   a lead that has not taken its group is taken over this way, so it is still one group in
 *   flight.
 * - **A stale lead is taken over.** A leader whose request was cancelled before its group was
 *   handed to waitUntil would hold the lead for ever; the first waiter takes it over once the lead
 *   is `staleLeadMs` old (longer than any group runs, so at worst two groups overlap).
 * - **Nothing crosses requests but data.** workerd ties I/O to the request that made it, so the
 *   leader runs the group in its own request (kept open: its own input is in it) and hands it to
 *   waitUntil; a waiter's code only ever runs in its own request (below).
 *
 * How a waiter wakes: it looks at its result on timers of its own request: first when the lead in
 * flight should end (FIRST_LOOK_SHARE of the recent leads' length after that lead was given, at
 * most FIRST_LOOK_MAX_MS), then every POLL_MS. Each look is a timer event (JavaScript in the
 * isolate and workerd's own work around it), so a waiter that looked every POLL_MS from the start
 * paid one per millisecond of a group it could not be in (docs/audit.md "What it costs"). An
 * estimate too long makes a waiter notice at most FIRST_LOOK_MAX_MS late, once per lead; one too
 * short costs looks, as before. Not a promise the leader resolves, tried twice: without workerd's `handle_cross_request_promise_resolution` (the
 * Vitest Workers pool turns it off) the woken waiter ran in the leader's request ("Cannot
 * perform I/O on behalf of a different request"); with it (the default for this Worker's
 * compatibility date, https://developers.cloudflare.com/workers/configuration/compatibility-flags/),
 * 200 concurrent issues under `wrangler dev` had a request cancelled as hung ("the Workers
 * runtime canceled this request because it detected that your Worker's code had hung"), even
 * with the 1 ms poll kept beside the promise (docs/audit.md "What it costs").
 */

/** How often a waiter looks at its result once its group is due: the bound on how late it notices it. */
const POLL_MS = 1;
/** A waiter's first look at a lead comes at most this long after it saw that lead (a bound on a wrong estimate). */
const FIRST_LOOK_MAX_MS = 8;
/** The share of a typical lead's length a waiter sleeps before its first look (early rather than late). */
const FIRST_LOOK_SHARE = 0.75;

interface Waiter<I, O> {
  input: I;
  /** Set by the leader of the waiter's group. */
  result: { value: O } | null;
}

export interface GroupCommitOptions<I, O, C> {
  /** Inputs in one group at most (a bound on one group's work, not on throughput). */
  maxGroup: number;
  /** A lead older than this is taken over by the first waiter. */
  staleLeadMs: number;
  /**
   * The leader's wait for company before it takes the group; `waiting()` counts the inputs
   * waiting; `leads()` turns false when the group was taken from it (`complete`, a stale lead):
   * the wait has nothing left to wait for.
   */
  gather(waiting: () => number, first: I, leads: () => boolean): Promise<void>;
  /**
   * Whether `waiting` inputs complete the group a leader is gathering for (the end of its
   * `gather` at its next look). The input that completes it takes the lead and runs the group at
   * once, so no group waits for its leader's timer; the leader finds itself taken over. Without
   * it, a group starts when its leader's gather ends.
   */
  complete?(waiting: number): boolean;
  /** Runs a group with the leader's context (its database handle, its Queue binding); one result per input, in order; never rejects. */
  run(ctx: C, inputs: I[]): Promise<O[]>;
  /** The result of an input whose group ended without one (run broke its promise). */
  lost(input: I): O;
}

export class GroupCommit<I, O, C> {
  private readonly waiting: Waiter<I, O>[] = [];
  /** Who holds the lead (null: nothing in flight). */
  private leader: Waiter<I, O> | null = null;
  /** When the current lead was given. */
  private leadSince = 0;
  /** A lead's typical length, from being given to its group's end (moving average; 0 before any). */
  private typicalLeadMs = 0;

  constructor(private readonly opts: GroupCommitOptions<I, O, C>) {}

  /** Runs `input` in a group with the concurrent callers' inputs; resolves with its own result. */
  async submit(ctx: C, input: I, waitUntil?: (p: Promise<unknown>) => void): Promise<O> {
    const me: Waiter<I, O> = { input, result: null };
    this.waiting.push(me);
    // Completing the group of a leader that has not taken it yet (it is still among the
    // waiting: gathering, or given the lead and not yet looking): this input runs it now.
    const completes = this.leader !== null && this.opts.complete?.(this.waiting.length) === true && this.waiting.includes(this.leader);
    if (!this.leader || completes) this.giveLead(me);
    for (;;) {
      if (me.result) return me.result.value;
      if (this.leader !== me) {
        await this.settled(me);
        continue;
      }
      if (!completes) {
        await this.opts.gather(
          () => this.waiting.length,
          me.input,
          () => this.leader === me,
        );
      }
      // Taken over while gathering (its group completed by a later input, or a stale lead): the new leader runs this input.
      if (this.leader === me && !me.result) await this.lead(me, ctx, waitUntil);
    }
  }

  /** Waits until the waiter has its result or the lead, looking on timers of its own request. */
  private async settled(me: Waiter<I, O>): Promise<void> {
    let seen = -1;
    while (!me.result && this.leader !== me) {
      // A lead not seen before: the first look when it should end; then every POLL_MS.
      const due = this.leadSince !== seen ? Math.min(FIRST_LOOK_MAX_MS, this.leadSince + Math.floor(this.typicalLeadMs * FIRST_LOOK_SHARE) - Date.now()) : 0;
      seen = this.leadSince;
      await sleep(Math.max(POLL_MS, due));
      if (!me.result && this.leader !== me && Date.now() - this.leadSince > this.opts.staleLeadMs && this.firstWaiter() === me) this.giveLead(me);
    }
  }

  /** The longest-waiting caller that does not hold the lead. */
  private firstWaiter(): Waiter<I, O> | undefined {
    return this.waiting.find((w) => w !== this.leader);
  }

  /** Runs what is waiting (`me` first), gives every waiter of the group its result (`me` too), passes the lead on. */
  private async lead(me: Waiter<I, O>, ctx: C, waitUntil?: (p: Promise<unknown>) => void): Promise<void> {
    const group = this.take(me);
    const since = this.leadSince;
    const run = this.opts.run(
      ctx,
      group.map((w) => w.input),
    );
    waitUntil?.(run);
    let results: O[] = [];
    try {
      results = await run;
    } catch {
      // `run` never rejects; if it did, every input of the group is lost().
    } finally {
      for (const [i, w] of group.entries()) settle(w, { value: i < results.length ? (results[i] as O) : this.opts.lost(w.input) });
      // A lead taken over meanwhile is no longer this one's to pass, nor a typical length.
      if (this.leader === me) {
        const took = Date.now() - since;
        this.typicalLeadMs = this.typicalLeadMs === 0 ? took : 0.8 * this.typicalLeadMs + 0.2 * took;
        const next = this.waiting[0];
        if (next) this.giveLead(next);
        else this.leader = null;
      }
    }
  }

  private giveLead(w: Waiter<I, O>): void {
    this.leader = w;
    this.leadSince = Date.now();
  }

  /** `me` and the inputs waiting after it, in arrival order, at most maxGroup. */
  private take(me: Waiter<I, O>): Waiter<I, O>[] {
    const mine = this.waiting.indexOf(me);
    if (mine >= 0) this.waiting.splice(mine, 1);
    return [me, ...this.waiting.splice(0, this.opts.maxGroup - 1)];
  }
}

function settle<I, O>(w: Waiter<I, O>, result: { value: O }): void {
  w.result = result;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
