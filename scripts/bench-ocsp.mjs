#!/usr/bin/env node
// OCSP benchmark: starts the Worker in the local runtime (wrangler's programmatic API, a
// throwaway D1/DO state directory), makes an EC P-256 and an RSA-2048 root with one leaf each,
// lets openssl write the OCSP requests, then drives the responder over HTTP and prints
// responses/s and p50/p99 latency at concurrency 1 and 8 for
//   (a) POST ocsp, EC issuer   (b) GET ocsp/<base64>, EC issuer   (c) POST ocsp, RSA-2048 issuer
//   (d) POST ocsp with a nonce, EC issuer, revoked leaf (when the revoke endpoint exists).
// The load generator is the closed loop of scripts/bench.mjs: each of C workers sends its next
// request when the previous one answers; every answer is checked to be a 200 OCSP response.
//   BENCH_SECONDS=5 (per run)   BENCH_CONCURRENCY=1,8
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { unstable_startWorker } from "wrangler";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const TOKEN = "bench-root-token-0123456789";
const SEAL_KEY = Buffer.alloc(32, 7).toString("base64");
const SECONDS = Number(process.env.BENCH_SECONDS ?? "5");
const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? "1,8").split(",").map(Number);
for (const [k, v] of Object.entries({ WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false", WRANGLER_HIDE_BANNER: "true" })) {
  process.env[k] = v;
}

async function call(base, method, p, body) {
  const res = await fetch(`${base}/v1/${p}`, {
    method,
    headers: { "x-service-token": TOKEN, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** A CA mount with one leaf; returns the OCSP request openssl writes for the leaf. */
async function caWithLeaf(base, dir, mount, keyType, nonce) {
  await call(base, "POST", `sys/mounts/${mount}`, { type: "pki" });
  const ca = await call(base, "POST", `${mount}/root/generate/internal`, { common_name: `Bench OCSP ${keyType}`, key_type: keyType, key_bits: keyType === "rsa" ? 2048 : 256, not_after: "2036-01-01T00:00:00Z" });
  await call(base, "POST", `${mount}/roles/leaf`, { allow_any_name: true, key_type: "ec", ttl: "24h" });
  const leaf = await call(base, "POST", `${mount}/issue/leaf`, { common_name: "ocsp.bench.example" });
  const files = { ca: path.join(dir, `${mount}-ca.pem`), leaf: path.join(dir, `${mount}-leaf.pem`), req: path.join(dir, `${mount}.req`) };
  writeFileSync(files.ca, `${ca.data.certificate}\n`);
  writeFileSync(files.leaf, `${leaf.data.certificate}\n`);
  execFileSync("openssl", ["ocsp", "-issuer", files.ca, "-cert", files.leaf, "-reqout", files.req, ...(nonce ? [] : ["-no_nonce"])], { stdio: "ignore" });
  return { der: readFileSync(files.req), serial: leaf.data.serial_number, files };
}

/** Closed-loop load: `concurrency` loops for `seconds`; returns latencies (ms), errors and wall time. */
async function load(send, concurrency, seconds) {
  const latencies = [];
  let errors = 0;
  const end = performance.now() + seconds * 1000;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        const res = await send();
        const body = new Uint8Array(await res.arrayBuffer());
        // 30 82 .. .. 0a 01 00: a successful OCSPResponse.
        if (res.status !== 200 || res.headers.get("content-type") !== "application/ocsp-response" || body[4] !== 0x0a || body[6] !== 0) errors++;
        latencies.push(performance.now() - t);
      }
    }),
  );
  return { latencies, errors, wall: (performance.now() - start) / 1000 };
}

/**
 * CPU time (ms) used so far by each workerd process this script started, by pid (Linux /proc;
 * null elsewhere). Wall-clock rates swing with whatever else the machine runs; CPU per response does
 * not, and it bounds what one workerd thread can serve.
 */
function workerdCpuMs() {
  try {
    const procs = readdirSync("/proc").filter((d) => /^\d+$/.test(d));
    const info = new Map();
    for (const pid of procs) {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        const close = stat.lastIndexOf(")");
        const comm = stat.slice(stat.indexOf("(") + 1, close);
        const f = stat.slice(close + 2).split(" ");
        info.set(pid, { comm, ppid: f[1], ticks: Number(f[11]) + Number(f[12]) });
      } catch {
        // the process ended meanwhile
      }
    }
    const mine = (pid) => {
      for (let p = pid, i = 0; p && p !== "0" && i < 50; p = info.get(p)?.ppid, i++) if (p === String(process.pid)) return true;
      return false;
    };
    const out = new Map();
    for (const [pid, v] of info) if (v.comm.startsWith("workerd") && mine(pid)) out.set(pid, v.ticks * 10); // USER_HZ is 100 on Linux
    return out;
  } catch {
    return null;
  }
}

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function main() {
  const dir = mkdtempSync(path.join(tmpdir(), "lanyard-bench-ocsp-"));
  const wrangler = path.join(root, "node_modules", ".bin", "wrangler");
  execFileSync(wrangler, ["d1", "migrations", "apply", "DB", "--local", "--persist-to", dir], { cwd: root, stdio: "ignore" });
  // Bundle once up front and run that bundle (as scripts/bench-sync.mjs does): the dev server's
  // bundler watches src/ whatever dev.watch says, and an edit mid-run would reload the Worker
  // under the measurement.
  const buildDir = path.join(dir, "build");
  execFileSync(wrangler, ["deploy", "--dry-run", "--outdir", buildDir], { cwd: root, stdio: "ignore" });
  const worker = await unstable_startWorker({
    config: path.join(root, "wrangler.toml"),
    entrypoint: path.join(buildDir, "index.js"),
    build: { bundle: false, moduleRoot: buildDir },
    bindings: {
      ENVIRONMENT: { type: "plain_text", value: "development" },
      ROOT_TOKEN: { type: "plain_text", value: TOKEN },
      SEAL_KEY: { type: "plain_text", value: SEAL_KEY },
    },
    dev: { persist: dir, server: { hostname: "127.0.0.1", port: 0 }, inspector: false, watch: false, logLevel: process.env.BENCH_LOG ?? "error" },
  });
  try {
    await worker.ready;
    const base = (await worker.url).toString().replace(/\/$/, "");
    const ec = await caWithLeaf(base, dir, "ocsp-ec", "ec", false);
    const rsa = await caWithLeaf(base, dir, "ocsp-rsa", "rsa", false);
    const ecNonce = await caWithLeaf(base, dir, "ocsp-ec-revoked", "ec", true);

    const post = (mount, der) => () => fetch(`${base}/v1/${mount}/ocsp`, { method: "POST", headers: { "content-type": "application/ocsp-request" }, body: der });
    const getUrl = `${base}/v1/ocsp-ec/ocsp/${encodeURIComponent(ec.der.toString("base64"))}`;
    const scenarios = [
      // References: the HTTP stack alone (no D1); the /v1 pipeline's namespace and mount lookups
      // alone (a mount that does not exist: 403); those plus one config read (a malformed OCSP
      // request); and a public PKI read (config and issuers) for comparison.
      { name: "(ref) GET sys/health", send: () => fetch(`${base}/v1/sys/health`), seconds: Math.min(SECONDS, 2), ref: true },
      { name: "(ref) GET nomount/ocsp (lookups only)", send: () => fetch(`${base}/v1/nomount/ocsp`), seconds: Math.min(SECONDS, 2), ref: true },
      { name: "(ref) POST ocsp, malformed", send: post("ocsp-ec", Buffer.from([1, 2, 3])), seconds: Math.min(SECONDS, 2), ref: true },
      { name: "(ref) GET ocsp-ec/ca/pem", send: () => fetch(`${base}/v1/ocsp-ec/ca/pem`), seconds: Math.min(SECONDS, 2), ref: true },
      { name: "(a) POST ocsp, EC P-256 issuer", send: post("ocsp-ec", ec.der) },
      { name: "(b) GET ocsp/<base64>, EC P-256 issuer", send: () => fetch(getUrl) },
      { name: "(c) POST ocsp, RSA-2048 issuer", send: post("ocsp-rsa", rsa.der) },
    ];
    const revoke = await fetch(`${base}/v1/ocsp-ec-revoked/revoke`, {
      method: "POST",
      headers: { "x-service-token": TOKEN, "content-type": "application/json" },
      body: JSON.stringify({ serial_number: ecNonce.serial }),
    });
    await revoke.arrayBuffer();
    scenarios.push({ name: `(d) POST ocsp + nonce, EC, ${revoke.status === 200 ? "revoked" : "good (no revoke endpoint)"} leaf`, send: post("ocsp-ec-revoked", ecNonce.der) });

    // Warm-up: first requests compile code paths, open D1 and fill the per-isolate key cache.
    for (const s of scenarios) await load(s.send, 2, 0.5);

    const rows = [];
    for (const s of scenarios) {
      for (const c of CONCURRENCY) {
        const cpu0 = workerdCpuMs();
        const r = await load(s.send, c, s.seconds ?? SECONDS);
        const cpu1 = workerdCpuMs();
        const sorted = [...r.latencies].sort((x, y) => x - y);
        let cpuMs = 0;
        for (const [pid, ms] of cpu1 ?? []) cpuMs += ms - (cpu0?.get(pid) ?? ms);
        const cpuPer = cpu0 === null || cpu1 === null ? NaN : cpuMs / r.latencies.length;
        rows.push({
          scenario: s.name,
          concurrency: c,
          requests: r.latencies.length,
          errors: s.ref ? 0 : r.errors,
          "resp/s": +(r.latencies.length / r.wall).toFixed(1),
          "p50 ms": +pct(sorted, 50).toFixed(1),
          "p99 ms": +pct(sorted, 99).toFixed(1),
          "workerd CPU ms/resp": +cpuPer.toFixed(2),
        });
      }
    }
    console.log("\nLanyard OCSP benchmark (local workerd, this machine; target >= 500 resp/s at concurrency 8)\n");
    console.table(rows);
    console.log("workerd CPU ms/resp: CPU time of the local runtime (Worker, D1 and Durable Objects) per response; 1000 / it is what one idle core could serve.");
  } finally {
    await worker.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
