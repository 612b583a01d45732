#!/usr/bin/env node
// CRL benchmark (docs/pki-revocation-crl.md): rebuild time and peak memory for 1,000, 10,000 and 100,000 revoked
// entries, in the local runtime (workerd through wrangler's programmatic API).
//   (1) the pure builder inside workerd (scripts/bench-crl-worker.ts): entries → TBSCertList →
//       signature → CertificateList → base64, for an EC P-256 and an RSA-2048 issuer;
//   (2) end to end: `GET crl/rotate` on a mount whose pki_revoked holds n rows, seeded straight
//       into the local D1 with `wrangler d1 execute --local` while the Worker is stopped (no
//       test-only path in the service). That is the Authority DO reading D1 in pages, building,
//       signing, and writing the CRL (in slices above 1 MB of base64) back to D1.
// Memory: the peak resident set of the workerd process during the run, above its resident set
// just before (Linux /proc: clear_refs 5 resets VmHWM). That is an upper bound for the isolate's
// heap growth: it includes workerd's own buffers and, for (2), local SQLite's page cache.
//   BENCH_CRL_SIZES=1000,10000,100000   BENCH_CRL_REPEAT=3
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { unstable_startWorker } from "wrangler";
import { SEAL_KEY, TOKEN, call, root } from "./lib/bench-common.mjs";

const wrangler = path.join(root, "node_modules", ".bin", "wrangler");
const SIZES = (process.env.BENCH_CRL_SIZES ?? "1000,10000,100000").split(",").map(Number);
const REPEAT = Number(process.env.BENCH_CRL_REPEAT ?? "3");

// -- workerd process memory (Linux /proc) ------------------------------------------------------

