// V8 CPU profiles of the local runtime for the benchmarks (BENCH_PROFILE=1 with scripts/bench-audit.mjs;
// docs/audit.md "What it costs", "Profiled"). workerd runs one V8 isolate per service of
// Miniflare's config (the Worker, its Durable Objects included, is `core:user:`; the local queue
// broker `queues:queue…`; D1 `d1:db…`; the assets router and proxy `assets:…`) and its inspector
// (Miniflare's `inspectorPort`, https://developers.cloudflare.com/workers/observability/dev-tools/)
// offers each as a Chrome DevTools Protocol target
// (https://chromedevtools.github.io/devtools-protocol/v8/Profiler/). `startProfiles` runs
// Profiler.enable / setSamplingInterval / start on the isolates a request touches (PROFILED),
// `stop` runs Profiler.stop; `summarize` counts each isolate's samples (JS, GC, the C++ run for
// it) and the Worker's by source file through the bundle's source map; `report` sets them against
// each thread's CPU from /proc: what the busy thread spent outside every isolate (workerd's event
// loop, sockets, RPC), V8's background thread, and the profiler's own thread (left out). Needs the
// `ws` package (a dependency of miniflare) and BENCH_TARGET=worker (the default). Not a benchmark itself.
import { readFileSync, readdirSync } from "node:fs";
import { SourceMap } from "node:module";
import WebSocket from "ws";

/** One CDP session per inspector target; `send` resolves with the command's result. */
async function session(url) {
  const ws = new WebSocket(url, { perMessageDeflate: false, maxPayload: 1 << 30 });
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  let next = 1;
  const pending = new Map();
  ws.on("message", (data) => {
    const msg = JSON.parse(data.toString());
    const p = msg.id !== undefined ? pending.get(msg.id) : undefined;
    if (!p) return;
    pending.delete(msg.id);
    if (msg.error) p.reject(new Error(`${msg.error.message} (${url})`));
    else p.resolve(msg.result);
  });
  const send = (method, params = {}) =>
    new Promise((resolve, reject) => {
      const id = next++;
      pending.set(id, { resolve, reject });
      ws.send(JSON.stringify({ id, method, params }));
    });
  return { send, close: () => ws.close() };
}

/**
 * The isolates a request, its entries and their delivery run in (the others stay idle under this
 * load): the Worker, local D1, the local queue broker, and the assets router and proxy in front
 * of the Worker's socket. Each profiled isolate costs CPU of its own while it runs.
 */
export const PROFILED = /^(core:user:|d1:|queues:queue(:lanyard-audit)?$|assets:(router|rpc-proxy))/;

/**
 * Starts sampling every isolate of the workerd whose inspector listens on `port`, every
 * `intervalUs` microseconds. Resolves with {stop()}: stops them all and resolves with
 * [{target, profile}], one per isolate that had one.
 */
