#!/usr/bin/env node
// Audit cost benchmark (`npm run bench -- audit`; docs/audit.md "What it costs"): starts the Worker in the local
// runtime (scripts/lib/bench-common.mjs) and measures, with a NON-ROOT token whose policy grants
// the paths (root skips the policy read), at concurrency 8:
//   KV-v2 read, EC P-256 issue (stored), and OCSP GET (EC issuer)
// first with no audit device, then with one `http` device whose filter leaves public reads out
// (`not (path matches "/ocsp/")`, so the OCSP row measures layer 0 with a device enabled) and whose
// collector is a Node server in a thread of its own (scripts/lib/bench-collector.mjs: it accepts
// every NDJSON batch with 204 and counts the entries by id, without pausing the load). An audited row ends when the collector has both entries of every request it
// made (bounded: DRAIN_MS), and its workerd CPU runs from its start to that point: the row pays the
// queue and the consumer for its own entries, no other row does ("drain ms" in the table).
// Audited rows also show the answering isolate's sendBatch calls and batcher hand-offs per audited
// request (sys/metrics `lanyard.audit.isolate.*`; empty on a BENCH_REV without them).
// BENCH_RUNS rounds (default 3); in each, every scenario's rows without and with the device back
// to back, the order alternating from round to round; printed: every row, then
// the target table (median and spread of the ratios with ÷ without against the targets), and the
// collector's count once the queue has drained: every entry exactly once, none missing.
//   BENCH_SECONDS=5   BENCH_CONCURRENCY=8   BENCH_RUNS=3
//   BENCH_PROFILE=1 (V8 profiles per row: where the CPU goes, the Worker's isolate apart from the
//   local queue broker; BENCH_PROFILE_US, BENCH_PROFILE_DIR)   BENCH_SCENARIOS="KV read,issue"
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { SECONDS, TOKEN, call, cpuPerRequest, load, startBenchWorker, workerdCpu } from "./lib/bench-common.mjs";
import { startCollector } from "./lib/bench-collector.mjs";
import { rowProfiler } from "./lib/bench-profile.mjs";

// Without this the local queue logs one line per consumed batch.
process.env.WRANGLER_LOG = process.env.BENCH_LOG ?? "error";

const C = Number((process.env.BENCH_CONCURRENCY ?? "8").split(",").pop());
const RUNS = Number(process.env.BENCH_RUNS ?? "3");
const FILTER = 'not (path matches "/ocsp/")';
// BENCH_PROFILE=1: V8 CPU profiles of every isolate through workerd's inspector, per row
// (scripts/lib/bench-profile.mjs), printed as breakdowns after the tables, and the target table
// gains the CPU split (the local queue broker's share is not the Worker's on Cloudflare).
const PROFILE = process.env.BENCH_PROFILE === "1";
if (PROFILE) process.env.BENCH_INSPECTOR ??= "9329";
// BENCH_SCENARIOS="KV read,issue": only the rows whose name starts with one of these.
const ONLY = (process.env.BENCH_SCENARIOS ?? "").split(",").map((x) => x.trim()).filter((x) => x !== "");

/** The targets: throughput with ÷ without at least, workerd CPU with ÷ without at most. */
const TARGETS = {
  "KV read": { rps: 0.8, cpu: 1.3 },
  "issue EC P-256 (stored)": { rps: 0.8, cpu: 1.3 },
  "OCSP GET, device excluding public reads": { rps: 0.9, cpu: 1.1 },
};

/** An EC P-256 CA with a stored leaf; the GET path of openssl's OCSP request for the leaf. */
async function ocspPath(base, dir) {
  await call(base, "POST", "sys/mounts/ocsp-ec", { type: "pki" });
  const ca = await call(base, "POST", "ocsp-ec/root/generate/internal", { common_name: "Bench OCSP", key_type: "ec", not_after: "2036-01-01T00:00:00Z" });
  await call(base, "POST", "ocsp-ec/roles/leaf", { allow_any_name: true, key_type: "ec", ttl: "24h" });
  const leaf = await call(base, "POST", "ocsp-ec/issue/leaf", { common_name: "ocsp.bench.example" });
  const files = { ca: path.join(dir, "audit-ca.pem"), leaf: path.join(dir, "audit-leaf.pem"), req: path.join(dir, "audit.req") };
  writeFileSync(files.ca, `${ca.data.certificate}\n`);
  writeFileSync(files.leaf, `${leaf.data.certificate}\n`);
  execFileSync("openssl", ["ocsp", "-issuer", files.ca, "-cert", files.leaf, "-reqout", files.req, "-no_nonce"], { stdio: "ignore" });
  return `/v1/ocsp-ec/ocsp/${encodeURIComponent(readFileSync(files.req).toString("base64"))}`;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * The answering isolate's audit counts (sys/metrics `lanyard.audit.isolate.*`, read uncached;
 * one isolate locally): null on a revision without them (BENCH_REV before they existed).
 */
