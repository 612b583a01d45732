#!/usr/bin/env node
// Inventory benchmark (docs/pki-inventory.md): LIST certs/detailed, certs/counts and
// certs/expiry-histogram on a PKI mount holding BENCH_INVENTORY_ROWS (default 1,000,000)
// certificates, in the local runtime (workerd through wrangler's programmatic API, local D1).
// The rows are synthetic (the inventory columns filled, a placeholder DER, 1 % revoked, five
// roles, not_after spread from 30 days ago to a year ahead) and are written by ONE SQL statement
// (a recursive CTE) through `wrangler d1 execute --local` while the Worker is stopped: no
// test-only path in the service. Then each query is timed from Node over loopback (median of
// BENCH_INVENTORY_REPEAT runs after one warm-up): an upper bound of the server time, which
// includes local D1's query time. Finally `EXPLAIN QUERY PLAN` of each page statement.
// BENCH_INVENTORY_DIR=<dir> keeps the seeded database there and reuses it on the next run
// (seeding a million rows takes minutes); without it a temporary directory is removed after.
//   BENCH_INVENTORY_ROWS=1000000   BENCH_INVENTORY_REPEAT=7   BENCH_INVENTORY_DIR=
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import * as esbuild from "esbuild";
import { unstable_startWorker } from "wrangler";
import { SEAL_KEY, TOKEN, call, root } from "./lib/bench-common.mjs";

const wrangler = path.join(root, "node_modules", ".bin", "wrangler");
const ROWS = Number(process.env.BENCH_INVENTORY_ROWS ?? "1000000");
const REPEAT = Number(process.env.BENCH_INVENTORY_REPEAT ?? "7");
const MOUNT = "invbench";

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function d1(dir, sql, json = false) {
  const out = execFileSync(wrangler, ["d1", "execute", "DB", "--local", "--persist-to", dir, "--command", sql, ...(json ? ["--json"] : []), "--yes"], {
    cwd: root,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    maxBuffer: 64 * 1024 * 1024,
  });
  return json ? JSON.parse(out) : out;
}

/** ROWS synthetic certificates of the mount, in one INSERT ... SELECT over a recursive CTE. */
function seed(dir, mountId, issuerId, now) {
  const day = 86400;
  d1(
    dir,
    `INSERT OR IGNORE INTO pki_ids (id) VALUES ('${mountId}'), ('${issuerId}');
     WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${ROWS})
     INSERT INTO pki_certs (mount_no, serial, der, issuer_no, not_after, created_at, metadata, common_name, sans, not_before, role, revoked_at)
     SELECT (SELECT no FROM pki_ids WHERE id = '${mountId}'), unhex(printf('%08x%08x', (i * 2654435761) % 4294967296, i)), 'AA==', (SELECT no FROM pki_ids WHERE id = '${issuerId}'),
            ${now - 30 * day} + (i * 7919) % ${395 * day}, ${now * 1000}, NULL,
            'host' || i || '.svc' || (i % 97) || '.example.com',
            'host' || i || '.svc' || (i % 97) || '.example.com' || char(10) || 'alt' || i || '.example.net',
            ${now - 30 * day} + (i * 7919) % ${395 * day} - ${90 * day}, 'role' || (i % 5),
            CASE WHEN i % 100 = 0 THEN ${now - day} END
     FROM n`,
  );
}

// The service's own page statements (pageStatement of src/engines/pki/storage/inventory-store.ts,
// bundled here by esbuild, wrangler's bundler), their binds written in as literals for the plans.
const store = await esbuild.build({ entryPoints: [path.join(root, "src/engines/pki/storage/inventory-store.ts")], bundle: true, format: "esm", platform: "neutral", write: false });
const { pageStatement, SCAN_WINDOW } = await import(`data:text/javascript;base64,${Buffer.from(store.outputFiles[0].text).toString("base64")}`);
const literal = (v) =>
  typeof v === "number" ? String(v) : v instanceof Uint8Array ? `X'${Buffer.from(v).toString("hex")}'` : `'${String(v).replaceAll("'", "''")}'`;
function inline({ query, binds }) {
  let i = 0;
  return query.replace(/\?/g, () => literal(binds[i++]));
}

