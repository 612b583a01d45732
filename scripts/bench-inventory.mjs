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
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${ROWS})
     INSERT INTO pki_certs (mount_id, serial, der, issuer_id, not_after, created_at, metadata, common_name, sans, not_before, role, revoked_at)
     SELECT '${mountId}', printf('%08x:%08x', (i * 2654435761) % 4294967296, i), 'AA==', '${issuerId}',
            ${now - 30 * day} + (i * 7919) % ${395 * day}, ${now * 1000}, NULL,
            'host' || i || '.svc' || (i % 97) || '.example.com',
            'host' || i || '.svc' || (i % 97) || '.example.com' || char(10) || 'alt' || i || '.example.net',
            ${now - 30 * day} + (i * 7919) % ${395 * day} - ${90 * day}, 'role' || (i % 5),
            CASE WHEN i % 100 = 0 THEN ${now - day} END
     FROM n`,
  );
}

// The page statement of src/engines/pki/storage/inventory-store.ts (pageStatement), with literals.
const COLS = "serial, common_name, sans, issuer_id, role, not_before, not_after, revoked_at, CASE WHEN not_before IS NULL THEN der END AS der";
function pageSql(mountId, where, order = "not_after ASC, serial ASC", limit = 100) {
  return `SELECT ${COLS} FROM pki_certs WHERE mount_id = '${mountId}'${where} ORDER BY ${order} LIMIT ${limit}`;
}

async function start(opts) {
  const worker = await unstable_startWorker(opts);
  await worker.ready;
  const base = (await worker.url).toString().replace(/\/$/, "");
  return { worker, base };
}

async function timed(base, p) {
  const list = p.startsWith("LIST ");
  // LIST as GET ?list=true (wrangler's dev server refuses the LIST verb).
  const rel = list ? p.slice(5) : p;
  const url = `${base}/v1/${rel}${list ? `${rel.includes("?") ? "&" : "?"}list=true` : ""}`;
  const req = () => fetch(url, { headers: { "x-service-token": TOKEN } });
  const first = await req();
  const body = await first.json();
  if (first.status !== 200) throw new Error(`${p}: ${first.status} ${JSON.stringify(body)}`);
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
    const rootGen = { data: { issuer_id: state.issuerId } };
    const now = Math.floor(Date.now() / 1000);
    ({ worker, base } = await start(opts));
    const midI = Math.floor(ROWS / 2);
    const mid = `${((midI * 2654435761) % 4294967296).toString(16).padStart(8, "0")}:${midI.toString(16).padStart(8, "0")}`;
    const week = now + 7 * 86400;
    const cases = [
      ["LIST certs/detailed (first page, sort not_after)", `LIST ${MOUNT}/certs/detailed`, ""],
      ["  page after a middle row", `LIST ${MOUNT}/certs/detailed?after=${mid}`, ` AND (not_after, serial) > (${now}, '${mid}')`],
      ["  state=valid", `LIST ${MOUNT}/certs/detailed?state=valid`, ` AND revoked_at IS NULL AND not_after >= ${now}`],
      ["  state=revoked", `LIST ${MOUNT}/certs/detailed?state=revoked`, " AND revoked_at IS NOT NULL"],
      ["  state=expired&order=desc", `LIST ${MOUNT}/certs/detailed?state=expired&order=desc`, ` AND revoked_at IS NULL AND not_after < ${now}`, "not_after DESC, serial DESC"],
      ["  role=role3&state=valid", `LIST ${MOUNT}/certs/detailed?role=role3&state=valid`, ` AND role = 'role3' AND revoked_at IS NULL AND not_after >= ${now}`],
      ["  issuer_ref=bench-root&expires_before=+7d", `LIST ${MOUNT}/certs/detailed?issuer_ref=bench-root&expires_before=${week}&state=valid`, ` AND issuer_id = '${rootGen.data.issuer_id}' AND revoked_at IS NULL AND not_after >= ${now} AND not_after < ${week}`],
      ["  common_name=svc42 (substring, frequent)", `LIST ${MOUNT}/certs/detailed?common_name=svc42.`, " AND common_name LIKE '%svc42.%' ESCAPE '\\'"],
      ["  common_name=host777777. (substring, one match)", `LIST ${MOUNT}/certs/detailed?common_name=host777777.`, " AND common_name LIKE '%host777777.%' ESCAPE '\\'"],
      ["  san=alt123456. (substring, one match)", `LIST ${MOUNT}/certs/detailed?san=alt123456.`, " AND sans LIKE '%alt123456.%' ESCAPE '\\'"],
      ["  sort=serial&limit=1000", `LIST ${MOUNT}/certs/detailed?sort=serial&limit=1000`, "", "serial ASC", 1000],
      ["GET certs/counts", `${MOUNT}/certs/counts`],
      ["GET certs/counts?role=role3", `${MOUNT}/certs/counts?role=role3`],
      ["GET certs/expiry-histogram?days=90", `${MOUNT}/certs/expiry-histogram?days=90`],
    ];
    const rows = [];
    const plans = [];
    for (const [name, p, where, order, limit] of cases) {
      if (process.env.BENCH_VERBOSE) console.log(name);
      const { ms, body } = await timed(base, p);
      const n = body.data.keys ? body.data.keys.length : body.data.total ?? body.data.histogram?.length;
      rows.push({ query: name, "median ms": +ms.toFixed(1), answered: n });
      if (where !== undefined) plans.push({ query: name, statement: pageSql(mountId, where, order, limit) });
    }
    await worker.dispose();
    // With the Worker stopped: two runtimes must not hold the local database at once.
    for (const p of plans) p.plan = (d1(dir, `EXPLAIN QUERY PLAN ${p.statement}`, true)[0]?.results ?? []).map((r) => r.detail).join(" | ");
    console.log(`\nLanyard inventory benchmark: ${ROWS.toLocaleString("en")} certificates on one mount (local workerd and D1, this machine; median of ${REPEAT}, loopback round trip)\n`);
    console.table(rows);
    console.log("\nEXPLAIN QUERY PLAN of each page statement:");
    for (const p of plans) console.log(`- ${p.query.trim()}: ${p.plan}`);
  } finally {
    if (!keep) rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
