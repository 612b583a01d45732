#!/usr/bin/env node
// `npm run bench -- local-runtime`: what the local runtime itself (Miniflare's workerd, the
// runtime of `wrangler dev` and of the other benches) charges for the three things an audited
// request adds besides its own JavaScript, measured on a bare Worker so no Lanyard code is in
// the figures (docs/audit.md "What it costs"):
//   1. one Queue send, by message size, `send` and `sendBatch` of one message (the local queue
//      simulator stores and dispatches it to a consumer that acks it);
//   2. one timer event (`setTimeout(0)` awaited);
//   3. a request held N ms on a timer, at concurrency 8 (the hand-off's wait for its flush).
// workerd CPU from /proc (all its threads, 10 ms ticks), per operation or per request; the median
// of BENCH_RUNS (a single run moves by a third on a shared machine).
//   BENCH_RUNS=3   BENCH_SECONDS=4
import { Miniflare } from "miniflare";
import { load, workerdCpu } from "./lib/bench-common.mjs";

const RUNS = Number(process.env.BENCH_RUNS ?? "3");
const SECONDS = Number(process.env.BENCH_SECONDS ?? "4");

const script = `
export default {
  async fetch(req, env) {
    const u = new URL(req.url);
    const n = Number(u.searchParams.get("n") ?? "0");
    const size = Number(u.searchParams.get("size") ?? "0");
    const mode = u.searchParams.get("mode");
    const body = "x".repeat(size);
    for (let i = 0; i < n; i++) {
      if (mode === "send") await env.Q.send(body, { contentType: "text" });
      else if (mode === "sendBatch") await env.Q.sendBatch([{ body, contentType: "text" }]);
      else if (mode === "timer") await new Promise((r) => setTimeout(r, 0));
    }
    // A little work, as a request has, then the hold.
    let x = 0;
    for (let i = 0; i < 20000; i++) x += i % 7;
    const hold = Number(u.searchParams.get("hold") ?? "0");
    if (hold > 0) await new Promise((r) => setTimeout(r, hold));
    return new Response(String(x));
  },
  async queue(batch) { batch.ackAll(); },
};`;

const sum = (cpu) => Object.values(cpu).reduce((a, b) => a + b, 0);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const mf = new Miniflare({
    modules: true,
    script,
    compatibilityDate: "2026-04-20",
    port: 0,
    queueProducers: { Q: "bench-q" },
    queueConsumers: { "bench-q": { maxBatchSize: 100, maxBatchTimeout: 1 } },
  });
  const base = (await mf.ready).toString().replace(/\/$/, "");
  try {
    // µs of workerd CPU per operation, the consumer's delivery included (it waits out the 1 s batch window).
    const perOp = async (mode, size, n) => {
      await fetch(`${base}/?mode=${mode}&size=${size}&n=20`);
      await sleep(1200);
      const c0 = sum(workerdCpu());
      await fetch(`${base}/?mode=${mode}&size=${size}&n=${n}`);
      await sleep(1200);
      return ((sum(workerdCpu()) - c0) * 1e6) / n;
    };
    const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const ops = [];
    for (const [mode, size, n] of [["none", 0, 1], ["timer", 0, 5000], ["send", 100, 1000], ["send", 3000, 1000], ["send", 25000, 1000], ["sendBatch", 3000, 1000], ["sendBatch", 25000, 1000]]) {
      const runs = [];
      for (let r = 0; r < RUNS; r++) runs.push(await perOp(mode, size, n));
      ops.push({ operation: mode === "none" ? "idle 2.4 s (µs in all)" : mode, "message bytes": mode.startsWith("send") ? size : "", "µs of workerd CPU each (median)": Math.round(median(runs)), "all runs": runs.map((x) => Math.round(x)).join(", ") });
    }
    console.log("\nOne operation in the local runtime (Miniflare workerd; the idle row is the 2.4 s of waiting the others include)\n");
    console.table(ops);

    const holds = [];
    for (let r = 0; r < RUNS; r++) {
      for (const hold of [0, 1, 2]) {
        const c0 = sum(workerdCpu());
        const res = await load(base, { path: `/?hold=${hold}`, method: "GET" }, 8, SECONDS);
        holds.push({ round: r + 1, "held ms": hold, "req/s": Math.round(res.rps), "µs of workerd CPU per request": Math.round(((sum(workerdCpu()) - c0) * 1e6) / res.requests) });
      }
    }
    console.log("\nA request held on a timer (concurrency 8, the same work per request)\n");
    console.table(holds);
  } finally {
    await mf.dispose();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