function workerdPids() {
  const out = new Set();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/comm`, "utf8").trim() === "workerd") out.add(Number(d));
    } catch {
      // the process ended while we looked
    }
  }
  return out;
}

function memKb(pid, field) {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) : NaN;
}

/** Runs fn and returns [its result, peak RSS growth of the workerd process in MB]. */
async function withPeak(pid, fn) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
  } catch {
    // without clear_refs the lifetime high-water mark is reported (still an upper bound)
  }
  const before = memKb(pid, "VmRSS");
  const result = await fn();
  const peak = memKb(pid, "VmHWM");
  return [result, Math.max(0, (peak - before) / 1024)];
}

/**
 * Starts a Worker and sends `warmUp` (a path) once; the Worker's isolate runs in a workerd
 * process that appears with the first request, the largest new one.
 */
async function start(opts, warmUp) {
  const pidsBefore = workerdPids();
  const worker = await unstable_startWorker(opts);
  await worker.ready;
  const base = (await worker.url).toString().replace(/\/$/, "");
  await warmUp(base);
  const fresh = [...workerdPids()].filter((p) => !pidsBefore.has(p));
  fresh.sort((a, b) => memKb(b, "VmRSS") - memKb(a, "VmRSS"));
  return { worker, base, pid: fresh[0] };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// -- (1) the builder in workerd ----------------------------------------------------------------

async function builderRows() {
  const { worker, base, pid } = await start(
    {
      config: path.join(root, "scripts", "bench-crl.wrangler.toml"),
      dev: { persist: false, server: { hostname: "127.0.0.1", port: 0 }, inspector: false, watch: false, logLevel: "error" },
    },
    async (b) => (await fetch(`${b}/?n=1000&alg=ec`)).json(),
  );
  const rows = [];
  try {
    for (const alg of ["ec", "rsa"]) {
      for (const n of SIZES) {
        const runs = [];
        let peakMb = 0;
        for (let i = 0; i < REPEAT; i++) {
          const [r, mb] = await withPeak(pid, async () => (await fetch(`${base}/?n=${n}&alg=${alg}`)).json());
          runs.push(r);
          peakMb = Math.max(peakMb, mb);
        }
        const pick = (k) => +median(runs.map((r) => r[k])).toFixed(1);
        rows.push({
          issuer: alg === "ec" ? "EC P-256" : "RSA-2048",
          entries: n,
          "entries ms": pick("entriesMs"),
          "TBS ms": pick("tbsMs"),
          "sign ms": pick("signMs"),
          "base64 ms": pick("base64Ms"),
          "total ms": pick("totalMs"),
          "DER KiB": Math.round(runs[0].derBytes / 1024),
          "workerd RSS MB": +(memKb(pid, "VmRSS") / 1024).toFixed(0),
          "peak RSS +MB": +peakMb.toFixed(1),
        });
      }
    }
  } finally {
    await worker.dispose();
  }
  return rows;
}

// -- (2) end to end through D1 and the Authority -----------------------------------------------


function randomSerial() {
  const b = Buffer.from(crypto.getRandomValues(new Uint8Array(20)));
  b[0] &= 0x7f;
  return [...b].map((x) => x.toString(16).padStart(2, "0")).join(":");
}

/** Appends `count` revocations of `issuerId` to pki_revoked with wrangler's local D1. */
function seed(dir, mountId, issuerId, count) {
  const now = Math.floor(Date.now() / 1000);
  const lines = [];
  for (let i = 0; i < count; i += 500) {
    const values = [];
    for (let j = i; j < Math.min(count, i + 500); j++) {
      values.push(`('${mountId}','${randomSerial()}','${issuerId}',${now - (j % 86400)},${now + 86400},'',${Date.now()})`);
    }
    lines.push(`INSERT INTO pki_revoked (mount_id, serial, issuer_id, revocation_time, not_after, der, created_at) VALUES ${values.join(",")};`);
  }
  const file = path.join(dir, "seed.sql");
  writeFileSync(file, lines.join("\n"));
  execFileSync(wrangler, ["d1", "execute", "DB", "--local", "--persist-to", dir, "--file", file, "--yes"], { cwd: root, stdio: "ignore" });
  rmSync(file);
}

function opensslCount(crlDer, caPem) {
  const d = mkdtempSync(path.join(tmpdir(), "lanyard-bench-crl-"));
  try {
    writeFileSync(path.join(d, "crl.der"), crlDer);
    writeFileSync(path.join(d, "ca.pem"), caPem);
    const out = execFileSync("openssl", ["crl", "-inform", "DER", "-in", path.join(d, "crl.der"), "-CAfile", path.join(d, "ca.pem"), "-noout", "-text"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      maxBuffer: 256 * 1024 * 1024,
    });
    return (out.match(/Serial Number:/g) ?? []).length;
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
}

async function endToEndRows() {
  const dir = mkdtempSync(path.join(tmpdir(), "lanyard-bench-crl-d1-"));
  execFileSync(wrangler, ["d1", "migrations", "apply", "DB", "--local", "--persist-to", dir], { cwd: root, stdio: "ignore" });
  const opts = {
    config: path.join(root, "wrangler.toml"),
    bindings: {
      ENVIRONMENT: { type: "plain_text", value: "development" },
      ROOT_TOKEN: { type: "plain_text", value: TOKEN },
      SEAL_KEY: { type: "plain_text", value: SEAL_KEY },
    },
    dev: { persist: dir, server: { hostname: "127.0.0.1", port: 0 }, inspector: false, watch: false, logLevel: "error" },
  };
  const rows = [];
  try {
    let { worker, base } = await start(opts, async (b) => (await fetch(`${b}/v1/sys/health`)).text());
    await call(base, "POST", "sys/mounts/crlbench", { type: "pki" });
    const rootGen = await call(base, "POST", "crlbench/root/generate/internal", { common_name: "CRL Bench Root", key_type: "ec", not_after: "2036-01-01T00:00:00Z" });
    const issuerId = rootGen.data.issuer_id;
    const mountId = (await call(base, "GET", "sys/mounts")).data["crlbench/"].uuid;
    await worker.dispose();
    let seeded = 0;
    for (const n of SIZES) {
      seed(dir, mountId, issuerId, n - seeded);
      seeded = n;
      let pid;
      // Warm-up: isolate, Authority DO, D1 connection.
      ({ worker, base, pid } = await start(opts, (b) => call(b, "GET", "crlbench/crl/rotate")));
      try {
        const times = [];
        let peakMb = 0;
        for (let i = 0; i < REPEAT; i++) {
          const [ms, mb] = await withPeak(pid, async () => {
            const t = performance.now();
            await call(base, "GET", "crlbench/crl/rotate");
            return performance.now() - t;
          });
          times.push(ms);
          peakMb = Math.max(peakMb, mb);
        }
        const t = performance.now();
        const der = Buffer.from(await (await fetch(`${base}/v1/crlbench/crl`)).arrayBuffer());
        const readMs = performance.now() - t;
        const listed = opensslCount(der, rootGen.data.certificate);
        rows.push({
          entries: n,
          "workerd RSS MB": +(memKb(pid, "VmRSS") / 1024).toFixed(0),
          "crl/rotate ms (median)": +median(times).toFixed(0),
          "GET crl ms": +readMs.toFixed(0),
          "DER KiB": Math.round(der.length / 1024),
          "openssl: verified, entries": listed,
          "peak RSS +MB": +peakMb.toFixed(1),
        });
      } finally {
        await worker.dispose();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

async function main() {
  console.log("\nLanyard CRL benchmark (local workerd, this machine)\n");
  console.log("(1) the CRL builder inside workerd, no I/O (median of runs; times are CPU time locally):");
  console.table(await builderRows());
  console.log("\n(2) end to end: GET crl/rotate with n revocations in D1 (Authority DO: paged D1 reads, build, sign, D1 write):");
  console.table(await endToEndRows());
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
