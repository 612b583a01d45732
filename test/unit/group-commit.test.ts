/**
 * The group commit under the audit batcher and the certificate rows (src/core/group-commit.ts),
 * driven directly with a `run` that records its groups: concurrent inputs share a group in
 * arrival order and each gets its own result, within milliseconds of their group's end; and a lead that never runs its group (its request cancelled) is taken over
 * by the first waiter once stale, the stale leader's input included, nothing run twice. And the
 * audit batcher's linger (src/audit/linger.ts `gather`): none when alone, bounded when the
 * requests counted in flight never hand anything over, expecting the recent peak, stopping its
 * 1 ms waits while they bring no company; its count of requests in flight exact, a cancelled
 * request (never released) dropped from it once IN_FLIGHT_MAX_MS old.
 */
import { describe, expect, it } from "vitest";
import { isReadHandOff } from "../../src/audit/enqueue";
import type { AuditEntry } from "../../src/audit/types";
import { auditedInFlight, auditedRequestBegins, expectedGroup, gather, COMPANY_TICKS, IN_FLIGHT_MAX_MS, LINGER_MS, LINGER_STEPS, PEAK_HOLD_MS, PROBE_EVERY, recordFlush, resetLinger } from "../../src/audit/linger";
import { GroupCommit } from "../../src/core/group-commit";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Settles with "timeout" if `p` has not settled within `ms`. */
const within = <T>(p: Promise<T>, ms: number): Promise<T | "timeout"> => Promise.race([p, sleep(ms).then(() => "timeout" as const)]);