/** Follows next_after from the first page to the end, timing each page (one request each). */
async function walkCursors(base, p) {
  const times = [];
  let found = 0;
  let after = "";
  const t0 = performance.now();
  for (;;) {
    const t = performance.now();
    const { body } = await timedOnce(base, `${p}${after ? `&after=${after}` : ""}`);
    times.push(performance.now() - t);
    found += body.data.keys.length;
    if (body.data.next_after === undefined) break;
    after = body.data.next_after;
  }
  const sorted = [...times].sort((a, b) => a - b);
  return { pages: times.length, found, "median ms/page": +median(times).toFixed(1), "p90 ms/page": +sorted[Math.floor(sorted.length * 0.9)].toFixed(1), "max ms/page": +sorted.at(-1).toFixed(1), "total s": +((performance.now() - t0) / 1000).toFixed(2) };
}

async function start(opts) {
  const worker = await unstable_startWorker(opts);
  await worker.ready;
  const base = (await worker.url).toString().replace(/\/$/, "");
  return { worker, base };
}

function urlOf(base, p) {
  const list = p.startsWith("LIST ");
  // LIST as GET ?list=true (wrangler's dev server refuses the LIST verb).
  const rel = list ? p.slice(5) : p;
  return `${base}/v1/${rel}${list ? `${rel.includes("?") ? "&" : "?"}list=true` : ""}`;
}

async function timedOnce(base, p) {
  const res = await fetch(urlOf(base, p), { headers: { "x-service-token": TOKEN } });
  const body = await res.json();
  if (res.status !== 200) throw new Error(`${p}: ${res.status} ${JSON.stringify(body)}`);
  return { body };
}

async function timed(base, p) {
  const req = () => fetch(urlOf(base, p), { headers: { "x-service-token": TOKEN } });
  const { body } = await timedOnce(base, p);
  const times = [];
  for (let i = 0; i < REPEAT; i++) {
    const t = performance.now();
    const r = await req();
    await r.arrayBuffer();
    times.push(performance.now() - t);
  }
  return { ms: median(times), body };
}

