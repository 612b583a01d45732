// Shared by the benchmarks (scripts/bench*.mjs): quiet wrangler, the root-token API call, the
// Worker bundled once and started in the local runtime with its direct workerd URL, and the
// workerd CPU reading from /proc. Not a benchmark itself (run-bench.mjs runs scripts/bench*.mjs).
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { unstable_DevEnv } from "wrangler";

export const root = path.dirname(path.dirname(path.dirname(fileURLToPath(import.meta.url))));
export const TOKEN = "bench-root-token-0123456789";
export const SEAL_KEY = Buffer.alloc(32, 7).toString("base64");
export const SECONDS = Number(process.env.BENCH_SECONDS ?? "5");
export const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? "1,8").split(",").map(Number);
export const TARGET = process.env.BENCH_TARGET === "proxy" ? "proxy" : "direct";
for (const [k, v] of Object.entries({ WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false", WRANGLER_HIDE_BANNER: "true" })) {
  process.env[k] = v;
}

/** A JSON API call with the bench's root token; throws on any status >= 300. */
export async function call(base, method, p, body, token = TOKEN) {
  const res = await fetch(`${base}/v1/${p}`, {
    method,
    // PATCH is a JSON merge patch (the README's HTTP conventions).
    headers: { "x-service-token": token, "content-type": method === "PATCH" ? "application/merge-patch+json" : "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/**
 * Closed-loop load with autocannon: `concurrency` connections, each sending its next request
 * when the previous one answers, for `seconds`. `req` is {path, method, headers?, body?}; any non-2xx answer counts as an error.
 */
export async function load(base, req, concurrency, seconds) {
  const result = await autocannon({
    url: `${base}${req.path}`,
    method: req.method,
    headers: req.headers ?? {},
    body: req.body,
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
export function workerdCpu() {
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
export function cpuPerRequest(before, after, requests) {
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
 * Applies the migrations to a throwaway state directory, bundles the Worker and starts it in
 * development mode with the bench's token and seal key (plus `bindings`). Resolves with the
 * state directory, the proxy URL, the Worker's own workerd URL (taken from the dev environment's
 * reloadComplete event, which wrangler does not expose) and `base`, the one BENCH_TARGET picks.
 */
export async function startBenchWorker(bindings = {}) {
  const dir = mkdtempSync(path.join(tmpdir(), "lanyard-bench-"));
  const wrangler = path.join(root, "node_modules", ".bin", "wrangler");
  execFileSync(wrangler, ["d1", "migrations", "apply", "DB", "--local", "--persist-to", dir], { cwd: root, stdio: "ignore" });
  const entrypoint = bundle(path.join(dir, "bundle"));
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
  const worker = await devEnv.startWorker({
    config: path.join(root, "wrangler.toml"),
    entrypoint,
    // The runner watches its module root (else the project): the bundle's directory never changes.
    build: { bundle: false, moduleRoot: path.dirname(entrypoint) },
    bindings: {
      ENVIRONMENT: { type: "plain_text", value: "development" },
      ROOT_TOKEN: { type: "plain_text", value: TOKEN },
      SEAL_KEY: { type: "plain_text", value: SEAL_KEY },
      ...bindings,
    },
    dev: { persist: dir, server: { hostname: "127.0.0.1", port: 0 }, inspector: false, watch: false, logLevel: process.env.BENCH_LOG ?? "error" },
  });
  await worker.ready;
  const proxyUrl = (await worker.url).toString().replace(/\/$/, "");
  const directUrl = await direct;
  return { worker, dir, proxyUrl, directUrl, base: TARGET === "proxy" ? proxyUrl : directUrl };
}
