#!/usr/bin/env node
// PKI benchmark (`npm run bench -- issue`; scripts/run-bench.mjs runs every bench), the table of
// docs/pki-issuance-benchmark.md: Lanyard and its peer, cfssl, side by side in the same run.
// Lanyard: the Worker bundled once (edits to src/ during a run cannot reload it), run in the local
// runtime with BENCH_COUNT_D1 on (answered to the D1 probes only), loaded on the Worker's own
// socket (BENCH_TARGET=direct: Miniflare's entry Worker first; proxy: wrangler's dev proxy too). Set-up with the root token, load with a non-root token whose
// policy grants exactly the bench paths (scripts/lib/bench-pki.mjs). Rows: sys/health, issue
// stored, issue no_store, sign an EC P-256 CSR, OCSP GET, OCSP POST, CRL GET (+ RSA-2048 issue
// with BENCH_RSA=1). Peer: `cfssl serve` with an EC P-256 CA (scripts/lib/bench-cfssl.mjs),
// newcert next to both issue rows and sign next to sign; skipped, saying so, without cfssl.
// One load generator for both sides (hey if installed, else autocannon; scripts/lib/bench-load.mjs).
// Each run goes row by row, Lanyard then the peer; after a row's load, 20 sequential requests
// read X-Lanyard-D1 (D1 round trips per request in steady state). Server CPU per request is the
// process's utime+stime from /proc over the load (workerd's busiest process; cfssl's pid).
// The table gives median (min–max) over the runs (scripts/lib/bench-report.mjs), then the
// in-runtime WebCrypto floor (scripts/bench-floor-worker.ts).
//   BENCH_SECONDS=5 (per load)  BENCH_RUNS=3  BENCH_CONCURRENCY=8 (comma list)  BENCH_RSA=1
//   BENCH_TARGET=worker|direct|proxy  BENCH_LOADGEN=autocannon (force it over hey)  BENCH_FLOOR_N=500
//   BENCH_ROWS=<row ids, comma list: health,issue,nostore,sign,ocspGet,ocspPost,crl,rsa>
//   BENCH_REV=<git revision> (bench that committed tree instead of the checkout's src/)
import { rmSync } from "node:fs";
import path from "node:path";
import { unstable_startWorker } from "wrangler";
import { SECONDS, TARGET, cpuPerRequest, processCpu, root, startBenchWorker, workerdCpu } from "./lib/bench-common.mjs";
import { CFSSL_MISSING, cfsslRequests, startCfssl } from "./lib/bench-cfssl.mjs";
import { loadGenerator } from "./lib/bench-load.mjs";
import { d1PerRequest, lanyardRequests, setUpPki } from "./lib/bench-pki.mjs";
import { report } from "./lib/bench-report.mjs";

const RUNS = Number(process.env.BENCH_RUNS ?? "3");
const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? "8").split(",").map(Number);
const RSA = process.env.BENCH_RSA === "1";
// Iterations of the in-runtime floor; @peculiar/x509's row alone costs ~10 ms each on this machine.
const FLOOR_N = Number(process.env.BENCH_FLOOR_N ?? "500");

/** Print order; `peer` names the cfssl request loaded right after the row, `ref` the row a ratio divides by. */
const ALL_ROWS = [
  { id: "health", name: "sys/health" },
  { id: "issue", name: "issue stored (EC P-256)", peer: "newcert", peerName: "cfssl newcert" },
  { id: "nostore", name: "issue no_store (EC P-256)", peer: "newcert", peerName: "cfssl newcert" },
  { id: "sign", name: "sign EC P-256 CSR", peer: "sign", peerName: "cfssl sign" },
  { id: "ocspGet", name: "OCSP GET", ref: "health" },
  { id: "ocspPost", name: "OCSP POST", ref: "health" },
  { id: "crl", name: "CRL GET (DER)", ref: "health" },
  ...(RSA ? [{ id: "rsa", name: "issue RSA-2048" }] : []),
];
// BENCH_ROWS=sign,ocspGet loads only those rows (sys/health stays: the OCSP and CRL rows divide by it).
const ONLY = (process.env.BENCH_ROWS ?? "").split(",").map((s) => s.trim()).filter((s) => s !== "");
const ROWS = ONLY.length === 0 ? ALL_ROWS : ALL_ROWS.filter((r) => r.id === "health" || ONLY.includes(r.id));

function fixed(x, d) {
  return Number.isFinite(x) ? x.toFixed(d) : "n/a";
}

/** One measured load: the generator's figures plus the server's CPU per request over it. */
async function measure(gen, url, req, c, cpuBefore, cpuAfter) {
  const before = cpuBefore();
  const r = await gen.load(url, req, c, SECONDS);
  return { ...r, cpu: cpuAfter(before, r.requests) };
}

function errorNote(r) {
  if (r.errors === 0) return "";
  const codes = Object.entries(r.statuses).filter(([code]) => !code.startsWith("2")).map(([code, n]) => `${n}×${code}`);
  return `  errors: ${[...codes, r.firstError].filter(Boolean).join(", ")}`;
}

