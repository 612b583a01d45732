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
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { unstable_DevEnv, unstable_startWorker } from "wrangler";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const TOKEN = "bench-root-token-0123456789";
const SEAL_KEY = Buffer.alloc(32, 7).toString("base64");
const SECONDS = Number(process.env.BENCH_SECONDS ?? "5");
const RSA_SECONDS = Number(process.env.BENCH_RSA_SECONDS ?? SECONDS);
const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? "1,8").split(",").map(Number);
const TARGET = process.env.BENCH_TARGET === "proxy" ? "proxy" : "direct";
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

/**
 * Closed-loop load with autocannon: `concurrency` connections, each sending its next request
 * when the previous one answers, for `seconds`.
 */
async function load(base, p, body, concurrency, seconds, method = "POST") {
  const result = await autocannon({
    url: `${base}/v1/${p}`,
    method,
    headers: { "x-service-token": TOKEN, "content-type": "application/json" },
    body: method === "GET" ? undefined : JSON.stringify(body),
    connections: concurrency,
    duration: seconds,
  });
  const requests = result.requests.total;
  return {
    requests,
    errors: result.errors + result.timeouts + result.non2xx,
    rps: requests / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
  };
}

/** CPU seconds (user + system) used so far by each workerd child of this process; {} off Linux. */
function workerdCpu() {
  const out = {};
  if (!existsSync("/proc/self/stat")) return out;
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[1]) !== process.pid || !readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("workerd")) continue;
      out[pid] = (Number(fields[11]) + Number(fields[12])) / 100; // utime + stime, in clock ticks (USER_HZ = 100)
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return out;
}

/** The busiest workerd's CPU per request between two readings (the Worker's own process). */
function cpuPerRequest(before, after, requests) {
  let most = 0;
  for (const [pid, t] of Object.entries(after)) most = Math.max(most, t - (before[pid] ?? t));
  return requests > 0 ? (most * 1000) / requests : NaN;
}

/** Bundles the Worker once, so the benchmark runs a fixed build whatever happens in src/. */
function bundle(outdir) {
  const wrangler = path.join(root, "node_modules", ".bin", "wrangler");
  execFileSync(wrangler, ["deploy", "--dry-run", "--outdir", outdir, "-c", path.join(root, "wrangler.toml")], { cwd: root, stdio: "ignore" });
  return path.join(outdir, "index.js");
}

/**
 * Starts the bundled Worker; resolves with the proxy URL and the Worker's own workerd URL
 * (taken from the dev environment's reloadComplete event, which wrangler does not expose).
 */
async function startBundled(entrypoint, options) {
  const devEnv = new unstable_DevEnv();
  let resolveDirect;
  const direct = new Promise((resolve) => (resolveDirect = resolve));
  const dispatchEvent = devEnv.dispatch.bind(devEnv);
  devEnv.dispatch = (event) => {
    if (event.type === "reloadComplete") {
      const u = event.proxyData.userWorkerUrl;
      resolveDirect(`${u.protocol}//${u.hostname}:${u.port}`);
    }
    return dispatchEvent(event);
  };
  const worker = await devEnv.startWorker({ ...options, entrypoint, build: { bundle: false } });
  await worker.ready;
  const proxyUrl = (await worker.url).toString().replace(/\/$/, "");
  return { worker, proxyUrl, directUrl: await direct };
}

async function main() {
  const dir = mkdtempSync(path.join(tmpdir(), "lanyard-bench-"));
  const wrangler = path.join(root, "node_modules", ".bin", "wrangler");
  execFileSync(wrangler, ["d1", "migrations", "apply", "DB", "--local", "--persist-to", dir], { cwd: root, stdio: "ignore" });
  const entrypoint = bundle(path.join(dir, "bundle"));
  const { worker, proxyUrl, directUrl } = await startBundled(entrypoint, {
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
    await floorWorker.ready;
    const base = TARGET === "proxy" ? proxyUrl : directUrl;
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
    for (const s of scenarios) await load(base, s.path, s.body, 2, 1, s.method);

    const rows = [];
    for (const s of scenarios) {
      for (const c of CONCURRENCY) {
        const cpu0 = workerdCpu();
        const r = await load(base, s.path, s.body, c, s.seconds, s.method);
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
