#!/usr/bin/env node
// `npm run bench [-- NAME...]`: runs the benchmarks one after another, each in its own Node
// process: scripts/bench.mjs ("issue") first, then every scripts/bench-NAME.mjs ("NAME") in name
// order. Names given as arguments, or in BENCH_ONLY (comma-separated), select which run, e.g.
// `npm run bench -- issue ocsp` or `BENCH_ONLY=crl npm run bench`. Exits non-zero if any failed.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const dir = path.dirname(fileURLToPath(import.meta.url));
const benches = [
  { name: "issue", file: "bench.mjs" },
  ...readdirSync(dir)
    .filter((f) => /^bench-[\w-]+\.mjs$/.test(f))
    .sort()
    .map((f) => ({ name: f.slice("bench-".length, -".mjs".length), file: f })),
];

const wanted = [...process.argv.slice(2), ...(process.env.BENCH_ONLY ?? "").split(",")].map((s) => s.trim()).filter((s) => s !== "");
const unknown = wanted.filter((w) => !benches.some((b) => b.name === w));
if (unknown.length > 0) {
  console.error(`unknown benchmark ${unknown.join(", ")}; available: ${benches.map((b) => b.name).join(", ")}`);
  process.exit(2);
}
const selected = wanted.length > 0 ? benches.filter((b) => wanted.includes(b.name)) : benches;

const failed = [];
for (const b of selected) {
  console.log(`\n=== bench ${b.name} (scripts/${b.file}) ===`);
  const r = spawnSync(process.execPath, [path.join(dir, b.file)], { stdio: "inherit" });
  if (r.status !== 0) failed.push(b.name);
}
if (failed.length > 0) {
  console.error(`\nfailed: ${failed.join(", ")}`);
  process.exit(1);
}