async function main() {
  const gen = loadGenerator();
  const { worker, dir, base } = await startBenchWorker({ BENCH_COUNT_D1: { type: "plain_text", value: "true" } });
  let peer = null;
  const stopPeer = () => peer?.stop();
  process.on("SIGINT", () => {
    stopPeer();
    process.exit(130);
  });
  try {
    const setup = await setUpPki(base);
    const reqs = lanyardRequests(setup);
    peer = await startCfssl();
    if (!peer) console.log(CFSSL_MISSING);
    const peerReqs = cfsslRequests(setup.csr);

    const lanyardCpu = [workerdCpu, (before, n) => cpuPerRequest(before, workerdCpu(), n)];
    const peerCpu = [() => processCpu(peer.pid), (before, n) => (n > 0 ? ((processCpu(peer.pid) - before) * 1000) / n : NaN)];

    console.log(`load generator: ${gen.name}; ${RUNS} run(s) of ${SECONDS} s per row, concurrency ${CONCURRENCY.join(",")}`);
    // Warm-up: first requests compile code paths, open D1 and fill the per-isolate caches.
    for (const row of ROWS) {
      await gen.load(`${base}${reqs[row.id].path}`, reqs[row.id], 2, 1);
      if (peer && row.peer) await gen.load(`${peer.base}${peerReqs[row.peer].path}`, peerReqs[row.peer], 2, 1);
    }

    const samples = {};
    for (let run = 1; run <= RUNS; run++) {
      for (const row of ROWS) {
        for (const c of CONCURRENCY) {
          const req = reqs[row.id];
          const lanyard = await measure(gen, `${base}${req.path}`, req, c, ...lanyardCpu);
          const probe = await d1PerRequest(base, req);
          lanyard.d1 = probe.d1;
          let line = `run ${run} c=${c} ${row.name}: ${fixed(lanyard.rps, 1)} req/s, ${fixed(lanyard.cpu, 2)} ms CPU/req, D1 ${fixed(probe.d1, 2)}${probe.failed ? ` (${probe.failed} of 20 probes failed, first: ${probe.firstFailure})` : ""}${errorNote(lanyard)}`;
          let peerSample;
          if (peer && row.peer) {
            const pr = peerReqs[row.peer];
            peerSample = await measure(gen, `${peer.base}${pr.path}`, pr, c, ...peerCpu);
            line += ` | ${row.peerName}: ${fixed(peerSample.rps, 1)} req/s, ${fixed(peerSample.cpu, 2)} ms CPU/req${errorNote(peerSample)}`;
          }
          console.log(line);
          ((samples[row.id] ??= {})[c] ??= []).push({ lanyard, peer: peerSample });
        }
      }
    }

    const where = TARGET === "proxy" ? "through wrangler's dev proxy" : TARGET === "direct" ? "through Miniflare's entry Worker" : "on the Worker's own workerd socket";
    console.log(
      `\nLanyard PKI vs cfssl (local workerd, this machine; load by ${gen.name} ${where}; non-root token; ` +
        `${RUNS} run(s) × ${SECONDS} s; median (min–max); CPU = server process utime+stime from /proc ÷ requests)\n`,
    );
    if (!peer) console.log(`${CFSSL_MISSING}\n`);
    console.log(report(ROWS, samples, CONCURRENCY));
  } finally {
    stopPeer();
    await worker.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
  await floor();
}

/** The floor Worker's figures, in print order (a field it does not return is left out). */
const FLOOR_ROWS = [
  ["floorMs", "WebCrypto floor: key pair + export + 1 signature"],
  ["engineMs", "engine: + SKI, subject, extensions, TBS encoding, PEM"],
  ["libraryMs", "same with @peculiar/x509's encoder"],
  ["issueMs", "issue handler without serial reservation and D1 write"],
  ["csrMs", "CSR alone: PEM decode, parse, verify its signature"],
  ["signMs", "sign handler without serial reservation and D1 write"],
];

/** The in-runtime CPU of one EC P-256 leaf without I/O (scripts/bench-floor-worker.ts). */
async function floor() {
  let floorWorker;
  try {
    floorWorker = await unstable_startWorker({
      config: path.join(root, "scripts", "bench-floor.wrangler.toml"),
      dev: { persist: false, server: { hostname: "127.0.0.1", port: 0 }, inspector: false, watch: false, logLevel: "error" },
    });
    await floorWorker.ready;
    const floorBase = (await floorWorker.url).toString().replace(/\/$/, "");
    const f = await (await fetch(`${floorBase}/?n=${FLOOR_N}`)).json();
    console.log(`\nIn-runtime CPU per EC P-256 certificate (workerd, ${f.iterations} iterations, no I/O):`);
    console.table(
      FLOOR_ROWS.filter(([key]) => Number.isFinite(f[key])).map(([key, label]) => ({
        path: label,
        "ms/cert": +f[key].toFixed(3),
        "x floor": +(f[key] / f.floorMs).toFixed(1),
      })),
    );
  } catch (e) {
    // The floor Worker imports src/ directly; a refactor there must not lose the table above.
    console.log(`\n(in-runtime floor skipped: ${e instanceof Error ? e.message : String(e)})`);
  } finally {
    await floorWorker?.dispose();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
