// The audit bench's collector (scripts/bench-audit.mjs): an HTTP server that accepts every NDJSON
// batch with 204 and counts the entries by id, in a thread of its own (node:worker_threads).
// In autocannon's thread it paused the load: parsing one POST of a KV read row's second (~1.3 MB,
// ~1,100 entries) takes ~25 ms of JavaScript, during which no request was sent or answered, so
// an audited row lost that much of every second to the bench itself (docs/audit.md "What it
// costs"). A real collector is another machine.
//
// The counts the bench polls while a row drains live in a SharedArrayBuffer (read without a
// message round trip); the ids themselves stay in the thread, which answers the final summary.
import { createServer } from "node:http";
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
import { gunzipSync } from "node:zlib";

/** The shared counters, in their slots' order. */
const COUNTERS = ["batches", "request", "response", "pairs", "open", "distinct"];
const SLOT = Object.fromEntries(COUNTERS.map((name, i) => [name, i]));

if (!isMainThread) runCollector(workerData.counters);

/** The thread: the server and its counts (pairs: requests whose two entries arrived; open: request entries waiting for their response entry). */
function runCollector(shared) {
  const counts = new Int32Array(shared);
  const ids = new Map();
  const open = new Set();
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      let body = Buffer.concat(chunks);
      if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body);
      Atomics.add(counts, SLOT.batches, 1);
      for (const line of body.toString("utf8").split("\n")) {
        if (!line.trim()) continue;
        const e = JSON.parse(line);
        const copies = ids.get(e.id) ?? 0;
        ids.set(e.id, copies + 1);
        if (copies > 0) continue; // counted once below; the copies are reported
        Atomics.add(counts, e.type === "request" ? SLOT.request : SLOT.response, 1);
        const rid = e.id.replace(/:(request|response)$/, "");
        const other = `${rid}:${e.type === "request" ? "response" : "request"}`;
        if (ids.has(other)) {
          Atomics.add(counts, SLOT.pairs, 1);
          open.delete(rid);
        } else if (e.type === "request") open.add(rid);
      }
      Atomics.store(counts, SLOT.open, open.size);
      Atomics.store(counts, SLOT.distinct, ids.size);
      res.writeHead(204).end();
    });
  });
  server.listen(0, "127.0.0.1", () => parentPort.postMessage({ port: server.address().port }));
  parentPort.on("message", (m) => {
    if (m === "summary") {
      const twice = [...ids.values()].filter((n) => n > 1).length;
      const requests = new Set([...ids.keys()].map((id) => id.replace(/:(request|response)$/, "")));
      const unpaired = [...requests].filter((r) => !ids.has(`${r}:request`) || !ids.has(`${r}:response`)).length;
      parentPort.postMessage({ twice, unpaired });
    } else if (m === "close") server.close(() => parentPort.close());
  });
}

/**
 * Starts the collector thread. `seen` reads the live counts (batches, request, response, pairs,
 * open, distinct); `summary()` resolves with the entries received more than once and the requests
 * missing an entry.
 */
export async function startCollector() {
  const shared = new SharedArrayBuffer(COUNTERS.length * Int32Array.BYTES_PER_ELEMENT);
  const counts = new Int32Array(shared);
  const worker = new Worker(new URL(import.meta.url), { workerData: { counters: shared } });
  const { port } = await new Promise((resolve, reject) => {
    worker.once("message", resolve);
    worker.once("error", reject);
  });
  const seen = Object.defineProperties(
    {},
    Object.fromEntries(COUNTERS.map((name, i) => [name, { get: () => Atomics.load(counts, i), enumerable: true }])),
  );
  const ask = (m) =>
    new Promise((resolve) => {
      worker.once("message", resolve);
      worker.postMessage(m);
    });
  return {
    seen,
    url: `http://127.0.0.1:${port}/ingest`,
    summary: () => ask("summary"),
    close: async () => {
      worker.postMessage("close");
      await new Promise((r) => worker.once("exit", r));
    },
  };
}
