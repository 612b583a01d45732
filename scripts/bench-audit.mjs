#!/usr/bin/env node
// Audit cost benchmark (`npm run bench -- audit`; docs/audit.md "What it costs"): starts the Worker in the local
// runtime (scripts/lib/bench-common.mjs) and measures, with a NON-ROOT token whose policy grants
// the paths (root skips the policy read), a KV-v2 read and an EC P-256 issue at concurrency 8:
//   first with no audit device, then with one `http` device whose collector is a Node server in
//   this process (it accepts every NDJSON batch with 204 and counts the entries).
// Printed per row: req/s, p50/p99 and the Worker's workerd CPU per request (from /proc), then the
// ratio with/without the device, and how many entries the collector received once the queue has
// drained (every request gives a request and a response entry).
//   BENCH_SECONDS=5   BENCH_CONCURRENCY=8
import { createServer } from "node:http";
import { gunzipSync } from "node:zlib";
import { CONCURRENCY, SECONDS, call, cpuPerRequest, load, startBenchWorker, workerdCpu } from "./lib/bench-common.mjs";

// Without this the local queue logs one line per consumed batch.
process.env.WRANGLER_LOG = process.env.BENCH_LOG ?? "error";

const C = Number((process.env.BENCH_CONCURRENCY ?? "8").split(",").pop());

/** The collector: counts entries by type, answers 204 to every POST. */
async function startCollector() {
  const seen = { batches: 0, request: 0, response: 0, ids: new Set() };
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      let body = Buffer.concat(chunks);
      if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body);
      seen.batches++;
      for (const line of body.toString("utf8").split("\n")) {
        if (!line.trim()) continue;
        const e = JSON.parse(line);
        if (seen.ids.has(e.id)) continue; // at-least-once: the id drops duplicates
        seen.ids.add(e.id);
        if (e.type === "request") seen.request++;
        else seen.response++;
      }
      res.writeHead(204).end();
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { seen, url: `http://127.0.0.1:${server.address().port}/ingest`, close: () => new Promise((r) => server.close(r)) };
}

async function main() {
  const { worker, base } = await startBenchWorker();
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
      { name: "issue EC P-256", req: { path: "/v1/pki/issue/ec", method: "POST", headers, body: JSON.stringify({ common_name: "a.bench.example" }) } },
    ];
    for (const s of scenarios) await load(base, s.req, 2, 1); // warm-up

    const run = async (label) => {
      const rows = [];
      for (const s of scenarios) {
        const cpu0 = workerdCpu();
        const r = await load(base, s.req, C, SECONDS);
        rows.push({ audit: label, scenario: s.name, concurrency: C, requests: r.requests, errors: r.errors, "req/s": +r.rps.toFixed(1), "p50 ms": +r.p50.toFixed(1), "p99 ms": +r.p99.toFixed(1), "workerd CPU ms/req": +cpuPerRequest(cpu0, workerdCpu(), r.requests).toFixed(2) });
      }
      return rows;
    };
    const without = await run("none");
    await call(base, "POST", "sys/audit/bench-http", { type: "http", options: { address: collector.url } });
    // The isolate that enabled it sees it at once; others within 1 s (src/audit/audit-store.ts).
    await new Promise((r) => setTimeout(r, 1100));
    const withDevice = await run("one http device");
    const audited = withDevice.reduce((n, r) => n + r.requests, 0);

    // Let the queue drain to the collector (entries reach a healthy collector within ~10 s).
    const deadline = Date.now() + 60_000;
    while (collector.seen.response < audited && Date.now() < deadline) await new Promise((r) => setTimeout(r, 500));

    console.log(`\nLanyard audit cost (local workerd, non-root token with a policy, concurrency ${C}, ${SECONDS}s per row)\n`);
    console.table([...without, ...withDevice]);
    console.table(
      scenarios.map((s, i) => ({
        scenario: s.name,
        "throughput with/without": +(withDevice[i]["req/s"] / without[i]["req/s"]).toFixed(2),
        "CPU/req with/without": +(withDevice[i]["workerd CPU ms/req"] / without[i]["workerd CPU ms/req"]).toFixed(2),
      })),
    );
    // autocannon counts the answers inside its window; requests in flight at its end are audited too.
    console.log(`collector: ${collector.seen.request} request and ${collector.seen.response} response entries (distinct ids) in ${collector.seen.batches} batches; autocannon counted ${audited} answered requests with the device on`);
  } finally {
    await collector.close();
    await worker.dispose();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