export async function startProfiles(port, intervalUs = 1000, only = (id) => PROFILED.test(id)) {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json`)).json()).filter((t) => only(t.id));
  const sessions = [];
  for (const t of targets) {
    try {
      const s = await session(t.webSocketDebuggerUrl);
      await s.send("Profiler.enable");
      await s.send("Profiler.setSamplingInterval", { interval: intervalUs });
      await s.send("Profiler.start");
      sessions.push({ target: t.id, s });
    } catch {
      // An isolate that does not take a profiler session (none seen so far): left out.
    }
  }
  return {
    async stop() {
      const out = [];
      for (const { target, s } of sessions) {
        try {
          const { profile } = await s.send("Profiler.stop");
          out.push({ target, profile });
        } finally {
          s.close();
        }
      }
      return out;
    },
  };
}

/** CPU seconds by thread name of one process (/proc/<pid>/task/<tid>/{comm,stat}). */
export function threadCpu(pid) {
  const out = {};
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim();
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
        const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        // Threads of one name (V8's workers) are added up; the main thread is named after the process.
        out[name] = (out[name] ?? 0) + (Number(f[11]) + Number(f[12])) / 100;
      } catch {
        // The thread ended between the listing and the read.
      }
    }
  } catch {
    // Not Linux, or the process is gone.
  }
  return out;
}

/** The thread CPU used between two `threadCpu` readings, by thread name. */
export function threadDelta(before, after) {
  const out = {};
  for (const [k, v] of Object.entries(after)) out[k] = v - (before[k] ?? 0);
  return out;
}

const SPECIAL = new Set(["(root)", "(program)", "(idle)", "(garbage collector)"]);

/**
 * The bundle's source map (wrangler minifies: wrangler.toml `minify`), as a function from a
 * call frame to its source file and line and that line's text (the function's first line).
 */
export function sourceLocator(bundlePath) {
  const map = new SourceMap(JSON.parse(readFileSync(`${bundlePath}.map`, "utf8")));
  const texts = new Map();
  const bundle = bundlePath.split("/").pop();
  return (frame) => {
    if (!frame.url || frame.url.split("/").pop() !== bundle) return null;
    const e = map.findEntry(frame.lineNumber, frame.columnNumber);
    if (!e || !e.originalSource) return null;
    const i = e.originalSource.lastIndexOf("/src/");
    const j = e.originalSource.lastIndexOf("/node_modules/");
    const file = i >= 0 ? e.originalSource.slice(i + 1) : j >= 0 ? e.originalSource.slice(j + 1) : e.originalSource;
    if (!texts.has(e.originalSource)) {
      let lines = [];
      try {
        lines = readFileSync(new URL(e.originalSource, `file://${bundlePath}`), "utf8").split("\n");
      } catch {
        // A source not on disk (a BENCH_REV tree removed): the file and line still say where.
      }
      texts.set(e.originalSource, lines);
    }
    const text = (texts.get(e.originalSource)[e.originalLine] ?? "").trim().replace(/\s*\{$/, "");
    return { file, line: e.originalLine + 1, text: text.length > 70 ? `${text.slice(0, 67)}...` : text };
  };
}

/**
 * The part of the Worker a source file is in. The group commit serves both the audit batcher
 * and the PKI's certificate rows: an async continuation's stack holds only the resumed function,
 * so the two cannot be told apart by stack.
 */
export function partOfFile(file) {
  if (file.startsWith("src/audit/delivery/")) return "audit consumer (delivery)";
  if (file === "src/audit/hmac.ts") return "audit HMAC";
  if (file === "src/audit/enqueue.ts" || file === "src/audit/message.ts") return "audit serialize + message";
  if (file === "src/audit/batcher.ts") return "audit batcher";
  if (file === "src/core/group-commit.ts") return "group commit (audit batcher, PKI cert rows): waits, polls";
  if (file.startsWith("src/audit/") || file === "src/app/audit-hook.ts") return "audit hook, filter, device list";
  if (file.startsWith("node_modules/")) return `library ${file.split("/").slice(1, file.startsWith("node_modules/@") ? 3 : 2).join("/")}`;
  if (file.startsWith("src/")) return `Worker ${file.split("/").slice(1, 3).join("/")}`;
  return "other";
}

/**
 * Sampled time (ms) of each isolate's profiles: JS, GC, "(program)" (the isolate's thread in
 * workerd's C++ on its behalf: RPC, SQLite, serialization), by function, and for the Worker
 * (`locate`: its bundle's source map) by part: the first frame from the leaf that maps to a
 * source file decides (a builtin such as JSON.stringify or crypto.subtle counts for its caller).
 * workerd's profiler samples an isolate only while it runs (its profile holds no samples while
 * it waits), so a sample stands for one sampling interval, not for the time to the next sample.
 */
export function summarize(profiles, locate, intervalUs) {
  const ms = intervalUs / 1000;
  const isolates = {};
  const functions = new Map();
  const parts = {};
  for (const { target, profile } of profiles) {
    const byId = new Map(profile.nodes.map((n) => [n.id, n]));
    const parent = new Map();
    for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
    const iso = (isolates[target] ??= { js: 0, gc: 0, program: 0, idle: 0 });
    const user = target === "core:user:";
    for (const id of profile.samples ?? []) {
      const node = byId.get(id);
      const fn = node.callFrame.functionName || "(anonymous)";
      if (fn === "(garbage collector)") iso.gc += ms;
      else if (fn === "(program)" || fn === "(root)") iso.program += ms;
      else if (fn === "(idle)") iso.idle += ms;
      else iso.js += ms;
      if (SPECIAL.has(fn) && fn !== "(garbage collector)") continue;
      const at = user && locate ? locate(node.callFrame) : null;
      const where = at ? `${at.file}:${at.line} ${at.text}` : `${fn} ${node.callFrame.url.split("/").pop()}:${node.callFrame.lineNumber + 1}`;
      const key = `${user ? "Worker" : target} ${where}`;
      functions.set(key, (functions.get(key) ?? 0) + ms);
      if (user) {
        const part = fn === "(garbage collector)" ? "GC" : partOf(node, byId, parent, locate);
        parts[part] = (parts[part] ?? 0) + ms;
      }
    }
  }
  return { isolates, functions, parts };
}

