#!/usr/bin/env node
// Latency at the edge (`npm run bench -- latency`, docs/pki-issuance-benchmark.md "Latency at the
// edge"): locally a D1 round trip costs about 1 ms; on Cloudflare a Worker far from the database's
// primary waits tens of milliseconds for each. For each delay in BENCH_D1_DELAYS the Worker is
// started with BENCH_D1_DELAY_MS=<delay> (every D1 round trip, the Authority Durable Object's too,
// waits that long first; src/core/db/bench-d1.ts) and each row is loaded in a closed loop with a
// non-root token whose policies grant the rows' paths: p50/p99 latency, then 20 sequential probes
// read X-Lanyard-D1 (round trips per request in steady state) and X-Lanyard-R2 (calls to the
// certificate bodies' bucket, delayed alike; a stored issue's put overlaps its D1 batch). The table ends with the targets:
// a stored issue or sign waits one round trip plus under 5 ms, a KV read one round trip, OCSP,
// CRL and a warm no_store issue none (the time judged as what the delay adds to p50 at delay 0).
//   BENCH_D1_DELAYS=0,20,50,100  BENCH_SECONDS=4 (per row)  BENCH_CONCURRENCY=1 (one number)
//   BENCH_ROWS=<ids: issue,nostore,sign,kvRead,kvWrite,ocspGet,crl>  BENCH_REV=<git revision>
import { rmSync } from "node:fs";
import { call, load, startBenchWorker } from "./lib/bench-common.mjs";
import { d1PerRequest, lanyardRequests, setUpPki } from "./lib/bench-pki.mjs";

const DELAYS = (process.env.BENCH_D1_DELAYS ?? "0,20,50,100").split(",").map(Number);
const SECONDS = Number(process.env.BENCH_SECONDS ?? "4");
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? "1");
/** Slack on the round-trip targets: a cached read is refreshed once per CACHE_TTL_MS, and such a refresh can fall inside the probe. */
const SLACK = 0.25;

/** Rows in print order; `trips` is the target's round trips, `extraMs` what it may add to them at p50. */
const ALL_ROWS = [
  { id: "issue", name: "issue EC P-256 stored", trips: 1, extraMs: 5 },
  { id: "nostore", name: "issue no_store (warm)", trips: 0, extraMs: 5 },
  { id: "sign", name: "sign EC P-256 CSR", trips: 1, extraMs: 5 },
  { id: "kvRead", name: "KV-v2 read", trips: 1, extraMs: 5 },
  { id: "kvWrite", name: "KV-v2 write", trips: null },
  { id: "ocspGet", name: "OCSP GET", trips: 0, extraMs: 5 },
  { id: "crl", name: "CRL GET (DER)", trips: 0, extraMs: 5 },
];
const ONLY = (process.env.BENCH_ROWS ?? "").split(",").map((s) => s.trim()).filter((s) => s !== "");
const ROWS = ONLY.length === 0 ? ALL_ROWS : ALL_ROWS.filter((r) => ONLY.includes(r.id));

const KV_MOUNT = "benchkv";
const KV_POLICY = `
path "${KV_MOUNT}/data/bench" { capabilities = ["create", "update", "read"] }
`;

/** The PKI set-up plus a KV-v2 mount with one key, and a token holding both policies. */
async function setUp(base) {
  const pki = await setUpPki(base);
  await call(base, "POST", `sys/mounts/${KV_MOUNT}`, { type: "kv", options: { version: "2" } });
  await call(base, "POST", `${KV_MOUNT}/data/bench`, { data: { password: "bench-value" } });
  await call(base, "POST", "sys/policies/acl/bench-kv", { policy: KV_POLICY });
  const created = await call(base, "POST", "auth/token/create", { policies: ["bench", "bench-kv"], no_default_policy: true, ttl: "4h" });
  const reqs = lanyardRequests({ ...pki, token: created.auth.client_token });
  const auth = { "x-service-token": created.auth.client_token };
  reqs.kvRead = { path: `/v1/${KV_MOUNT}/data/bench`, method: "GET", headers: auth };
  reqs.kvWrite = { path: `/v1/${KV_MOUNT}/data/bench`, method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ data: { password: "bench-value-2" } }) };
  return reqs;
}

