#!/usr/bin/env node
// `npm run bench`: starts the Worker in the local runtime (wrangler's programmatic API, a
// throwaway D1/DO state directory), drives it over HTTP and prints requests/s and p50/p99
// latency for
//   (a) issue with a fresh EC P-256 key, (b) sign a pre-made EC P-256 CSR, (c) issue RSA-2048,
// at concurrency 1 and 8, plus the WebCrypto floor of (a) and the engine's own CPU per
// certificate, both measured inside workerd (scripts/bench-floor-worker.ts).
// The load generator is a small closed loop over Node's fetch (keep-alive): each of C workers
// sends its next request when the previous one answers.
//   BENCH_SECONDS=5 (per run)   BENCH_RSA_SECONDS=5   BENCH_CONCURRENCY=1,8
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { unstable_startWorker } from "wrangler";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const TOKEN = "bench-root-token-0123456789";
const SEAL_KEY = Buffer.alloc(32, 7).toString("base64");
const SECONDS = Number(process.env.BENCH_SECONDS ?? "5");
const RSA_SECONDS = Number(process.env.BENCH_RSA_SECONDS ?? SECONDS);
const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? "1,8").split(",").map(Number);
for (const [k, v] of Object.entries({ WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false", WRANGLER_HIDE_BANNER: "true" })) {
  process.env[k] = v;
}

async function call(base, method, p, body, token = TOKEN) {
  const res = await fetch(`${base}/v1/${p}`, {
    method,
    headers: { "x-service-token": token, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** Closed-loop load: `concurrency` loops for `seconds`; returns latencies (ms) and the wall time. */
async function load(base, p, body, concurrency, seconds, method = "POST") {
  const latencies = [];
  let errors = 0;
  const end = performance.now() + seconds * 1000;
  const start = performance.now();
  const json = JSON.stringify(body);
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        const res = await fetch(`${base}/v1/${p}`, {
          method,
          headers: { "x-service-token": TOKEN, "content-type": "application/json" },
          body: method === "GET" ? undefined : json,
        });
        await res.arrayBuffer();
        if (res.status !== 200) errors++;
        latencies.push(performance.now() - t);
      }
    }),
  );
  return { latencies, errors, wall: (performance.now() - start) / 1000 };
}

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function main() {
  const dir = mkdtempSync(path.join(tmpdir(), "lanyard-bench-"));
  const wrangler = path.join(root, "node_modules", ".bin", "wrangler");
  execFileSync(wrangler, ["d1", "migrations", "apply", "DB", "--local", "--persist-to", dir], { cwd: root, stdio: "ignore" });
  const worker = await unstable_startWorker({
    config: path.join(root, "wrangler.toml"),
    bindings: {
      ENVIRONMENT: { type: "plain_text", value: "development" },
      ROOT_TOKEN: { type: "plain_text", value: TOKEN },
      SEAL_KEY: { type: "plain_text", value: SEAL_KEY },
    },
    dev: { persist: dir, server: { hostname: "127.0.0.1", port: 0 }, inspector: false, watch: false, logLevel: process.env.BENCH_LOG ?? "error" },
  });
  const floorWorker = await unstable_startWorker({
    config: path.join(root, "scripts", "bench-floor.wrangler.toml"),
    dev: { persist: false, server: { hostname: "127.0.0.1", port: 0 }, inspector: false, watch: false, logLevel: "error" },
  });
  try {
    await worker.ready;
    await floorWorker.ready;
    const base = (await worker.url).toString().replace(/\/$/, "");
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
    for (const s of scenarios) await load(base, s.path, s.body, 2, 0.5, s.method);

    const rows = [];
    for (const s of scenarios) {
      for (const c of CONCURRENCY) {
        const r = await load(base, s.path, s.body, c, s.seconds, s.method);
        const sorted = [...r.latencies].sort((x, y) => x - y);
        rows.push({
          scenario: s.name,
          concurrency: c,
          requests: r.latencies.length,
          errors: r.errors,
          "req/s": +(r.latencies.length / r.wall).toFixed(1),
          "p50 ms": +pct(sorted, 50).toFixed(1),
          "p99 ms": +pct(sorted, 99).toFixed(1),
        });
      }
    }
    console.log("\nLanyard PKI benchmark (local workerd, this machine)\n");
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
