#!/usr/bin/env node
// PKI issuance benchmark (`npm run bench -- issue`; scripts/run-bench.mjs runs every bench):
// starts the Worker in the local runtime (wrangler's programmatic API, a throwaway D1/DO state
// directory), drives it over HTTP with autocannon and prints requests/s and p50/p99 latency for
//   (a) issue with a fresh EC P-256 key, (b) sign a pre-made EC P-256 CSR, (c) issue RSA-2048,
// at concurrency 1 and 8, plus the WebCrypto floor of (a) and the engine's own CPU per
// certificate, both measured inside workerd (scripts/bench-floor-worker.ts), and the CPU the
// Worker's workerd process spent per request during each run (read from /proc, Linux only).
// The Worker is bundled once into a temporary directory first, so edits to src/ during a run
// cannot reload it. By default the load goes straight to the Worker's workerd socket: wrangler's
// dev proxy (a second workerd hop in front of it) cost about as much as the Worker itself in the
// profile; BENCH_TARGET=proxy measures through the proxy instead.
//   BENCH_SECONDS=5 (per run)   BENCH_RSA_SECONDS=5   BENCH_CONCURRENCY=1,8   BENCH_TARGET=direct|proxy
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { unstable_startWorker } from "wrangler";
import { CONCURRENCY, SECONDS, TARGET, TOKEN, call, cpuPerRequest, load, root, startBenchWorker, workerdCpu } from "./lib/bench-common.mjs";

const RSA_SECONDS = Number(process.env.BENCH_RSA_SECONDS ?? SECONDS);

/** A JSON API request with the bench token, as lib/bench-common.mjs `load` takes it. */
function apiRequest(p, body, method = "POST") {
  const headers = { "x-service-token": TOKEN, "content-type": "application/json" };
  return { path: `/v1/${p}`, method, headers, body: method === "GET" ? undefined : JSON.stringify(body) };
}

async function main() {
  const { worker, dir, base } = await startBenchWorker();
  const floorWorker = await unstable_startWorker({
    config: path.join(root, "scripts", "bench-floor.wrangler.toml"),
    dev: { persist: false, server: { hostname: "127.0.0.1", port: 0 }, inspector: false, watch: false, logLevel: "error" },
  });
  try {
    await floorWorker.ready;
    const floorBase = (await floorWorker.url).toString().replace(/\/$/, "");

    // Set-up: one mount, an EC P-256 root, three roles, and a CSR made by openssl.
    await call(base, "POST", "sys/mounts/bench", { type: "pki" });
    await call(base, "POST", "bench/root/generate/internal", { common_name: "Bench Root", key_type: "ec", not_after: "2036-01-01T00:00:00Z" });
    await call(base, "POST", "bench/roles/ec", { allow_any_name: true, key_type: "ec", ttl: "24h" });
    await call(base, "POST", "bench/roles/rsa", { allow_any_name: true, key_type: "rsa", key_bits: 2048, ttl: "24h" });
    const csrDir = mkdtempSync(path.join(tmpdir(), "lanyard-bench-csr-"));
    execFileSync("openssl", ["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path.join(csrDir, "k.pem"), "-subj", "/CN=csr.bench.example", "-out", path.join(csrDir, "r.pem")], { stdio: "ignore" });
    const csr = readFileSync(path.join(csrDir, "r.pem"), "utf8");
    rmSync(csrDir, { recursive: true, force: true });

    // Two reference rows first: the HTTP stack alone, and the stack plus authentication, the mount
    // lookup and one D1 read. The issuance rows pay these too.
    const scenarios = [
      { name: "(ref) GET sys/health", path: "sys/health", body: {}, seconds: Math.min(SECONDS, 2), method: "GET" },
      { name: "(ref) GET bench/config/urls", path: "bench/config/urls", body: {}, seconds: Math.min(SECONDS, 2), method: "GET" },
      { name: "(a) issue EC P-256", path: "bench/issue/ec", body: { common_name: "a.bench.example" }, seconds: SECONDS },
      { name: "(b) sign EC P-256 CSR", path: "bench/sign/ec", body: { csr, common_name: "b.bench.example" }, seconds: SECONDS },
      { name: "(c) issue RSA-2048", path: "bench/issue/rsa", body: { common_name: "c.bench.example" }, seconds: RSA_SECONDS },
    ];
    // Warm-up: first requests compile code paths and open the D1/DO connections.
    for (const s of scenarios) await load(base, apiRequest(s.path, s.body, s.method), 2, 1);

    const rows = [];
    for (const s of scenarios) {
      for (const c of CONCURRENCY) {
        const cpu0 = workerdCpu();
        const r = await load(base, apiRequest(s.path, s.body, s.method), c, s.seconds);
        rows.push({
          scenario: s.name,
          concurrency: c,
          requests: r.requests,
          errors: r.errors,
          "req/s": +r.rps.toFixed(1),
          "p50 ms": +r.p50.toFixed(1),
          "p99 ms": +r.p99.toFixed(1),
          "workerd CPU ms/req": +cpuPerRequest(cpu0, workerdCpu(), r.requests).toFixed(2),
        });
      }
    }
    console.log(`\nLanyard PKI benchmark (local workerd, this machine; load by autocannon ${TARGET === "proxy" ? "through wrangler's dev proxy" : "straight to the Worker's workerd socket, bypassing wrangler's dev proxy"})\n`);
    console.table(rows);
    const floor = await (await fetch(`${floorBase}/?n=2000`)).json();
    console.log(`\nIn-runtime CPU per EC P-256 leaf (workerd, ${floor.iterations} iterations, no I/O):`);
    console.table([
      { path: "WebCrypto floor: key pair + export + 1 signature", "ms/cert": +floor.floorMs.toFixed(3), "x floor": 1 },
      { path: "engine: + SKI, subject, extensions, TBS encoding, PEM", "ms/cert": +floor.engineMs.toFixed(3), "x floor": +(floor.engineMs / floor.floorMs).toFixed(1) },
      { path: "same with @peculiar/x509's encoder", "ms/cert": +floor.libraryMs.toFixed(3), "x floor": +(floor.libraryMs / floor.floorMs).toFixed(1) },
    ]);
    const a1 = rows.find((r) => r.scenario.startsWith("(a)") && r.concurrency === 1);
    if (a1) {
      const perCert = 1000 / a1["req/s"];
      console.log(`(a) at concurrency 1 over HTTP: ${perCert.toFixed(2)} ms per certificate end to end (D1, Durable Object and HTTP included).`);
    }
  } finally {
    await worker.dispose();
    await floorWorker.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
