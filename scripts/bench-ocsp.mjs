#!/usr/bin/env node
// OCSP benchmark (`npm run bench -- ocsp`; scripts/run-bench.mjs runs every bench): starts the
// Worker in the local runtime (wrangler's programmatic API, a throwaway D1/DO state directory),
// makes an EC P-256 and an RSA-2048 root with one leaf each, lets openssl write the OCSP
// requests, then drives the responder with autocannon and prints responses/s, p50/p99 latency
// and the Worker's workerd CPU per response at concurrency 1 and 8 for
//   (a) POST ocsp, EC issuer   (b) GET ocsp/<base64>, EC issuer   (c) POST ocsp, RSA-2048 issuer
//   (d) POST ocsp with a nonce for a revoked leaf, EC issuer.
// Reference rows give the floor: the HTTP stack alone (sys/health, no D1), the /v1 pipeline's
// lookups with one config read (a malformed OCSP request), and a public PKI read (ca/pem).
// Same method as scripts/bench.mjs: the Worker is bundled once first (edits to src/ during a run
// cannot reload it), and the load goes to the Worker's own workerd socket (BENCH_TARGET=direct
// through Miniflare's entry Worker, proxy through wrangler's dev proxy too).
//   BENCH_SECONDS=5 (per run)   BENCH_CONCURRENCY=1,8   BENCH_TARGET=worker|direct|proxy
import { execFileSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { CONCURRENCY, SECONDS, TARGET, call, cpuPerRequest, load, startBenchWorker, workerdCpu } from "./lib/bench-common.mjs";

const TARGET_RPS = 500;

/** A CA mount with one leaf; returns the DER OCSP request openssl writes for the leaf. */
async function caWithLeaf(base, dir, mount, keyType, nonce) {
  await call(base, "POST", `sys/mounts/${mount}`, { type: "pki" });
  const ca = await call(base, "POST", `${mount}/root/generate/internal`, {
    common_name: `Bench OCSP ${keyType}`,
    key_type: keyType,
    key_bits: keyType === "rsa" ? 2048 : 256,
    not_after: "2036-01-01T00:00:00Z",
  });
  await call(base, "POST", `${mount}/roles/leaf`, { allow_any_name: true, key_type: "ec", ttl: "24h" });
  const leaf = await call(base, "POST", `${mount}/issue/leaf`, { common_name: "ocsp.bench.example" });
  const files = { ca: path.join(dir, `${mount}-ca.pem`), leaf: path.join(dir, `${mount}-leaf.pem`), req: path.join(dir, `${mount}.req`) };
  writeFileSync(files.ca, `${ca.data.certificate}\n`);
  writeFileSync(files.leaf, `${leaf.data.certificate}\n`);
  execFileSync("openssl", ["ocsp", "-issuer", files.ca, "-cert", files.leaf, "-reqout", files.req, ...(nonce ? [] : ["-no_nonce"])], { stdio: "ignore" });
  return { der: readFileSync(files.req), serial: leaf.data.serial_number };
}

async function main() {
  const { worker, dir, base } = await startBenchWorker();
  try {
    const ec = await caWithLeaf(base, dir, "ocsp-ec", "ec", false);
    const rsa = await caWithLeaf(base, dir, "ocsp-rsa", "rsa", false);
    const revoked = await caWithLeaf(base, dir, "ocsp-ec-revoked", "ec", true);
    await call(base, "POST", "ocsp-ec-revoked/revoke", { serial_number: revoked.serial });

    const post = (mount, der) => ({ path: `/v1/${mount}/ocsp`, method: "POST", headers: { "content-type": "application/ocsp-request" }, body: der });
    const get = (p) => ({ path: p, method: "GET" });
    const ref = Math.min(SECONDS, 2);
    const scenarios = [
      { name: "(ref) GET sys/health", req: get("/v1/sys/health"), seconds: ref },
      // A 400 malformedRequest: the pipeline and one config read, no signature.
      { name: "(ref) POST ocsp, malformed", req: post("ocsp-ec", Buffer.from([1, 2, 3])), seconds: ref, expectErrors: true },
      { name: "(ref) GET ocsp-ec/ca/pem", req: get("/v1/ocsp-ec/ca/pem"), seconds: ref },
      { name: "(a) POST ocsp, EC P-256 issuer", req: post("ocsp-ec", ec.der) },
      { name: "(b) GET ocsp/<base64>, EC P-256 issuer", req: get(`/v1/ocsp-ec/ocsp/${encodeURIComponent(ec.der.toString("base64"))}`) },
      { name: "(c) POST ocsp, RSA-2048 issuer", req: post("ocsp-rsa", rsa.der) },
      { name: "(d) POST ocsp + nonce, EC, revoked", req: post("ocsp-ec-revoked", revoked.der) },
    ];
    // Warm-up: first requests compile code paths, open D1 and fill the per-isolate key cache.
    for (const s of scenarios) await load(base, s.req, 2, 1);

    const rows = [];
    for (const s of scenarios) {
      for (const c of CONCURRENCY) {
        const cpu0 = workerdCpu();
        const r = await load(base, s.req, c, s.seconds ?? SECONDS);
        rows.push({
          scenario: s.name,
          concurrency: c,
          requests: r.requests,
          errors: s.expectErrors ? `(${r.errors} x 400)` : r.errors,
          "resp/s": +r.rps.toFixed(1),
          "p50 ms": +r.p50.toFixed(1),
          "p99 ms": +r.p99.toFixed(1),
          "workerd CPU ms/resp": +cpuPerRequest(cpu0, workerdCpu(), r.requests).toFixed(2),
        });
      }
    }
    console.log(
      `\nLanyard OCSP benchmark (local workerd, this machine; target >= ${TARGET_RPS} resp/s at concurrency 8; load by autocannon ${TARGET === "proxy" ? "through wrangler's dev proxy" : TARGET === "direct" ? "through Miniflare's entry Worker" : "on the Worker's own workerd socket"})\n`,
    );
    console.table(rows);
    const c8 = rows.filter((r) => r.concurrency === 8 && !r.scenario.startsWith("(ref)"));
    if (c8.length > 0) {
      const worst = c8.reduce((a, b) => (a["resp/s"] <= b["resp/s"] ? a : b));
      console.log(`slowest OCSP row at concurrency 8: ${worst.scenario}, ${worst["resp/s"]} resp/s (${worst["resp/s"] >= TARGET_RPS ? "meets" : "below"} the ${TARGET_RPS} resp/s target)`);
    }
  } finally {
    await worker.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
