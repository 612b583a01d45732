#!/usr/bin/env node
// Secrets-sync benchmark (docs/secrets-sync.md "Throughput"): starts the Worker in the
// local runtime (scripts/lib/bench-common.mjs startBenchWorker: a throwaway D1/Queue state
// directory, the bundle built once, BENCH_REV=<rev> to measure a committed tree) with
// CLOUDONE_ENDPOINT pointing at the fake cloudone-sm provider (test/helpers/fake-cloudone.ts)
// served over HTTP from this process, and measures
//   (1) associations/set → the value at the fake (p50/p99): set syncs at once when enabled;
//   (2) a KV-v2 write → the new value at the fake (p50/p99): KV change → queue → consumer;
//       writes are sent open-loop at BENCH_KV_RATE per second so the queue's batching shows;
//   (3) sustained sync operations per second through the queue with 1,000 associations:
//       (a) a backlog of 1,000 parked changes released by re-enabling sync, drained by the queue;
//       (b) 1,000 KV writes at concurrency 8 while enabled, until the last value is at the fake.
// "At the fake" is the moment the fake has applied the write (it verifies every SigV4 signature),
// timed on this process's clock, which also timed the request.
//
// PROVIDER CAPS. Every request to a destination passes its limit scope's SyncGate
// (src/engines/sync/limits/index.ts): cloudone-sm allows 20 writes/s per access key and region. A first
// sync is two writes (PutSecretValue finding nothing, then CreateSecret), and so was every rewrite
// before tags were compared first (PutSecretValue, TagResource): ONE scope then delivers at most 10 syncs/s
// whatever the engine does; a rewrite whose tags are current is one write, 20/s. (1) and (2) use one destination; the 1,000 associations of (3) are
// spread round-robin over BENCH_SCOPES destinations, each with its own access key (its own scope,
// as separate AWS accounts would be), so (3) measures the engine and the queue, not one scope's
// cap; the table prints the caps' ceiling beside the figure. BENCH_SCOPES=1 shows one scope's cap.
//   BENCH_SET_SAMPLES=100  BENCH_KV_SAMPLES=100  BENCH_KV_RATE=10  BENCH_ASSOCIATIONS=1000
//   BENCH_SCOPES=40  BENCH_PHASES=set,kv,backlog,load (which of (1), (2), (3a), (3b) run)
//   BENCH_WAIT_SECONDS=300 (longest wait for one value at the fake)
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { build } from "esbuild";
import { call, root, startBenchWorker, workerdCpu } from "./lib/bench-common.mjs";

const SET_SAMPLES = Number(process.env.BENCH_SET_SAMPLES ?? "100");
const KV_SAMPLES = Number(process.env.BENCH_KV_SAMPLES ?? "100");
const KV_RATE = Number(process.env.BENCH_KV_RATE ?? "10");
const ASSOCIATIONS = Number(process.env.BENCH_ASSOCIATIONS ?? "1000");
const SCOPES = Math.max(1, Number(process.env.BENCH_SCOPES ?? "40"));
const PHASES = new Set((process.env.BENCH_PHASES ?? "set,kv,backlog,load").split(",").map((x) => x.trim()));
const WAIT_MS = Number(process.env.BENCH_WAIT_SECONDS ?? "300") * 1000;
/** cloudone-sm's cap per scope (the `limits` of src/engines/sync/providers/cloudone-sm/index.ts), and the writes of a first sync (CreateSecret or PutSecretValue + TagResource). */
const WRITES_PER_SECOND_CAP = 20;
const WRITES_PER_SYNC = 2;
for (const [k, v] of Object.entries({
  WRANGLER_SEND_METRICS: "false",
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_HIDE_BANNER: "true",
  // Others may edit the checkout while this runs: do not reload on wrangler.toml changes either.
  WRANGLER_CI_DISABLE_CONFIG_WATCHING: "true",
  // Without this the local queue logs one line per consumed batch (hundreds per run).
  WRANGLER_LOG: process.env.BENCH_LOG ?? "error",
})) {
  process.env[k] = v;
}


/** Runs `fn(i)` for i in [0, n) with at most `concurrency` in flight. */
async function pool(n, concurrency, fn) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** The fake test/helpers/fake-http.ts, bundled for Node (it is TypeScript and imports src/). */
async function loadFakes(dir) {
  // CommonJS: tweetnacl require()s node's crypto, which an ESM bundle cannot.
  const outfile = path.join(dir, "fake-http.cjs");
  await build({
    entryPoints: [path.join(root, "test", "helpers", "fake-http.ts")],
    bundle: true,
    platform: "node",
    format: "cjs",
    outfile,
    logLevel: "warning",
  });
  return createRequire(import.meta.url)(outfile);
}

/**
 * Watches the fake: `arrival(name, value)` resolves with performance.now() at the moment the
 * fake holds `value` under `name` (checked after every request that names the secret).
 */
