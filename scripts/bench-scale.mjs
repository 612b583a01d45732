#!/usr/bin/env node
// Scale benchmark (docs/pki-issuance-benchmark.md "At scale"): how the PKI's costs grow with the
// rows a mount holds. One Worker (the production Worker wrapped by scripts/bench-scale-worker.ts,
// whose bench-only /__bench/seed route fills the local D1 in large INSERT … SELECT statements) on
// one mount `scale` (EC P-256 root, role `ec`); then for each stage i, with the mount grown to
// BENCH_SCALE_STORED[i] stored certificates and BENCH_SCALE_REVOKED[i] revocations (revocations
// of stored rows; every synthetic row carries the DER of one real certificate of the mount):
//   issue     closed-loop EC P-256 stored issues with a non-root token, c=8, BENCH_SECONDS;
//   revoke    p50/p99 of revoking real certificates one after another, with config/crl
//             auto_rebuild=true (the CRL left to the schedule, Vault API /pki/config/crl) and
//             with auto_rebuild=false (Vault's default: the CRL is rebuilt before the answer);
//   CRL       GET crl/rotate (a complete build of every revocation) and the peak resident set of
//             the workerd process during it above its resident set before (clear_refs 5 / VmHWM:
//             the whole process, local D1's SQLite included; workerd offers the Worker no heap
//             reading); per shard with config/crl shard_count where the build has it;
//   list      LIST certs (every serial) and the first page of LIST certs/detailed, median of 3;
//   tidy      BENCH_SCALE_EXPIRED[i] expired certificates seeded, then tidy_cert_store: its time,
//             its alarms (one step each, one Worker invocation each) and the most D1 statements
//             one alarm made (the bench Worker counts them).
//   BENCH_SCALE_STORED=10000,100000,1000000 BENCH_SCALE_REVOKED=1000,100000,1000000
//   BENCH_SCALE_EXPIRED=<default: = STORED>  BENCH_SECONDS=5  BENCH_SCALE_REVOKES=100
//   BENCH_SCALE_REBUILD_REVOKES=10 (0: none)  BENCH_SCALE_CRL=1 (0: no complete build)
//   BENCH_SCALE_LIST=1, BENCH_SCALE_TIDY=1 (0: skip those measurements)
import { rmSync, writeFileSync, readFileSync } from "node:fs";
import path from "node:path";
import { SECONDS, TOKEN, call, cpuPerRequest, load, root, startBenchWorker, workerdCpu } from "./lib/bench-common.mjs";

// One connection per request: a kept-alive connection was sometimes reset by the local runtime
// between two requests (ECONNRESET / "other side closed" on the next request, after a long
// seeding or tidy), failing a non-idempotent POST. A new loopback connection costs ~0.1 ms.
const fetchKeepAlive = globalThis.fetch;
globalThis.fetch = (url, init = {}) => fetchKeepAlive(url, { ...init, headers: { ...(init.headers ?? {}), connection: "close" } });

const list = (v, d) => (v ?? d).split(",").map((x) => Number(x.trim())).filter((x) => x > 0);
const STORED = list(process.env.BENCH_SCALE_STORED, "10000");
const REVOKED = list(process.env.BENCH_SCALE_REVOKED, "1000");
const EXPIRED = list(process.env.BENCH_SCALE_EXPIRED, STORED.join(","));
const REVOKES = Number(process.env.BENCH_SCALE_REVOKES ?? "100");
const REBUILD_REVOKES = Number(process.env.BENCH_SCALE_REBUILD_REVOKES ?? "10");
/** BENCH_SCALE_CRL=0 skips the complete CRL build (at 1M revocations it ran past undici's 300 s answer timeout here). */
const CRL = process.env.BENCH_SCALE_CRL !== "0";
const LIST = process.env.BENCH_SCALE_LIST !== "0";
const TIDY = process.env.BENCH_SCALE_TIDY !== "0";
const SEED_CHUNK = 50_000;
const MOUNT = "scale";
const POLICY = `
path "${MOUNT}/issue/ec" { capabilities = ["update"] }
path "${MOUNT}/revoke" { capabilities = ["update"] }
`;

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const median = (xs) => pct(xs, 50);
const fmt = (ms) => (ms === undefined || Number.isNaN(ms) ? "n/a" : ms >= 100 ? ms.toFixed(0) : ms.toFixed(1));

