// The load generator of `npm run bench -- issue` (scripts/bench.mjs), one for both sides of the
// comparison: `hey` when it is on PATH (Debian package `hey`; the figures in
// docs/pki-issuance-benchmark.md were taken with it), else autocannon (a dependency). BENCH_LOADGEN=autocannon forces autocannon.
// Invariant: every row of a run, Lanyard's and the peer's, goes through the same generator with
// the same concurrency and duration, so the ratios compare servers, not clients.
// A run resolves with {requests, errors, statuses, rps, p50, p99}: `requests` counts every answer
// and every transport error, `errors` the non-2xx answers plus transport errors, `rps` the 2xx
// answers per second, latencies in ms (over every answer).
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import autocannon from "autocannon";

/** True when `cmd` runs (found on PATH). */
export function onPath(cmd, args = ["--help"]) {
  const r = spawnSync(cmd, args, { stdio: "ignore" });
  return !r.error;
}

/** Runs a command, resolving with its stdout; rejects with its stderr on a non-zero exit. */
function run(cmd, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} exited ${code}: ${err.trim() || out.trim()}`))));
  });
}

/**
 * Parses hey's summary (hey/requester/print.go): "Requests/sec:", the "Latency distribution"
 * lines ("50% in 0.0123 secs"), "Status code distribution" ("[200]\t123 responses") and
 * "Error distribution" ("[12]\tPost ...: connection refused").
 */
export function parseHey(text) {
  const rps = Number(/Requests\/sec:\s*([\d.]+)/.exec(text)?.[1] ?? NaN);
  const pct = (p) => Number(new RegExp(`\\b${p}% in ([\\d.]+) secs`).exec(text)?.[1] ?? NaN) * 1000;
  const statuses = {};
  const statusPart = /Status code distribution:\n([\s\S]*?)(?:\n\s*\n|Error distribution:|$)/.exec(text)?.[1] ?? "";
  for (const m of statusPart.matchAll(/\[(\d+)\]\s+(\d+) responses/g)) statuses[m[1]] = Number(m[2]);
  let transport = 0;
  const errorPart = /Error distribution:\n([\s\S]*)$/.exec(text)?.[1] ?? "";
  const firstError = /\[\d+\]\s+(.*)/.exec(errorPart)?.[1];
  for (const m of errorPart.matchAll(/^\s*\[(\d+)\]/gm)) transport += Number(m[1]);
  const answered = Object.values(statuses).reduce((a, b) => a + b, 0);
  const non2xx = Object.entries(statuses).reduce((a, [code, n]) => a + (code.startsWith("2") ? 0 : n), 0);
  const requests = answered + transport;
  const errors = non2xx + transport;
  // Successful answers per second: hey's Requests/sec counts every answer, errors included.
  const okRps = requests > 0 ? (rps * (requests - errors)) / requests : NaN;
  return { requests, errors, statuses, firstError, rps: okRps, p50: pct(50), p99: pct(99) };
}

/** hey -z <seconds>s -c <concurrency>, the body (if any) from a temporary file (binary-safe). */
async function heyLoad(url, req, concurrency, seconds) {
  const args = ["-z", `${seconds}s`, "-c", String(concurrency), "-m", req.method];
  for (const [k, v] of Object.entries(req.headers ?? {})) {
    if (k.toLowerCase() === "content-type") args.push("-T", v);
    else args.push("-H", `${k}: ${v}`);
  }
  let dir;
  if (req.body !== undefined) {
    dir = mkdtempSync(path.join(tmpdir(), "lanyard-bench-body-"));
    writeFileSync(path.join(dir, "body"), req.body);
    args.push("-D", path.join(dir, "body"));
  }
  try {
    return parseHey(await run("hey", [...args, url]));
  } finally {
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
}

/** autocannon with `concurrency` connections for `seconds` (closed loop). */
async function autocannonLoad(url, req, concurrency, seconds) {
  const statuses = {};
  const result = await autocannon({ url, method: req.method, headers: req.headers ?? {}, body: req.body, connections: concurrency, duration: seconds });
  for (const [k, v] of Object.entries(result.statusCodeStats ?? {})) statuses[k] = v.count;
  return {
    requests: result.requests.total + result.errors + result.timeouts,
    errors: result.errors + result.timeouts + result.non2xx,
    statuses,
    firstError: result.errors + result.timeouts > 0 ? `${result.errors} errors, ${result.timeouts} timeouts` : undefined,
    // Successful answers per second (autocannon's requests.total counts every answer).
    rps: result["2xx"] / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
  };
}

/**
 * The generator for this run: {name, load(url, req, concurrency, seconds)} where `req` is
 * {method, headers?, body?} (body a string or a Buffer).
 */
export function loadGenerator() {
  if (process.env.BENCH_LOADGEN !== "autocannon" && onPath("hey", ["-h"])) return { name: "hey", load: heyLoad };
  return { name: "autocannon", load: autocannonLoad };
}
