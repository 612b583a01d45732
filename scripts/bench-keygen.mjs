#!/usr/bin/env node
// The slowest legitimate requests (`npm run bench -- keygen`): RSA-8192 key generation on each
// path that does it (root/generate, issue with an 8192 role, keys/generate, intermediate/generate),
// BENCH_KEYGEN_N times each, one at a time, against the bundled Worker in workerd. Prints the
// wall time and the Worker's workerd CPU (from /proc, Linux only) of every request, then how long
// a sys/health waits behind one generation. docs/security.md "CPU and key sizes" quotes these
// figures to justify [limits] cpu_ms in wrangler.toml.
//   BENCH_KEYGEN_N=5 (requests per path)
import http from "node:http";
import { rmSync } from "node:fs";
import { TOKEN, cpuPerRequest, startBenchWorker, workerdCpu } from "./lib/bench-common.mjs";

const N = Number(process.env.BENCH_KEYGEN_N ?? "5");

/**
 * A JSON API call on a connection of its own: after a request that held the isolate for seconds,
 * a kept-alive connection was sometimes reset under the next request (ECONNRESET).
 */
function call(base, method, p, body) {
  return new Promise((resolve, reject) => {
    const headers = { "x-service-token": TOKEN, "content-type": "application/json", connection: "close" };
    const req = http.request(`${base}/v1/${p}`, { method, agent: false, headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (text += c));
      res.on("end", () => ((res.statusCode ?? 500) >= 300 ? reject(new Error(`${method} ${p}: ${res.statusCode} ${text}`)) : resolve(text ? JSON.parse(text) : null)));
    });
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/** Makes the names of a repeated request unique (a dropped one may have been stored). */
let attempt = 0;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * Runs `request(i)` N times in sequence; prints and returns the CPU (ms) of each. A request whose
 * connection drops is sent again and not counted: the dev runtime restarts the Worker when
 * wrangler.toml or the migrations change under it, which a shared checkout does.
 */
async function timed(name, request) {
  const cpu = [];
  const wall = [];
  for (let i = 0; i < N; i++) {
    const before = workerdCpu();
    const t0 = performance.now();
    try {
      await request(`${i}-${attempt}`);
    } catch (e) {
      if (e.code !== "ECONNRESET") throw e;
      console.log(`${name}: connection reset after ${Math.round(performance.now() - t0)} ms (Worker restarted?); sending again`);
      i--;
      attempt++;
      continue;
    }
    wall.push(Math.round(performance.now() - t0));
    cpu.push(Math.round(cpuPerRequest(before, workerdCpu(), 1)));
  }
  console.log(`${name.padEnd(42)} CPU ms min/median/max ${Math.min(...cpu)}/${median(cpu)}/${Math.max(...cpu)}   wall ms ${Math.min(...wall)}/${median(wall)}/${Math.max(...wall)}`);
  console.log(`${"".padEnd(42)} CPU ms each: ${cpu.join(", ")}`);
  return cpu;
}

async function main() {
  const { worker, dir, base } = await startBenchWorker();
  try {
    await call(base, "POST", "sys/mounts/kg", { type: "pki" });
    // Warm-up: the first request compiles the code paths.
    await call(base, "POST", "kg/root/generate/internal", { common_name: "Warm", key_type: "ec", issuer_name: "warm" });
    const all = [];
    let rsaIssuer = "";
    const root = async (i) => {
      const r = await call(base, "POST", "kg/root/generate/internal", { common_name: `R${i}`, key_type: "rsa", key_bits: 8192, issuer_name: `r${i}` });
      rsaIssuer ||= r.data.issuer_id;
    };
    all.push(...(await timed("root/generate/internal rsa 8192", root)));
    // The leaves below are signed by an RSA-8192 issuer too: the costliest signature there is.
    await call(base, "POST", "kg/config/issuers", { default: rsaIssuer });
    await call(base, "POST", "kg/roles/big", { allow_any_name: true, key_type: "rsa", key_bits: 8192, ttl: "1h" });
    all.push(...(await timed("issue/:role (rsa 8192 role)", (i) => call(base, "POST", "kg/issue/big", { common_name: `l${i}.example` }))));
    all.push(...(await timed("keys/generate/internal rsa 8192", () => call(base, "POST", "kg/keys/generate/internal", { key_type: "rsa", key_bits: 8192 }))));
    all.push(...(await timed("intermediate/generate/internal rsa 8192", (i) => call(base, "POST", "kg/intermediate/generate/internal", { common_name: `I${i}`, key_type: "rsa", key_bits: 8192 }))));
    const mean = all.reduce((a, b) => a + b, 0) / all.length;
    console.log(`all ${all.length} RSA-8192 requests: CPU ms mean ${Math.round(mean)}, median ${median(all)}, max ${Math.max(...all)}`);

    // One isolate runs one generation at a time: a cheap request sent meanwhile waits for it.
    const gen = call(base, "POST", "kg/keys/generate/internal", { key_type: "rsa", key_bits: 8192 });
    await new Promise((r) => setTimeout(r, 100));
    const t0 = performance.now();
    await call(base, "GET", "sys/health");
    console.log(`sys/health sent during an RSA-8192 generation answered after ${Math.round(performance.now() - t0)} ms`);
    await gen;
  } finally {
    await worker.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