async function main() {
  const keep = process.env.BENCH_INVENTORY_DIR;
  const dir = keep ? path.resolve(keep) : mkdtempSync(path.join(tmpdir(), "lanyard-bench-inventory-"));
  if (keep) mkdirSync(dir, { recursive: true });
  const marker = path.join(dir, "seeded.json");
  const seeded = existsSync(marker) ? JSON.parse(readFileSync(marker, "utf8")) : null;
  if (seeded && seeded.rows !== ROWS) throw new Error(`${dir} holds ${seeded.rows} rows, not ${ROWS}: remove it or set BENCH_INVENTORY_ROWS`);
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
  try {
    let worker;
    let base;
    let state = seeded;
    if (!state) {
      ({ worker, base } = await start(opts));
      await call(base, "POST", `sys/mounts/${MOUNT}`, { type: "pki" });
      const rootGen = await call(base, "POST", `${MOUNT}/root/generate/internal`, { common_name: "Inventory Bench Root", key_type: "ec", not_after: "2036-01-01T00:00:00Z", issuer_name: "bench-root" });
      const mountId = (await call(base, "GET", "sys/mounts")).data[`${MOUNT}/`].uuid;
      await worker.dispose();
      state = { rows: ROWS, mountId, issuerId: rootGen.data.issuer_id, now: Math.floor(Date.now() / 1000) };
      const t = performance.now();
      seed(dir, state.mountId, state.issuerId, state.now);
      console.log(`\nseeded ${ROWS.toLocaleString("en")} rows in ${((performance.now() - t) / 1000).toFixed(1)} s (one statement, five inventory indexes maintained)`);
      d1(dir, "ANALYZE");
      if (keep) writeFileSync(marker, JSON.stringify(state));
    } else console.log(`\nreusing the ${ROWS.toLocaleString("en")} rows seeded in ${dir}`);
    const { mountId } = state;
    const now = Math.floor(Date.now() / 1000);
    ({ worker, base } = await start(opts));
    const midI = Math.floor(ROWS / 2);
    // The seeded row i: serial the 8 octets of printf('%08x%08x') in colon hex; id about i (the plans only need its shape).
    const midHex = `${((midI * 2654435761) % 4294967296).toString(16).padStart(8, "0")}${midI.toString(16).padStart(8, "0")}`;
    const mid = { serial: (midHex.match(/../g) ?? []).join(":"), notAfter: state.now - 30 * 86400 + ((midI * 7919) % (395 * 86400)), id: midI };
    const week = now + 7 * 86400;
    const issuerId = state.issuerId;
    const L = (q) => `LIST ${MOUNT}/certs/detailed${q ? `?${q}` : ""}`;
    const pq = (filter, o = {}) => ({ filter, sort: "not_after", order: "asc", after: null, limit: 100, now, ...o });
    const W = { window: SCAN_WINDOW.not_after };
    // [name, request, the page statement's query (pageStatement's input), walk the cursors?]
    const cases = [
      ["LIST certs/detailed (first page, sort not_after)", L(""), pq({})],
      ["  page after a middle row", L(`after=${mid.serial}`), pq({}, { after: mid })],
      ["  state=valid", L("state=valid"), pq({ state: "valid" })],
      ["  state=revoked", L("state=revoked"), pq({ state: "revoked" })],
      ["  state=expired&order=desc", L("state=expired&order=desc"), pq({ state: "expired" }, { order: "desc" })],
      ["  role=role3&state=valid", L("role=role3&state=valid"), pq({ role: "role3", state: "valid" })],
      ["  issuer_ref=bench-root&expires_before=+7d", L(`issuer_ref=bench-root&expires_before=${week}&state=valid`), pq({ issuerId, state: "valid", expiresBefore: week })],
      ["  common_name=svc42. (substring, frequent)", L("common_name=svc42."), pq({ commonName: "svc42." }, W)],
      ["  common_name=host777777. (substring, one match)", L("common_name=host777777."), pq({ commonName: "host777777." }, W), true],
      ["  same, a page after a middle row", L(`common_name=host777777.&after=${mid.serial}`), pq({ commonName: "host777777." }, { ...W, after: mid })],
      ["  san=alt123456. (substring, one match)", L("san=alt123456."), pq({ san: "alt123456." }, W), true],
      ["  san=alt123456.&state=valid&sort=serial", L("san=alt123456.&state=valid&sort=serial"), pq({ san: "alt123456.", state: "valid" }, { window: SCAN_WINDOW.serial, sort: "serial" }), true],
      ["  sort=serial&limit=1000", L("sort=serial&limit=1000"), pq({}, { sort: "serial", limit: 1000 })],
      ["GET certs/counts", `${MOUNT}/certs/counts`],
      ["GET certs/counts?role=role3", `${MOUNT}/certs/counts?role=role3`],
      ["GET certs/expiry-histogram?days=90", `${MOUNT}/certs/expiry-histogram?days=90`],
    ];
    const rows = [];
    const walks = [];
    const plans = [];
    for (const [name, p, q, walk] of cases) {
      if (process.env.BENCH_VERBOSE) console.log(name);
      const { ms, body } = await timed(base, p);
      const d = body.data;
      const n = d.keys ? d.keys.length : d.total ?? d.histogram?.length;
      const cursor = d.next_after === undefined ? "" : d.scan_incomplete ? "next_after (window ended)" : "next_after";
      rows.push({ query: name, "median ms": +ms.toFixed(1), answered: n, cursor });
      if (q) plans.push({ query: name, statement: inline(pageStatement(mountId, q)) });
      if (walk) walks.push({ query: name, ...(await walkCursors(base, p)) });
    }
    await worker.dispose();
    // With the Worker stopped: two runtimes must not hold the local database at once.
    const explained = d1(dir, plans.map((p) => `EXPLAIN QUERY PLAN ${p.statement};`).join("\n"), true);
    plans.forEach((p, i) => (p.plan = (explained[i]?.results ?? []).map((r) => r.detail).join(" | ")));
    const durations = d1(dir, plans.flatMap((p) => Array.from({ length: REPEAT }, () => `${p.statement};`)).join("\n"), true).map((r) => r.meta?.duration ?? NaN);
    plans.forEach((p, i) => (rows.find((r) => r.query === p.query)["D1 SQL ms"] = median(durations.slice(i * REPEAT, (i + 1) * REPEAT))));
    console.log(`\nLanyard inventory benchmark: ${ROWS.toLocaleString("en")} certificates on one mount (local workerd and D1, this machine; median of ${REPEAT}: loopback round trip, and the page statement's own time as local D1 reports it, whole ms)\n`);
    console.table(rows);
    console.log(`\nFollowing next_after from the first page to the end (scan window ${SCAN_WINDOW.not_after.toLocaleString("en")} rows by not_after, ${SCAN_WINDOW.serial.toLocaleString("en")} by serial; limit 100; one request per page):\n`);
    console.table(walks);
    console.log("\nEXPLAIN QUERY PLAN of each page statement:");
    for (const p of plans) console.log(`- ${p.query.trim()}: ${p.plan}`);
    if (process.env.BENCH_VERBOSE) for (const p of plans) console.log(`\n${p.query.trim()}:\n${p.statement}`);
  } finally {
    if (!keep) rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