function watch(fake) {
  const waiters = new Map();
  const handle = fake.handle.bind(fake);
  fake.handle = async (req) => {
    let id = "";
    try {
      const p = JSON.parse(await req.clone().text());
      id = typeof p.SecretId === "string" ? p.SecretId : typeof p.Name === "string" ? p.Name : "";
    } catch {
      // STS and malformed bodies name no secret.
    }
    const res = await handle(req);
    const w = waiters.get(id);
    if (w && fake.value(id) === w.value) {
      waiters.delete(id);
      w.resolve(performance.now());
    }
    return res;
  };
  return {
    arrival(name, value) {
      if (fake.value(name) === value) return Promise.resolve(performance.now());
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`timed out waiting for ${name} at the fake`)), WAIT_MS);
        if (waiters.has(name)) throw new Error(`already waiting for ${name}`);
        waiters.set(name, {
          value,
          resolve: (t) => {
            clearTimeout(timer);
            resolve(t);
          },
        });
      });
    },
  };
}

function latencyRow(name, samples) {
  const s = [...samples].sort((a, b) => a - b);
  return { measurement: name, samples: s.length, "p50 ms": +pct(s, 50).toFixed(1), "p99 ms": +pct(s, 99).toFixed(1), "max ms": +s[s.length - 1].toFixed(1), "ops/s": "" };
}

/** A fresh directory for the fake's bundle (the Worker's state directory is startBenchWorker's). */
function bundleDir() {
  return mkdtempSync(path.join(tmpdir(), "lanyard-bench-sync-fakes-"));
}