async function isolateCounts(base) {
  const res = await fetch(`${base}/v1/sys/metrics?format=prometheus`, { headers: { "x-service-token": TOKEN } }).catch(() => null);
  const text = res && res.ok ? await res.text() : "";
  const read = (name) => {
    const m = text.match(new RegExp(`^lanyard_audit_isolate_${name}\\{[^}]*\\} (\\d+)`, "m"));
    return m ? Number(m[1]) : null;
  };
  const out = { handoffs: read("handoffs"), flushes: read("flushes"), sendBatch: read("send_batch_calls") };
  return out.sendBatch === null ? null : out;
}

/** How long a row waits at most for its entries to reach the collector (healthy: ~1–2 s, the consumer's 1 s batch window). */
const DRAIN_MS = 30_000;

/**
 * Waits until the collector holds both entries of at least `pairs` requests in all and no
 * request entry is waiting for its response entry (the requests autocannon still had in flight
 * at the end of its window are audited too); polls every 20 ms, at most DRAIN_MS.
 */
async function drained(seen, pairs) {
  const t0 = Date.now();
  while (Date.now() - t0 < DRAIN_MS) {
    if (seen.pairs >= pairs && seen.open === 0) return { ms: Date.now() - t0, ok: true };
    await sleep(20);
  }
  return { ms: DRAIN_MS, ok: false };
}

/**
 * With BENCH_PROFILE=1, per scenario, from the rounds' profiles: the CPU with ÷ without of the
 * whole runtime less the profiler's own thread (/proc per thread, so it follows the table's
 * column), of the same less the local queue broker's isolate (Miniflare's simulator: on
 * Cloudflare the Queue is not the Worker's CPU; the broker's work outside its isolate, the RPC
 * into it, stays in), and of the Worker's isolate alone (its JS, GC and the C++ run for it, the
 * audit consumer included: what Cloudflare bills as the Worker's CPU, local D1 being remote there).
 */
function cpuSplit(profiler, scenarios) {
  const out = {};
  for (const s of scenarios) {
    const w = profiler.split(`${s.name}, one http device`);
    const wo = profiler.split(`${s.name}, none`);
    if (!w || !wo) continue;
    const ratio = (f) => +(f(w) / f(wo)).toFixed(2);
    out[s.name] = {
      "profiled runtime ms/req without→with": `${wo.total.toFixed(2)}→${w.total.toFixed(2)}`,
      "runtime less broker with÷without": ratio((x) => x.total - x.broker),
      "Worker isolate ms/req without→with": `${wo.worker.toFixed(3)}→${w.worker.toFixed(3)}`,
      "Worker isolate with÷without": ratio((x) => x.worker),
      "of it the consumer ms/req": +w.consumer.toFixed(3),
    };
  }
  return out;
}