/** The Worker's workerd process (the one child of this process) and its memory (Linux /proc). */
function workerdPid() {
  const pids = Object.keys(workerdCpu()).map(Number);
  pids.sort((a, b) => memKb(b, "VmRSS") - memKb(a, "VmRSS"));
  return pids[0];
}
function memKb(pid, field) {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : NaN;
  } catch {
    return NaN;
  }
}
/** Runs fn; resolves with [its result, ms, peak RSS growth of workerd in MB over its RSS before]. */
async function measured(pid, fn) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
  } catch {
    // Without clear_refs the lifetime high-water mark is read (still an upper bound).
  }
  const before = memKb(pid, "VmRSS");
  const t = performance.now();
  const result = await fn();
  const ms = performance.now() - t;
  return [result, ms, Math.max(0, (memKb(pid, "VmHWM") - before) / 1024)];
}

async function bench(base, p, init = {}) {
  const res = await fetch(`${base}${p}`, init);
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${p}: ${res.status} ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : null;
}

/** Writes synthetic rows [from, to) of a kind through the bench Worker's seeding route. */
async function seed(ctx, kind, from, to) {
  for (let i = from; i < to; i += SEED_CHUNK) {
    await bench(ctx.base, "/__bench/seed", {
      method: "POST",
      body: JSON.stringify({ kind, mountId: ctx.mountId, issuerId: ctx.issuerId, from: i, to: Math.min(to, i + SEED_CHUNK), der: ctx.der, now: Math.floor(Date.now() / 1000) }),
    });
  }
}

async function setUp(base) {
  await call(base, "POST", `sys/mounts/${MOUNT}`, { type: "pki" });
  const ca = await call(base, "POST", `${MOUNT}/root/generate/internal`, { common_name: "Scale Bench Root", key_type: "ec", not_after: "2036-01-01T00:00:00Z" });
  await call(base, "POST", `${MOUNT}/roles/ec`, { allow_any_name: true, key_type: "ec", ttl: "24h" });
  // Vault's default max_crl_entries (100,000) refuses the larger CRLs this bench builds; -1 lifts it.
  await call(base, "POST", `${MOUNT}/config/crl`, { max_crl_entries: -1 });
  // Shard CRLs are built only for issuers with CRL distribution points (docs/pki-revocation-crl.md "Sharded CRLs").
  await call(base, "POST", `${MOUNT}/config/urls`, { crl_distribution_points: [`${base}/v1/${MOUNT}/crl`] });
  await call(base, "POST", "sys/policies/acl/scale", { policy: POLICY });
  const token = (await call(base, "POST", "auth/token/create", { policies: ["scale"], no_default_policy: true, ttl: "8h" })).auth.client_token;
  const leaf = await call(base, "POST", `${MOUNT}/issue/ec`, { common_name: "sample.scale.example" });
  const der = leaf.data.certificate.replace(/-----[A-Z ]+-----/g, "").replace(/\s+/g, "");
  const mountId = (await call(base, "GET", "sys/mounts")).data[`${MOUNT}/`].uuid;
  return { base, token, der, mountId, issuerId: ca.data.issuer_id, caPem: ca.data.certificate };
}

async function issueLoad(ctx) {
  const req = {
    path: `/v1/${MOUNT}/issue/ec`,
    method: "POST",
    headers: { "x-service-token": ctx.token, "content-type": "application/json" },
    body: JSON.stringify({ common_name: "load.scale.example" }),
  };
  const before = workerdCpu();
  const r = await load(ctx.base, req, 8, SECONDS);
  return { rps: r.rps, errors: r.errors, cpu: cpuPerRequest(before, workerdCpu(), r.requests) };
}

/** Issues n real certificates (8 at a time), then revokes them one after another: per-revoke ms. */
async function revokeLatencies(ctx, n) {
  const serials = [];
  for (let i = 0; i < n; i += 8) {
    const batch = Array.from({ length: Math.min(8, n - i) }, (_, j) => call(ctx.base, "POST", `${MOUNT}/issue/ec`, { common_name: `r${i + j}.scale.example` }, ctx.token));
    for (const c of await Promise.all(batch)) serials.push(c.data.serial_number);
  }
  const times = [];
  for (const s of serials) {
    const t = performance.now();
    await call(ctx.base, "POST", `${MOUNT}/revoke`, { serial_number: s }, ctx.token);
    times.push(performance.now() - t);
  }
  return times;
}