function partOf(node, byId, parent, locate) {
  for (let n = node; n; n = byId.get(parent.get(n.id))) {
    const at = locate ? locate(n.callFrame) : null;
    if (at) return partOfFile(at.file);
  }
  return "runtime JS / builtins with no Worker frame";
}

/** The isolate a target id belongs to, in the report's words. */
export function isolateKind(target) {
  if (target === "core:user:") return "Worker (request path, Authority DO, audit consumer)";
  if (target.startsWith("queues:")) return "local queue broker (Miniflare)";
  if (target.startsWith("d1:")) return "local D1 (Miniflare)";
  return "other Miniflare services";
}

/** V8's profiler event thread: the profiling's own cost, left out of the totals. */
const PROFILER_THREAD = "v8:ProfEvntProc";

/**
 * A printable summary per request: ms of CPU per request by isolate kind (JS, GC, C++ on its
 * behalf), what the busiest thread spent outside every profiled isolate (workerd's event loop,
 * sockets and HTTP, the plumbing between isolates), the other threads, and the total from /proc;
 * then the Worker by part and the top functions. The profiler's own thread is shown apart; its
 * samples are taken on the busiest thread too, which the profiled figures therefore overstate. Sampled time above the thread's CPU (the
 * machine descheduled it while it held an isolate) is scaled down to the thread's CPU.
 */
export function report(summary, threads, requests, top = 25) {
  const kinds = {};
  for (const [t, v] of Object.entries(summary.isolates)) {
    const k = (kinds[isolateKind(t)] ??= { js: 0, gc: 0, program: 0 });
    k.js += v.js;
    k.gc += v.gc;
    k.program += v.program;
  }
  const sampled = Object.values(kinds).reduce((n, k) => n + k.js + k.gc + k.program, 0);
  const profilerMs = (threads[PROFILER_THREAD] ?? 0) * 1000;
  const threadMs = Object.entries(threads)
    .filter(([k]) => k !== PROFILER_THREAD)
    .map(([, v]) => v * 1000);
  const total = threadMs.reduce((n, v) => n + v, 0);
  const main = Math.max(0, ...threadMs);
  const scale = sampled > main && sampled > 0 ? main / sampled : 1;
  const per = (x) => +((x * scale) / requests).toFixed(3);
  const rows = Object.entries(kinds).map(([k, v]) => ({ where: k, "JS": per(v.js), "GC": per(v.gc), "C++ for it": per(v.program), "total ms/req": per(v.js + v.gc + v.program) }));
  const outside = Math.max(0, main - sampled * scale);
  rows.push({ where: "busiest thread outside the profiled isolates (event loop, sockets, RPC)", "total ms/req": +(outside / requests).toFixed(3) });
  rows.push({ where: "other threads (V8 background GC and compiler, workerd helpers)", "total ms/req": +((total - main) / requests).toFixed(3) });
  rows.push({ where: "workerd process (/proc), less the profiler's thread", "total ms/req": +(total / requests).toFixed(3) });
  rows.push({ where: `the profiler's own thread (${PROFILER_THREAD}; not there unprofiled)`, "total ms/req": +(profilerMs / requests).toFixed(3) });
  const parts = Object.entries(summary.parts)
    .sort((a, b) => b[1] - a[1])
    .map(([part, ms]) => ({ "Worker part": part, "ms/req": per(ms) }));
  const fns = [...summary.functions.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([fn, ms]) => ({ function: fn.length > 110 ? `${fn.slice(0, 107)}...` : fn, "self ms/req": per(ms) }));
  return { rows, parts, fns, scale };
}