async function main() {
  const { worker, base, dir, entrypoint } = await startBenchWorker();
  const profiler = PROFILE ? rowProfiler(Number(process.env.BENCH_INSPECTOR), entrypoint) : null;
  const collector = await startCollector();
  try {
    await call(base, "POST", "sys/mounts/kv", { type: "kv", options: { version: "2" } });
    await call(base, "POST", "kv/data/app", { data: { password: "bench-secret" } });
    await call(base, "POST", "sys/mounts/pki", { type: "pki" });
    await call(base, "POST", "pki/root/generate/internal", { common_name: "Bench Root", key_type: "ec", not_after: "2036-01-01T00:00:00Z" });
    await call(base, "POST", "pki/roles/ec", { allow_any_name: true, key_type: "ec", ttl: "24h", no_store: false });
    await call(base, "PUT", "sys/policies/acl/bench", { policy: 'path "kv/data/*" { capabilities = ["read"] }\npath "pki/issue/*" { capabilities = ["update"] }' });
    const token = (await call(base, "POST", "auth/token/create", { policies: ["bench"], ttl: "2h" })).auth.client_token;
    const headers = { "x-service-token": token, "content-type": "application/json" };
    const scenarios = [
      { name: "KV read", req: { path: "/v1/kv/data/app", method: "GET", headers } },
      { name: "issue EC P-256 (stored)", req: { path: "/v1/pki/issue/ec", method: "POST", headers, body: JSON.stringify({ common_name: "a.bench.example" }) } },
      { name: "OCSP GET, device excluding public reads", req: { path: await ocspPath(base, dir), method: "GET" }, unaudited: true },
    ].filter((s) => ONLY.length === 0 || ONLY.some((o) => s.name.startsWith(o)));
    for (const s of scenarios) await load(base, s.req, 2, 1); // warm-up

    // A row's CPU runs from its start until its own entries reached the collector (the drain
    // below), so no row is charged the delivery of another row's entries.
    const runRow = async (s, label, round) => {
      const pairs0 = collector.seen.pairs;
      const counts0 = label === "none" || s.unaudited ? null : await isolateCounts(base);
      const prof = profiler ? await profiler.begin(Object.keys(workerdCpu())) : null;
      const cpu0 = workerdCpu();
      const r = await load(base, s.req, C, SECONDS);
      const drain = label === "none" || s.unaudited ? { ms: 0, ok: true } : await drained(collector.seen, pairs0 + r.requests);
      // sendBatch calls (and hand-offs) per audited request: the row's counts ÷ the requests whose two entries arrived.
      const cpu1 = workerdCpu();
      await prof?.end(`${s.name}, ${label}`, r.requests);
      const counts1 = counts0 ? await isolateCounts(base) : null;
      const audReq = collector.seen.pairs - pairs0;
      const per = (k) => (counts0 && counts1 && audReq > 0 ? +((counts1[k] - counts0[k]) / audReq).toFixed(2) : "");
      return { round, audit: label, "sendBatch/req": per("sendBatch"), "hand-offs/req": per("handoffs"), scenario: s.name, requests: r.requests, errors: r.errors, "req/s": +r.rps.toFixed(1), "p50 ms": +r.p50.toFixed(1), "p99 ms": +r.p99.toFixed(1), "workerd CPU ms/req": +cpuPerRequest(cpu0, cpu1, r.requests).toFixed(3), "drain ms": drain.ok ? drain.ms : `>${drain.ms} (not drained)` };
    };
    const all = [];
    let audited = 0;
    // Each scenario's two rows run back to back, in alternating order (A B, then B A): on a
    // shared machine the load around a row drifts over seconds, and a ratio of two rows taken
    // far apart, or always in the same order, measures that drift as much as the audit.
    for (let round = 1; round <= RUNS; round++) {
      for (const s of scenarios) {
        const order = round % 2 === 1 ? ["none", "one http device"] : ["one http device", "none"];
        for (const label of order) {
          if (label !== "none") {
            await call(base, "POST", "sys/audit/bench-http", { type: "http", options: { address: collector.url, filter: FILTER } });
            // The isolate that enabled it sees it at once; others within 1 s (src/audit/audit-store.ts).
            await sleep(1100);
          }
          const row = await runRow(s, label, round);
          all.push(row);
          if (label !== "none") {
            if (!s.unaudited) audited += row.requests;
            await call(base, "DELETE", "sys/audit/bench-http");
            await sleep(1100);
          }
        }
      }
    }

    // Every row drained its own entries; this catches anything left (entries reach a healthy collector within ~10 s).
    const deadline = Date.now() + 60_000;
    let last = -1;
    while (Date.now() < deadline) {
      await sleep(2000);
      if (collector.seen.distinct === last && collector.seen.response >= audited) break;
      last = collector.seen.distinct;
    }

    console.log(`\nLanyard audit cost (local workerd, non-root token with a policy, concurrency ${C}, ${SECONDS}s per row, ${RUNS} rounds; device filter ${JSON.stringify(FILTER)})\n`);
    console.table(all);
    const sendBatchMedian = (name) => {
      const xs = all.filter((r) => r.scenario === name && r.audit !== "none" && r["sendBatch/req"] !== "").map((r) => r["sendBatch/req"]);
      return xs.length > 0 ? median(xs) : "n/a";
    };
    const split = profiler ? cpuSplit(profiler, scenarios) : null;
    const table = scenarios.map((s) => {
      const ratios = (key) =>
        Array.from({ length: RUNS }, (_, i) => {
          const w = all.find((r) => r.round === i + 1 && r.scenario === s.name && r.audit !== "none");
          const wo = all.find((r) => r.round === i + 1 && r.scenario === s.name && r.audit === "none");
          return w[key] / wo[key];
        });
      const rps = ratios("req/s");
      const cpu = ratios("workerd CPU ms/req");
      const t = TARGETS[s.name];
      const spread = (xs) => `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`;
      return {
        path: s.name,
        "throughput with÷without (median)": +median(rps).toFixed(2),
        "spread ": spread(rps),
        target: `≥ ${t.rps}`,
        "met ": median(rps) >= t.rps ? "yes" : "NO",
        "CPU with÷without (median)": +median(cpu).toFixed(2),
        spread: spread(cpu),
        "target ": `≤ ${t.cpu}`,
        met: median(cpu) <= t.cpu ? "yes" : "NO",
        "sendBatch/req (median)": sendBatchMedian(s.name),
        ...(split ? split[s.name] : {}),
      };
    });
    console.log("\nTargets (median of the rounds; spread = min–max):");
    console.table(table);
    const errors = all.reduce((n, r) => n + r.errors, 0);
    const { twice, unpaired } = await collector.summary();
    // autocannon counts the answers inside its window; requests in flight at its end are audited too.
    console.log(`failed requests: ${errors}`);
    console.log(`collector: ${collector.seen.distinct} distinct entries (${collector.seen.request} request, ${collector.seen.response} response) in ${collector.seen.batches} POSTs; entries received more than once: ${twice}; requests missing an entry: ${unpaired}; autocannon counted ${audited} audited answers (OCSP rows excluded by the filter)`);
    profiler?.print();
    console.log(`every entry exactly once: ${twice === 0 && unpaired === 0 && collector.seen.response >= audited ? "yes" : "NO"}`);
  } finally {
    await collector.close();
    await worker.dispose();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
