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
import { Log, LogLevel, Miniflare } from "miniflare";
import { unstable_DevEnv, unstable_getMiniflareWorkerOptions } from "wrangler";

export const root = path.dirname(path.dirname(path.dirname(fileURLToPath(import.meta.url))));
export const TOKEN = "bench-root-token-0123456789";
export const SEAL_KEY = Buffer.alloc(32, 7).toString("base64");
export const SECONDS = Number(process.env.BENCH_SECONDS ?? "5");
export const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? "1,8").split(",").map(Number);
export const TARGET = ["proxy", "direct"].includes(process.env.BENCH_TARGET) ? process.env.BENCH_TARGET : "worker";
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
 * revision's wrangler.toml, src/, migrations/ and console/ (the static assets) exported (git archive, read-only on the
 * checkout) into `dir`, with the checkout's node_modules linked in. The latter measures a
 * committed state while src/ is being edited.
 */
function sourceTree(dir) {
  const rev = process.env.BENCH_REV;
  if (!rev) return root;
  const tree = path.join(dir, "tree");
  mkdirSync(tree);
  const tar = execFileSync("git", ["archive", "--format=tar", rev, "wrangler.toml", "package.json", "tsconfig.json", "src", "migrations", "console"], { cwd: root, maxBuffer: 1 << 28 });
  execFileSync("tar", ["-x", "-C", tree], { input: tar });
  symlinkSync(path.join(root, "node_modules"), path.join(tree, "node_modules"));
  return tree;
}

/**
 * Bundles the Worker once, so the benchmark runs a fixed build whatever happens in src/. `entry`
 * (a path) replaces wrangler.toml's `main` for a bench-only entry that wraps the Worker (e.g.
 * scripts/bench-scale-worker.ts); the bindings stay wrangler.toml's.
 */
function bundle(tree, outdir, entry) {
  const wrangler = path.join(root, "node_modules", ".bin", "wrangler");
  try {
    execFileSync(wrangler, ["deploy", ...(entry ? [entry] : []), "--dry-run", "--outdir", outdir, "-c", path.join(tree, "wrangler.toml")], { cwd: tree, stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    // src/ may be mid-edit: say why the bundle failed rather than only that it did.
    const said = `${e.stderr ?? ""}${e.stdout ?? ""}`.trim().split("\n").slice(-15).join("\n");
    throw new Error(`bundling the Worker failed (wrangler deploy --dry-run):\n${said}`);
  }
  // wrangler names the bundle after its entry module.
  return path.join(outdir, entry ? `${path.basename(entry).replace(/\.[cm]?[jt]s$/, "")}.js` : "index.js");
}

/**
 * Applies the migrations to a throwaway state directory, bundles the Worker and starts it in the
 * local runtime with the bench's token and seal key (plus `bindings`, in startWorker's
 * {type, value} form). Resolves with {worker: {dispose}, dir, base, entrypoint}; `base` is the URL BENCH_TARGET
 * picks. `opts.entry`: a bench-only entry module bundled instead of wrangler.toml's `main` (it
 * must export the Durable Object classes wrangler.toml names); not with BENCH_REV.
 * - "worker" (the default): the Worker's own socket in workerd (Miniflare's unsafeDirectSockets),
 *   the Worker alone as it runs on Cloudflare. Miniflare's wrangler.toml reading
 *   (unstable_getMiniflareWorkerOptions) gives the same D1, Durable Object, queue and R2 bindings
 *   as `wrangler dev`.
 * - "direct": the same runtime started by wrangler's dev environment, loaded on Miniflare's entry
 *   socket: every request first passes Miniflare's entry Worker (a JavaScript proxy in the same
 *   workerd that adds the dev-only headers and compresses), ~0.2 ms of CPU per request on this
 *   machine, which Cloudflare does not run (docs/pki-issuance-benchmark.md).
 * - "proxy": through wrangler's dev proxy (node), as `npm run dev` serves.
 */
export async function startBenchWorker(bindings = {}, opts = {}) {
  const dir = mkdtempSync(path.join(tmpdir(), "lanyard-bench-"));
  const wrangler = path.join(root, "node_modules", ".bin", "wrangler");
  const tree = sourceTree(dir);
  execFileSync(wrangler, ["d1", "migrations", "apply", "DB", "--local", "--persist-to", dir, "-c", path.join(tree, "wrangler.toml")], { cwd: tree, stdio: "ignore" });
  const entrypoint = bundle(tree, path.join(dir, "bundle"), opts.entry);
  const vars = {
    ENVIRONMENT: { type: "plain_text", value: "development" },
    ROOT_TOKEN: { type: "plain_text", value: TOKEN },
    SEAL_KEY: { type: "plain_text", value: SEAL_KEY },
    ...bindings,
  };
  if (TARGET === "worker") return { ...(await startOnOwnSocket(tree, entrypoint, dir, vars)), dir, entrypoint };
  return { ...(await startWithDevEnv(tree, entrypoint, dir, vars)), dir, entrypoint };
}

/** BENCH_TARGET=worker: Miniflare with the Worker on a socket of its own (no entry Worker). */
async function startOnOwnSocket(tree, entrypoint, dir, vars) {
  const { workerOptions } = unstable_getMiniflareWorkerOptions(path.join(tree, "wrangler.toml"));
  const plain = Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, v.value]));
  const mf = new Miniflare({
    ...workerOptions,
    modules: true,
    scriptPath: entrypoint,
    modulesRoot: path.dirname(entrypoint),
    bindings: { ...workerOptions.bindings, ...plain },
    unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }],
    // The layout `wrangler d1 migrations apply --persist-to dir` wrote (v3/<plugin>).
    defaultPersistRoot: path.join(dir, "v3"),
    host: "127.0.0.1",
    port: 0,
    log: new Log(LogLevel.ERROR),
    // BENCH_INSPECTOR=<port>: workerd's own inspector (/json lists the Worker and its services).
    ...(process.env.BENCH_INSPECTOR ? { inspectorPort: Number(process.env.BENCH_INSPECTOR) } : {}),
  });
  await mf.ready;
  const base = (await mf.unsafeGetDirectURL()).toString().replace(/\/$/, "");
  return { worker: { dispose: () => mf.dispose() }, base };
}

/**
 * BENCH_TARGET=direct|proxy: wrangler's dev environment. Miniflare's entry URL comes from the
 * dev environment's reloadComplete event, which wrangler does not expose.
 */
async function startWithDevEnv(tree, entrypoint, dir, bindings) {
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
    bindings,
    dev: { persist: dir, server: { hostname: "127.0.0.1", port: 0 }, inspector: process.env.BENCH_INSPECTOR ? { port: Number(process.env.BENCH_INSPECTOR) } : false, watch: false, logLevel: process.env.BENCH_LOG ?? "error" },
  });
  await worker.ready;
  const proxyUrl = (await worker.url).toString().replace(/\/$/, "");
  return { worker, base: TARGET === "proxy" ? proxyUrl : await direct };
}