/** CPU seconds by thread name of several processes (workerd's pids), added up. */
export function threadsOf(pids) {
  const out = {};
  for (const pid of pids) for (const [k, v] of Object.entries(threadCpu(pid))) out[k] = (out[k] ?? 0) + v;
  return out;
}

function merge(into, s) {
  for (const [t, v] of Object.entries(s.isolates)) {
    const a = (into.isolates[t] ??= { js: 0, gc: 0, program: 0, idle: 0 });
    for (const k of Object.keys(a)) a[k] += v[k];
  }
  for (const [k, v] of s.functions) into.functions.set(k, (into.functions.get(k) ?? 0) + v);
  for (const [k, v] of Object.entries(s.parts)) into.parts[k] = (into.parts[k] ?? 0) + v;
}

/**
 * Profiles benchmark rows: `begin(pids)` before a row's load, then `end(key, requests)` after
 * it (and its drain); rows of one key (scenario and device) add up over the rounds. `split(key)`
 * gives the row's CPU per request by where it ran, `print()` the breakdowns. BENCH_PROFILE_US
 * sets the sampling interval (default 1000 µs: at 250 µs the profilers cost more CPU than a KV read); BENCH_PROFILE_DIR keeps each row's profiles as
 * .cpuprofile files (Chrome DevTools, Performance panel, loads them).
 */
export function rowProfiler(port, bundle) {
  const locate = sourceLocator(bundle);
  const interval = Number(process.env.BENCH_PROFILE_US ?? "1000");
  const acc = new Map();
  let n = 0;
  return {
    async begin(pids) {
      const running = await startProfiles(port, interval);
      const t0 = threadsOf(pids);
      return {
        async end(key, requests) {
          const threads = threadDelta(t0, threadsOf(pids));
          const profiles = await running.stop();
          if (process.env.BENCH_PROFILE_DIR) {
            const { writeFileSync } = await import("node:fs");
            n++;
            for (const p of profiles) if (p.profile.samples?.length) writeFileSync(`${process.env.BENCH_PROFILE_DIR}/${n}-${key.replace(/\W+/g, "_")}-${p.target.replace(/\W+/g, "_")}.cpuprofile`, JSON.stringify(p.profile));
          }
          const a = acc.get(key) ?? { requests: 0, isolates: {}, functions: new Map(), parts: {}, threads: {} };
          a.requests += requests;
          merge(a, summarize(profiles, locate, interval));
          for (const [k, v] of Object.entries(threads)) a.threads[k] = (a.threads[k] ?? 0) + v;
          acc.set(key, a);
        },
      };
    },
    /** ms per request: process total, the local queue broker's isolate and the Worker's (JS, GC, C++ for it), the audit consumer's JS (null before any row). */
    split(key) {
      const a = acc.get(key);
      if (!a || a.requests === 0) return null;
      const total = Object.entries(a.threads).reduce((x, [k, v]) => (k === PROFILER_THREAD ? x : x + v), 0) * 1000;
      const { scale } = report(a, a.threads, a.requests);
      let broker = 0;
      for (const [t, v] of Object.entries(a.isolates)) if (t.startsWith("queues:")) broker += v.js + v.gc + v.program;
      const w = a.isolates["core:user:"] ?? { js: 0, gc: 0, program: 0 };
      const consumer = a.parts["audit consumer (delivery)"] ?? 0;
      const per = (x) => (x * scale) / a.requests;
      return { total: total / a.requests, broker: per(broker), worker: per(w.js + w.gc + w.program), consumer: per(consumer) };
    },
    print() {
      for (const [key, a] of acc) {
        const r = report(a, a.threads, a.requests);
        console.log(`\nProfile: ${key} (${a.requests} requests, sampled every ${interval} µs; ms of CPU per request)`);
        console.table(r.rows);
        console.log("workerd threads (ms of CPU per request, /proc):", Object.fromEntries(Object.entries(a.threads).map(([k, v]) => [k, +((v * 1000) / a.requests).toFixed(3)])));
        console.table(r.parts);
        console.table(r.fns);
      }
    },
  };
}