/** A complete CRL build (crl/rotate): ms, peak RSS growth, DER size; then per shard if config/crl has shard_count. */
async function crlBuild(ctx) {
  const [, ms, peakMb] = await measured(ctx.pid, () => call(ctx.base, "GET", `${MOUNT}/crl/rotate`));
  const der = Buffer.from(await (await fetch(`${ctx.base}/v1/${MOUNT}/crl`)).arrayBuffer());
  let shard = "n/a (no sharding on this build)";
  const shards = 4;
  const res = await fetch(`${ctx.base}/v1/${MOUNT}/config/crl`, { method: "POST", headers: { "x-service-token": TOKEN, "content-type": "application/json" }, body: JSON.stringify({ shard_count: shards }) });
  const said = await res.text();
  // Vault's API ignores an unknown field with a warning: the read-back says whether it took.
  const took = res.status < 300 && (await call(ctx.base, "GET", `${MOUNT}/config/crl`)).data.shard_count === shards;
  if (took) {
    const [, sms, speak] = await measured(ctx.pid, () => call(ctx.base, "GET", `${MOUNT}/crl/rotate`));
    // One shard alone: a revocation with auto_rebuild=false rebuilds only its certificate's shard.
    const c = await call(ctx.base, "POST", `${MOUNT}/issue/ec`, { common_name: "shard.scale.example" }, ctx.token);
    const [, oms, opeak] = await measured(ctx.pid, () => call(ctx.base, "POST", `${MOUNT}/revoke`, { serial_number: c.data.serial_number }, ctx.token));
    shard = `full + ${shards} shards ${fmt(sms)} ms (+${speak.toFixed(0)} MB); one shard on revoke ${fmt(oms)} ms (+${opeak.toFixed(0)} MB)`;
    await call(ctx.base, "POST", `${MOUNT}/config/crl`, { shard_count: 1 });
  } else if (res.status >= 300 && res.status !== 400) {
    shard = `config/crl shard_count: ${res.status} ${said.slice(0, 120)}`;
  }
  return { ms, peakMb, derKiB: der.length / 1024, shard };
}

async function listTimes(ctx) {
  const timed = async (p) => {
    const times = [];
    let bytes = 0;
    let peak = 0;
    for (let i = 0; i < 3; i++) {
      const [b, ms, mb] = await measured(ctx.pid, async () => (await fetch(`${ctx.base}/v1/${p}`, { headers: { "x-service-token": TOKEN } })).arrayBuffer());
      bytes = b.byteLength;
      times.push(ms);
      peak = Math.max(peak, mb);
    }
    return { ms: median(times), MiB: bytes / 1048576, peak };
  };
  return { all: await timed(`${MOUNT}/certs?list=true`), page: await timed(`${MOUNT}/certs/detailed?list=true`) };
}

/** Seeds `expired` expired certificates, runs tidy_cert_store to its end: time, alarms, D1 statements per alarm. */
async function tidy(ctx, expired) {
  await seed(ctx, "expired", ctx.expiredSeeded, ctx.expiredSeeded + expired);
  ctx.expiredSeeded += expired;
  const scanned = (await bench(ctx.base, `/__bench/counts?mount=${ctx.mountId}`)).certs;
  await bench(ctx.base, "/__bench/alarm-stats", { method: "DELETE" });
  const t = performance.now();
  await call(ctx.base, "POST", `${MOUNT}/tidy`, { tidy_cert_store: true });
  let st;
  for (;;) {
    await new Promise((r) => setTimeout(r, 250));
    st = (await call(ctx.base, "GET", `${MOUNT}/tidy-status`)).data;
    if (st.state !== "Running") break;
  }
  const wall = performance.now() - t;
  if (st.state !== "Finished") throw new Error(`tidy ended ${st.state}: ${st.error}`);
  const stats = await bench(ctx.base, "/__bench/alarm-stats");
  const ms = Date.parse(st.time_finished) - Date.parse(st.time_started);
  return { scanned, deleted: st.cert_store_deleted_count, ms: Number.isFinite(ms) ? ms : wall, alarms: stats.alarms, maxStatements: stats.maxStatements };
}