describe("group commit", () => {
  it("concurrent inputs share a group, in arrival order, each with its own result; waiters learn it as their group ends", async () => {
    const groups: string[][] = [];
    const commit = new GroupCommit<string, string, null>({
      maxGroup: 100,
      staleLeadMs: 15_000,
      gather: () => sleep(0),
      run: async (_ctx, inputs) => {
        groups.push(inputs);
        await sleep(20);
        return inputs.map((i) => `done ${i}`);
      },
      lost: (i) => `lost ${i}`,
    });
    const started = Date.now();
    const inputs = Array.from({ length: 20 }, (_, i) => `in${i}`);
    const results = await Promise.all(inputs.map((i) => commit.submit(null, i)));
    const took = Date.now() - started;
    expect(results).toEqual(inputs.map((i) => `done ${i}`));
    // The first caller leads alone-ish; the rest arrived during its group and share the next.
    expect(groups.flat()).toEqual(inputs);
    expect(groups.length).toBeLessThanOrEqual(2);
    // Two groups of 20 ms, each waiter noticing its result on its next 1 ms look.
    expect(took).toBeLessThan(800);
  });

  it("a lead that never runs its group is taken over by the first waiter once stale, the stale leader's input included", async () => {
    const groups: string[][] = [];
    let gathers = 0;
    const commit = new GroupCommit<string, string, null>({
      maxGroup: 100,
      staleLeadMs: 50,
      // The first leader's request is "cancelled" while it gathers: it never comes back.
      gather: () => (gathers++ === 0 ? new Promise<void>(() => {}) : sleep(0)),
      run: async (_ctx, inputs) => {
        groups.push(inputs);
        return inputs.map((i) => `done ${i}`);
      },
      lost: (i) => `lost ${i}`,
    });
    const stuck = commit.submit(null, "stale-leader");
    await sleep(5);
    const waiter = commit.submit(null, "waiter");
    const late = commit.submit(null, "late");
    // Without the takeover the waiter would wait for ever.
    expect(await within(waiter, 5_000)).toBe("done waiter");
    expect(await within(late, 5_000)).toBe("done late");
    // The stale leader's input went with the taking-over group (its own request being gone,
    // `stuck` never returns: it still waits on its gather); nothing ran twice.
    expect(await within(stuck, 50)).toBe("timeout");
    expect(groups.flat().sort()).toEqual(["late", "stale-leader", "waiter"]);
    expect(groups[0]?.[0]).toBe("waiter");
    // The lead passed on normally afterwards.
    expect(await within(commit.submit(null, "after"), 5_000)).toBe("done after");
  });

  it("the input that completes the group a leader gathers for runs it at once, the leader's input with it; without `complete`, the group waits for the leader's gather", async () => {
    const run = async (complete?: (waiting: number) => boolean) => {
      const groups: string[][] = [];
      const commit = new GroupCommit<string, string, null>({
        maxGroup: 100,
        staleLeadMs: 15_000,
        // A leader that would gather for 300 ms.
        gather: () => sleep(300),
        complete,
        run: async (_ctx, inputs) => {
          groups.push(inputs);
          return inputs.map((i) => `done ${i}`);
        },
        lost: (i) => `lost ${i}`,
      });
      const started = Date.now();
      const leader = commit.submit(null, "leader");
      await sleep(5);
      const second = commit.submit(null, "second");
      await sleep(5);
      const third = commit.submit(null, "third");
      // The third completes the group: it runs it, and answers, long before the gather ends.
      const firstDone = await Promise.race([third, second, leader]);
      const tookFirst = Date.now() - started;
      expect(await Promise.all([leader, second, third])).toEqual(["done leader", "done second", "done third"]);
      return { groups, tookFirst, firstDone };
    };
    const taken = await run((waiting) => waiting >= 3);
    expect(taken.groups).toEqual([["third", "leader", "second"]]);
    expect(taken.firstDone).toBe("done third");
    expect(taken.tookFirst).toBeLessThan(200);
    const waited = await run();
    expect(waited.groups).toEqual([["leader", "second", "third"]]);
    expect(waited.tookFirst).toBeGreaterThanOrEqual(290);
  });

  it("the audit linger: a lone leader does not linger; one waiting for entries that never come stops at its bound", async () => {
    // Alone (nothing else in flight, no recent flush): no wait, one look at the count.
    resetLinger();
    let looks = 0;
    const t0 = Date.now();
    await gather(() => 1, () => (looks++, 1));
    expect(looks).toBe(1);
    expect(Date.now() - t0).toBeLessThan(50);
    // 100 requests counted in flight, none of which ever hands over: a tick, at most
    // COMPANY_TICKS more and LINGER_STEPS waits within LINGER_MS (a loaded machine's timers are
    // late, hence the loose wall bound); a look at the count before each.
    looks = 0;
    const t1 = Date.now();
    expect(await within(gather(() => 1, () => (looks++, 100)), 1_000)).toBeUndefined();
    expect(looks).toBeLessThanOrEqual(COMPANY_TICKS + LINGER_STEPS + 2);
    expect(Date.now() - t1).toBeLessThan(LINGER_MS + 200);
    // Company arriving ends the linger at once.
    let waiting = 1;
    setTimeout(() => (waiting = 3), 0);
    await gather(() => waiting, () => 3);
    expect(waiting).toBe(3);
  });

  it("the audit linger expects the largest flush of the last PEAK_HOLD_MS, bounded, and forgets it after", async () => {
    resetLinger();
    const t0 = 1_000_000;
    recordFlush(3, t0);
    recordFlush(8, t0 + 10);
    recordFlush(5, t0 + 20);
    // The largest recent flush, or the count in flight when that is more.
    expect(expectedGroup(1, t0 + 30)).toBe(8);
    expect(expectedGroup(12, t0 + 30)).toBe(12);
    // Held PEAK_HOLD_MS after it was reached, then the next flush's size replaces it.
    expect(expectedGroup(1, t0 + 10 + PEAK_HOLD_MS + 1)).toBe(1);
    recordFlush(2, t0 + 10 + PEAK_HOLD_MS + 1);
    expect(expectedGroup(1, t0 + 10 + PEAK_HOLD_MS + 2)).toBe(2);
    // A leader alone in flight after a flush of 8: it waits for company, at most LINGER_STEPS
    // waits of 1 ms (late timers on a loaded machine, hence the loose wall bound)...
    resetLinger();
    recordFlush(8);
    let looks = 0;
    const t1 = Date.now();
    await gather(() => 1, () => (looks++, 1));
    expect(looks).toBeGreaterThan(3);
    expect(looks).toBeLessThanOrEqual(COMPANY_TICKS + LINGER_STEPS + 2);
    expect(Date.now() - t1).toBeLessThan(LINGER_MS + 200);
    // ...and does not wait when as many already wait.
    looks = 0;
    await gather(() => 8, () => (looks++, 1));
    expect(looks).toBe(1);
    resetLinger();
  });

  it("the audit linger stops while it brings no company, and lingers again one flush in PROBE_EVERY", async () => {
    resetLinger();
    // Each gather expects 8 (a recent flush of 8) and nobody else ever comes. A gather that
    // waits its 1 ms steps looks at the count more than three times (before its tick, after it
    // for the requests in flight and for the peak, then before each wait); one that does not,
    // exactly three times.
    const looksOf = async () => {
      recordFlush(8);
      let looks = 0;
      await gather(() => 1, () => (looks++, 1));
      return looks;
    };
    expect(await looksOf()).toBeGreaterThan(3);
    // Those waits brought nothing: the next PROBE_EVERY - 1 flushes go after the tick...
    for (let i = 1; i < PROBE_EVERY; i++) expect(await looksOf()).toBe(3);
    // ...and the one after waits again, to measure.
    expect(await looksOf()).toBeGreaterThan(3);
    expect(await looksOf()).toBe(3);
    resetLinger();
  });

  it("a read's linger waits for the peak whatever the payoff, and does not move it", async () => {
    resetLinger();
    const looksOf = async (read: boolean) => {
      recordFlush(8);
      let looks = 0;
      await gather(() => 1, () => (looks++, 1), read);
      return looks;
    };
    // A write's waits brought nothing: it stops waiting for the peak...
    expect(await looksOf(false)).toBeGreaterThan(3);
    expect(await looksOf(false)).toBe(3);
    // ...a read waits for it still (its company is on its way in, not in its work), every time...
    for (let i = 0; i < 3; i++) expect(await looksOf(true)).toBeGreaterThan(3);
    // ...and its waits do not count as a write's probe: the writes still skip.
    expect(await looksOf(false)).toBe(3);
    resetLinger();
  });

  it("a leader whose group was taken from it stops gathering at its next look, and for a write that counts as company that came", async () => {
    resetLinger();
    // Expecting a recent flush of 8, alone: the write's linger waits for the peak (it pays, as a fresh isolate presumes)...
    recordFlush(8);
    let leads = true;
    let looks = 0;
    setTimeout(() => (leads = false), 0);
    const t0 = Date.now();
    await gather(() => 1, () => (looks++, 1), false, () => leads);
    // ...but a hand-off completed the group after its first tick: no 1 ms wait follows.
    expect(leads).toBe(false);
    expect(looks).toBeLessThanOrEqual(2);
    expect(Date.now() - t0).toBeLessThan(200);
    // Taken over during its 1 ms waits: a write's payoff counts the group as company that came,
    // so the next write still waits for the peak instead of skipping.
    for (let i = 0; i < 3; i++) {
      recordFlush(8);
      let led = true;
      setTimeout(() => (led = false), 1);
      await gather(() => 1, () => 1, false, () => led);
    }
    recordFlush(8);
    let after = 0;
    await gather(() => 1, () => (after++, 1));
    expect(after).toBeGreaterThan(3);
    resetLinger();
  });

  it("a read's hand-off is one that ends with the response entry of a read or list; a write's, or a request entry alone, is not", () => {
    const entry = (type: AuditEntry["type"], operation: string): AuditEntry => ({
      id: `r:${type}`,
      time: "2026-11-28T00:00:00.000Z",
      type,
      request: { id: "r", operation, namespace: { id: "", path: "" }, path: "kv/data/app" },
    });
    expect(isReadHandOff([entry("request", "read"), entry("response", "read")])).toBe(true);
    expect(isReadHandOff([entry("request", "list"), entry("response", "list")])).toBe(true);
    expect(isReadHandOff([entry("response", "read")])).toBe(true);
    expect(isReadHandOff([entry("request", "read")])).toBe(false);
    expect(isReadHandOff([entry("request", "update")])).toBe(false);
    expect(isReadHandOff([entry("response", "update")])).toBe(false);
    expect(isReadHandOff([entry("request", "create"), entry("response", "create")])).toBe(false);
    expect(isReadHandOff([])).toBe(false);
  });

  it("the audit linger's count: each request counted once, released once however often its release runs; a request cancelled before its release stops counting after IN_FLIGHT_MAX_MS", () => {
    const base = auditedInFlight();
    const a = auditedRequestBegins();
    const b = auditedRequestBegins();
    expect(auditedInFlight()).toBe(base + 2);
    a();
    a();
    expect(auditedInFlight()).toBe(base + 1);
    b();
    expect(auditedInFlight()).toBe(base);
    // Cancelled: workerd never runs its code again, so its release never runs.
    const t0 = Date.now();
    auditedRequestBegins();
    const late = auditedRequestBegins();
    expect(auditedInFlight(t0 + IN_FLIGHT_MAX_MS - 1_000)).toBe(base + 2);
    // Once old enough it no longer makes leaders linger for entries that never come.
    expect(auditedInFlight(t0 + IN_FLIGHT_MAX_MS + 1_000)).toBe(base);
    late();
    expect(auditedInFlight()).toBe(base);
  });
});