async function main() {
  const fakesDir = bundleDir();
  const { startFakeServers, BODIES } = await loadFakes(fakesDir);
  const servers = await startFakeServers(0);
  const fake = servers.fakes.one;
  const watcher = watch(fake);
  const { worker, dir, base } = await startBenchWorker({ CLOUDONE_ENDPOINT: { type: "plain_text", value: servers.endpoints.CLOUDONE_ENDPOINT } });
  try {
    await call(base, "POST", "sys/mounts/bench-kv", { type: "kv-v2" });
    const accessor = (await call(base, "GET", "sys/mounts")).data["bench-kv/"].accessor;
    // Destination d0 ("bench") is the one of (1) and (2); d0..d{SCOPES-1} share (3)'s load, each
    // under its own access key, which the fake also knows (same secret key): its own gate scope.
    const destName = (d) => (d === 0 ? "bench" : `bench-${d}`);
    for (let d = 0; d < SCOPES; d++) {
      const body = { ...BODIES["cloudone-sm"] };
      if (d > 0) {
        body.access_key_id = `AKIABENCH${String(d).padStart(11, "0")}`;
        fake.users.set(body.access_key_id, body.secret_access_key);
      }
      await call(base, "POST", `sys/sync/destinations/cloudone-sm/${destName(d)}`, body);
    }
    // Default template of cloudone-sm, secret-path granularity: the whole secret as JSON.
    const external = (secret) => `vault/${accessor}/${secret}`;
    const payload = (data) => JSON.stringify(data);
    const writeSecret = (secret, data) => call(base, "POST", `bench-kv/data/${secret}`, { data });
    const set = (secret, d = 0) => call(base, "POST", `sys/sync/destinations/cloudone-sm/${destName(d)}/associations/set`, { mount: "bench-kv", secret_name: secret });
    const rows = [];
    const notes = [];

    // Warm-up: first requests compile code paths and open D1 and the queue.
    for (let i = 0; i < 5; i++) {
      const data = { warm: String(i) };
      await writeSecret(`warm/${i}`, data);
      await set(`warm/${i}`);
      await watcher.arrival(external(`warm/${i}`), payload(data));
    }

    // (1) associations/set → value at the fake.
    if (PHASES.has("set")) {
      const setLat = [];
      let notSynced = 0;
      for (let i = 0; i < SET_SAMPLES; i++) {
        const secret = `set/${i}`;
        const data = { value: crypto.randomUUID() };
        await writeSecret(secret, data);
        const arrived = watcher.arrival(external(secret), payload(data));
        const t0 = performance.now();
        const r = await set(secret);
        if (r.data.associated_secrets[`${accessor}/${secret}`]?.sync_status !== "SYNCED") notSynced++;
        setLat.push((await arrived) - t0);
      }
      rows.push(latencyRow("associations/set → value at fake", setLat));
      notes.push(`set answers that were not SYNCED: ${notSynced} of ${SET_SAMPLES}`);
    }

    // (2) KV write → value at the fake, through the queue; open loop at KV_RATE writes/s, one
    // secret per sample (associated beforehand) so no write overtakes another's measurement.
    if (PHASES.has("kv")) {
      await pool(KV_SAMPLES, 4, async (i) => {
        await writeSecret(`kv/${i}`, { value: "initial" });
        await set(`kv/${i}`);
      });
      const kvLat = [];
      const gap = 1000 / KV_RATE;
      const tStart = performance.now();
      await Promise.all(
        Array.from({ length: KV_SAMPLES }, async (_, i) => {
          await new Promise((r) => setTimeout(r, Math.max(0, tStart + i * gap - performance.now())));
          const secret = `kv/${i}`;
          const data = { value: crypto.randomUUID(), i };
          const arrived = watcher.arrival(external(secret), payload(data));
          const t0 = performance.now();
          await writeSecret(secret, data);
          kvLat.push((await arrived) - t0);
        }),
      );
      rows.push(latencyRow(`KV write → value at fake (open loop, ${KV_RATE}/s, one scope)`, kvLat));
    }

    // (3) 1,000 associations, round-robin over the scopes.
    /** The caps' ceiling for `writes` provider writes per sync (every call but reads counts as a write in limits.ts). */
    const scopeNote = (writes) => `${SCOPES} scope${SCOPES > 1 ? "s" : ""}, caps' ceiling ${Math.round((SCOPES * WRITES_PER_SECOND_CAP) / writes)} syncs/s`;
    if (PHASES.has("backlog") || PHASES.has("load")) {
      const tSetup = performance.now();
      await pool(ASSOCIATIONS, 8, async (i) => {
        await writeSecret(`load/${i}`, { n: "0" });
        await set(`load/${i}`, i % SCOPES);
      });
      const setupSeconds = (performance.now() - tSetup) / 1000;
      notes.push(`setting up ${ASSOCIATIONS} associations (KV write + set, c=8): ${setupSeconds.toFixed(1)} s (${(ASSOCIATIONS / setupSeconds).toFixed(1)} set/s incl. the write)`);
    }

    // (3a) Backlog drain: park one change per association, then re-enable.
    if (PHASES.has("backlog")) {
      await call(base, "PATCH", "sys/sync/config", { disabled: true });
      await pool(ASSOCIATIONS, 8, (i) => writeSecret(`load/${i}`, { n: "1" }));
      const drained = Array.from({ length: ASSOCIATIONS }, (_, i) => watcher.arrival(external(`load/${i}`), payload({ n: "1" })));
      const tA = performance.now();
      await call(base, "PATCH", "sys/sync/config", { disabled: false });
      const endA = Math.max(...(await Promise.all(drained)));
      const drainSeconds = (endA - tA) / 1000;
      rows.push({ measurement: `backlog of ${ASSOCIATIONS} released by re-enable → all at fake (${scopeNote(WRITES_PER_SYNC)})`, samples: ASSOCIATIONS, "p50 ms": "", "p99 ms": "", "max ms": +(endA - tA).toFixed(0), "ops/s": +(ASSOCIATIONS / drainSeconds).toFixed(1) });
    }

    // (3b) Sustained: KV writes at concurrency 8 while enabled, each re-sync through the queue.
    if (PHASES.has("load")) {
      const n = PHASES.has("backlog") ? "2" : "1";
      const arrivals = Array.from({ length: ASSOCIATIONS }, (_, i) => watcher.arrival(external(`load/${i}`), payload({ n })));
      const callsBefore = fake.calls.length;
      const cpuBefore = workerdCpu();
      const tB = performance.now();
      await pool(ASSOCIATIONS, 8, (i) => writeSecret(`load/${i}`, { n }));
      const writesDone = performance.now();
      const endB = Math.max(...(await Promise.all(arrivals)));
      const cpuAfter = workerdCpu();
      let cpu = 0;
      for (const [pid, t] of Object.entries(cpuAfter)) cpu = Math.max(cpu, t - (cpuBefore[pid] ?? t));
      const ops = {};
      for (const c of fake.calls.slice(callsBefore)) {
        const op = c.split(" ")[0];
        ops[op] = (ops[op] ?? 0) + 1;
      }
      const writes = Object.entries(ops).reduce((n, [op, k]) => n + (/^(Get|Describe|List|BatchGet)/.test(op) ? 0 : k), 0);
      rows.push({
        measurement: `${ASSOCIATIONS} KV writes (c=8) → all at fake (${scopeNote(Math.max(1, writes / ASSOCIATIONS))})`,
        samples: ASSOCIATIONS,
        "p50 ms": "",
        "p99 ms": "",
        "max ms": +(endB - tB).toFixed(0),
        "ops/s": +(ASSOCIATIONS / ((endB - tB) / 1000)).toFixed(1),
      });
      notes.push(`(3b) the ${ASSOCIATIONS} KV writes themselves took ${((writesDone - tB) / 1000).toFixed(1)} s; the queue finished ${((endB - writesDone) / 1000).toFixed(1)} s after the last write`);
      notes.push(`(3b) workerd CPU: ${((cpu * 1000) / ASSOCIATIONS).toFixed(2)} ms per KV write + its sync (busiest workerd process)`);
      notes.push(`(3b) fake provider calls: ${Object.entries(ops).map(([k, v]) => `${k} ${v}`).join(", ")}`);
    }

    console.log("\nLanyard secrets-sync benchmark (local workerd + local queue, fake cloudone-sm over HTTP, this machine)\n");
    console.table(rows);
    for (const n of notes) console.log(n);
    console.log(`fake provider calls: ${fake.calls.length}`);
  } finally {
    await worker.dispose();
    await servers.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(fakesDir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