async function stage(ctx, i) {
  const stored = STORED[i];
  const revoked = Math.min(REVOKED[i] ?? REVOKED[REVOKED.length - 1], stored);
  let t = performance.now();
  await seed(ctx, "valid", ctx.validSeeded, stored);
  await seed(ctx, "revoked", ctx.revokedSeeded, revoked);
  const seedS = (performance.now() - t) / 1000;
  const seededRows = Math.max(0, stored - ctx.validSeeded) + Math.max(0, revoked - ctx.revokedSeeded);
  ctx.validSeeded = Math.max(ctx.validSeeded, stored);
  ctx.revokedSeeded = Math.max(ctx.revokedSeeded, revoked);
  console.log(`stage ${i + 1}: seeded ${seededRows.toLocaleString("en")} rows in ${seedS.toFixed(1)} s`);

  const issue = await issueLoad(ctx);
  await call(ctx.base, "POST", `${MOUNT}/config/crl`, { auto_rebuild: true });
  const auto = await revokeLatencies(ctx, REVOKES);
  await call(ctx.base, "POST", `${MOUNT}/config/crl`, { auto_rebuild: false });
  const rebuild = await revokeLatencies(ctx, REBUILD_REVOKES);
  const crl = CRL ? await crlBuild(ctx) : { ms: NaN, peakMb: NaN, derKiB: NaN, shard: "not run (BENCH_SCALE_CRL=0)" };
  const lists = LIST ? await listTimes(ctx) : { all: { ms: NaN, MiB: NaN, peak: NaN }, page: { ms: NaN } };
  const td = TIDY ? await tidy(ctx, EXPIRED[i] ?? EXPIRED[EXPIRED.length - 1]) : { scanned: 0, deleted: 0, ms: NaN, alarms: "n/a", maxStatements: "n/a" };
  const now = await bench(ctx.base, `/__bench/counts?mount=${ctx.mountId}`);
  return {
    stored: now.certs,
    revoked: now.revoked,
    "issue req/s (c=8)": `${issue.rps.toFixed(0)}${issue.errors ? ` (${issue.errors} errors)` : ""}`,
    "issue CPU ms/req": fmt(issue.cpu),
    "revoke p50/p99 ms, auto_rebuild": `${fmt(median(auto))} / ${fmt(pct(auto, 99))}`,
    "revoke p50/p99 ms, rebuild on revoke": `${fmt(median(rebuild))} / ${fmt(pct(rebuild, 99))}`,
    "CRL build ms": fmt(crl.ms),
    "CRL KiB": fmt(crl.derKiB),
    "CRL peak RSS +MB": fmt(crl.peakMb),
    "CRL per shard": crl.shard,
    "LIST certs ms (MiB)": `${fmt(lists.all.ms)} (${lists.all.MiB.toFixed(1)})`,
    "LIST certs peak RSS +MB": lists.all.peak.toFixed(0),
    "certs/detailed page ms": fmt(lists.page.ms),
    "tidy: expired deleted / scanned": `${td.deleted.toLocaleString("en")} / ${td.scanned.toLocaleString("en")}`,
    "tidy s": (td.ms / 1000).toFixed(1),
    "tidy alarms (invocations)": td.alarms,
    "tidy max D1 stmts/alarm": td.maxStatements,
  };
}

async function main() {
  const { worker, base, dir } = await startBenchWorker({}, { entry: path.join(root, "scripts", "bench-scale-worker.ts") });
  const rows = [];
  try {
    const ctx = { ...(await setUp(base)), pid: workerdPid(), validSeeded: 0, revokedSeeded: 0, expiredSeeded: 0 };
    for (let i = 0; i < STORED.length; i++) {
      rows.push(await stage(ctx, i));
      if (process.env.BENCH_VERBOSE) console.log(rows[rows.length - 1]);
    }
  } finally {
    await worker.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(`\nLanyard at scale (local workerd and D1, this machine; issue ${SECONDS} s at c=8; revoke: ${REVOKES} with auto_rebuild, ${REBUILD_REVOKES} rebuilding; lists median of 3)\n`);
  // Transposed: one column per stage, one line per measurement.
  const keys = Object.keys(rows[0] ?? {});
  console.table(Object.fromEntries(keys.map((k) => [k, Object.fromEntries(rows.map((r, i) => [`stage ${i + 1}`, r[k]]))])));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
