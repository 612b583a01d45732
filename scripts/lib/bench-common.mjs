// Shared by the benchmarks (scripts/bench*.mjs): quiet wrangler, the root-token API call, the
// Worker bundled once (from the checkout, or from a committed tree with BENCH_REV=<revision>)
// and started in the local runtime with its direct workerd URL, and the CPU readings from /proc
// (workerd's children of this process; any one pid, e.g. the cfssl peer). Not a benchmark
// itself (run-bench.mjs runs scripts/bench*.mjs).
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, symlinkSync } from "node:fs";
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

/**
 * /proc/<pid>/stat of one process: its parent pid and the CPU seconds (utime + stime, every
 * thread) it used so far; null if it is gone or off Linux. The fields after the command name
 * (which may hold spaces, hence the last ")") are proc(5)'s from "state" on.
 */
function procStat(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { ppid: Number(fields[1]), cpu: (Number(fields[11]) + Number(fields[12])) / 100 }; // clock ticks (USER_HZ = 100)
  } catch {
    return null;
  }
}

/** CPU seconds (user + system) used so far by one process (e.g. the cfssl peer); NaN if unreadable. */
export function processCpu(pid) {
  return procStat(pid)?.cpu ?? NaN;
}

/** CPU seconds (user + system) used so far by each workerd child of this process; {} off Linux. */
export function workerdCpu() {
  const out = {};
  if (!existsSync("/proc/self/stat")) return out;
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    const st = procStat(pid);
    if (!st || st.ppid !== process.pid) continue;
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("workerd")) out[pid] = st.cpu;
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

/**
 * The source tree to bundle: the checkout itself, or with BENCH_REV=<git revision> that
 * revision's wrangler.toml, src/ and migrations/ exported (git archive, read-only on the
 * checkout) into `dir`, with the checkout's node_modules linked in. The latter measures a
 * committed state while src/ is being edited.
 */
function sourceTree(dir) {
  const rev = process.env.BENCH_REV;
  if (!rev) return root;
  const tree = path.join(dir, "tree");
  mkdirSync(tree);
  const tar = execFileSync("git", ["archive", "--format=tar", rev, "wrangler.toml", "package.json", "tsconfig.json", "src", "migrations"], { cwd: root, maxBuffer: 1 << 28 });
  execFileSync("tar", ["-x", "-C", tree], { input: tar });
  symlinkSync(path.join(root, "node_modules"), path.join(tree, "node_modules"));
  return tree;
}

/** Bundles the Worker once, so the benchmark runs a fixed build whatever happens in src/. */
function bundle(tree, outdir) {
  const wrangler = path.join(root, "node_modules", ".bin", "wrangler");
  try {
    execFileSync(wrangler, ["deploy", "--dry-run", "--outdir", outdir, "-c", path.join(tree, "wrangler.toml")], { cwd: tree, stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    // src/ may be mid-edit: say why the bundle failed rather than only that it did.
    const said = `${e.stderr ?? ""}${e.stdout ?? ""}`.trim().split("\n").slice(-15).join("\n");
    throw new Error(`bundling the Worker failed (wrangler deploy --dry-run):\n${said}`);
  }
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
  const tree = sourceTree(dir);
  execFileSync(wrangler, ["d1", "migrations", "apply", "DB", "--local", "--persist-to", dir, "-c", path.join(tree, "wrangler.toml")], { cwd: tree, stdio: "ignore" });
  const entrypoint = bundle(tree, path.join(dir, "bundle"));
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
    config: path.join(tree, "wrangler.toml"),
    entrypoint,
    // The runner watches its module root (else the project): the bundle's directory never changes.
    build: { bundle: false, moduleRoot: path.dirname(entrypoint) },
    bindings: {
      ENVIRONMENT: { type: "plain_text", value: "development" },
      ROOT_TOKEN: { type: "plain_text", value: TOKEN },
      SEAL_KEY: { type: "plain_text", value: SEAL_KEY },
      ...bindings,
    },
    dev: { persist: dir, server: { hostname: "127.0.0.1", port: 0 }, inspector: process.env.BENCH_INSPECTOR ? { port: Number(process.env.BENCH_INSPECTOR) } : false, watch: false, logLevel: process.env.BENCH_LOG ?? "error" },
  });
  await worker.ready;
  const proxyUrl = (await worker.url).toString().replace(/\/$/, "");
  const directUrl = await direct;
  return { worker, dir, proxyUrl, directUrl, base: TARGET === "proxy" ? proxyUrl : directUrl };
}