/** One delay: a fresh Worker, set-up, a warm-up of each row, then each row's load and probe. */
async function measureDelay(delay) {
  const { worker, dir, base } = await startBenchWorker({
    BENCH_COUNT_D1: { type: "plain_text", value: "true" },
    BENCH_D1_DELAY_MS: { type: "plain_text", value: String(delay) },
  });
  try {
    const reqs = await setUp(base);
    for (const row of ROWS) await load(base, reqs[row.id], CONCURRENCY, 1);
    const out = {};
    for (const row of ROWS) {
      const r = await load(base, reqs[row.id], CONCURRENCY, SECONDS);
      const probe = await d1PerRequest(base, reqs[row.id]);
      out[row.id] = { ...r, d1: probe.d1, r2: probe.r2 };
      const failed = probe.failed ? ` (${probe.failed} of 20 probes failed, first: ${probe.firstFailure})` : "";
      console.log(`delay ${delay} ms ${row.name}: p50 ${r.p50} ms, p99 ${r.p99} ms, ${r.requests} requests, ${r.errors} errors, D1 ${probe.d1.toFixed(2)}, R2 ${probe.r2.toFixed(2)}${failed}`);
    }
    return out;
  } finally {
    await worker.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Whether a row met its target at one delay: round trips, and the time they add. The time is
 * p50 minus the same row's p50 at delay 0 (when 0 was measured: what the delay added, free of
 * the machine's own latency, which on a shared machine is most of it), else p50 itself; it must
 * stay within trips × delay + extraMs.
 */
function verdict(row, delay, m, base) {
  if (row.trips === null) return "no target";
  if (!m || m.errors > 0 || !Number.isFinite(m.d1)) return "not judged";
  const tripsOk = m.d1 <= row.trips + SLACK;
  const added = base ? m.p50 - base.p50 : m.p50;
  const timeOk = added <= row.trips * delay + row.extraMs;
  return tripsOk && timeOk ? "met" : `missed (${tripsOk ? "" : "round trips"}${!tripsOk && !timeOk ? ", " : ""}${timeOk ? "" : "time"})`;
}

async function main() {
  const results = {};
  for (const delay of DELAYS) results[delay] = await measureDelay(delay);
  console.log(`\nLatency at the edge: every D1 round trip and R2 call delayed; local workerd, concurrency ${CONCURRENCY}, ${SECONDS} s per row; non-root token`);
  console.log(`targets: stored issue, sign and KV read ≤ 1 round trip, adding ≤ delay + 5 ms to p50; no_store, OCSP, CRL 0, adding ≤ 5 ms (round trips +${SLACK} slack; added = p50 − p50 at delay 0 when measured)\n`);
  const header = ["path", ...DELAYS.map((d) => `${d} ms: p50 / p99`), "D1/req", "R2/req", "target"];
  const lines = [header, header.map(() => "---")];
  for (const row of ROWS) {
    const cells = DELAYS.map((d) => {
      const m = results[d][row.id];
      return `${m.p50} / ${m.p99}`;
    });
    const trips = DELAYS.map((d) => results[d][row.id].d1.toFixed(2)).join(", ");
    const verdicts = DELAYS.map((d) => verdict(row, d, results[d][row.id], results[0]?.[row.id]));
    const same = verdicts.every((v) => v === verdicts[0]);
    const r2 = DELAYS.map((d) => results[d][row.id].r2.toFixed(2)).join(", ");
    lines.push([row.name, ...cells, trips, r2, same ? verdicts[0] : verdicts.map((v, i) => `${DELAYS[i]}: ${v}`).join("; ")]);
  }
  console.log(lines.map((l) => `| ${l.join(" | ")} |`).join("\n"));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
