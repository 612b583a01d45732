/**
 * docs/architecture.md lists every cache: the table "Every cache" holds one row per
 * `BoundedCache` or `ReadCache` created in src/ (src/core/bounded-cache.ts), by its name, with the
 * file that creates it and its entry bound; the table "Other per-isolate state" names the file of
 * every module-level WeakMap. A module-level Map that is neither a cache of the helper nor listed
 * below as not being a cache fails here, so a new cache cannot be added by hand.
 * It runs under plain Node (the "unit-node" Vitest project): it needs only the file system.
 */
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "../..");
const SRC = path.join(ROOT, "src");

/** Module-level Maps that are not caches: nothing in them is computed once to be reused. */
const NOT_CACHES: Record<string, string> = {
  "src/app/index.ts CONSUMERS": "a constant table built once at load",
  "src/engines/sync/limits/index.ts overrides": "limits a test sets; no request fills it",
  "src/engines/sync/providers/registry.ts BY_TYPE": "the provider registry by type, built once at load",
  "src/engines/sync/providers/registry.ts BY_VAULT_TYPE": "the provider registry by Vault's type name, built once at load",
  "src/core/read-cache.ts generations": "one counter per area (six areas)",
  "src/core/read-cache.ts caches": "the read caches of each area, registered at load",
  "src/audit/delivery/consumer.ts held": "queue messages held back until an older failed delivery of their device is done; each leaves when delivered or after 60 s",
};

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (e.name.endsWith(".ts") && !e.name.endsWith(".d.ts")) out.push(p);
  }
  return out;
}

const rel = (p: string) => path.relative(ROOT, p).split(path.sep).join("/");

interface Found {
  name: string;
  file: string;
  /** The entry bound as written: a number, or the constant it names. */
  max: string;
}

/** Every `new BoundedCache<…>("name", max…)` and `new ReadCache<…>("name", "area", max…)` of src/. */
function cachesInSource(files: string[]): Found[] {
  const found: Found[] = [];
  const call = /new (BoundedCache|ReadCache)\b(?:<[^(]*?>)?\(\s*"([^"]+)"\s*,\s*(?:"[^"]+"\s*,\s*)?([A-Za-z0-9_]+)/g;
  for (const file of files) {
    if (file.endsWith(path.join("core", "bounded-cache.ts")) || file.endsWith(path.join("core", "read-cache.ts"))) continue;
    for (const m of fs.readFileSync(file, "utf8").matchAll(call)) found.push({ name: m[2] ?? "", file: rel(file), max: m[3] ?? "" });
  }
  return found;
}

/** A numeric bound: the literal, or the value of the module constant of that name in src/. */
function boundValue(max: string, files: string[]): number {
  if (/^[\d_]+$/.test(max)) return Number(max.replace(/_/g, ""));
  for (const file of files) {
    const m = new RegExp(`^(?:export )?const ${max}\\s*=\\s*([\\d_]+);`, "m").exec(fs.readFileSync(file, "utf8"));
    if (m?.[1]) return Number(m[1].replace(/_/g, ""));
  }
  throw new Error(`no numeric constant ${max} in src/`);
}

/** The rows of the first table under `### heading` in docs/architecture.md: cells without backticks. */
function tableRows(heading: string): string[][] {
  const doc = fs.readFileSync(path.join(ROOT, "docs/architecture.md"), "utf8");
  const start = doc.indexOf(`\n### ${heading}\n`);
  if (start < 0) throw new Error(`docs/architecture.md has no "### ${heading}"`);
  const lines = doc.slice(start + heading.length + 6).split("\n");
  const first = lines.findIndex((l) => l.startsWith("|"));
  const after = lines.findIndex((l, i) => i > first && !l.startsWith("|"));
  return lines
    .slice(first, after < 0 ? undefined : after)
    .filter((l) => !/^\|[-| ]+\|$/.test(l))
    .slice(1)
    .map((l) =>
      l
        .slice(1, -1)
        .split("|")
        .map((c) => c.trim().replace(/`/g, "")),
    );
}

describe("docs/architecture.md lists every cache", () => {
  const files = sourceFiles(SRC);
  const caches = cachesInSource(files);
  const rows = tableRows("Every cache");

  it("finds the caches and the rows (the patterns still match)", () => {
    expect(caches.length).toBeGreaterThan(20);
    expect(rows.length).toBeGreaterThan(20);
  });

  it("each cache has one name, and the table has exactly one row per cache", () => {
    const names = caches.map((c) => c.name);
    expect(names.filter((n, i) => names.indexOf(n) !== i), "names used twice").toEqual([]);
    expect(rows.map((r) => r[0] ?? "").sort()).toEqual([...names].sort());
  });

  it("each row names the file that creates the cache and its entry bound", () => {
    const problems: string[] = [];
    for (const c of caches) {
      const row = rows.find((r) => r[0] === c.name);
      if (!row) continue;
      if (row[1] !== c.file) problems.push(`${c.name}: the table says ${row[1]}, the cache is made in ${c.file}`);
      const bound = boundValue(c.max, files);
      const numbers: string[] = (row[3] ?? "").replace(/(\d),(\d{3})/g, "$1$2").match(/\d+/g) ?? [];
      if (!numbers.includes(String(bound))) problems.push(`${c.name}: the bound column "${row[3]}" does not say ${bound}`);
    }
    expect(problems).toEqual([]);
  });

  it("every module-level WeakMap is in \"Other per-isolate state\", and every module-level Map is a cache of the helper or known not to be one", () => {
    const otherFiles = new Set(tableRows("Other per-isolate state").map((r) => r[1] ?? ""));
    const problems: string[] = [];
    for (const file of files) {
      const lines = fs.readFileSync(file, "utf8").split("\n");
      lines.forEach((line, i) => {
        const m = /^(?:export )?(?:const|let) (\w+)\b[^=]*= new (Weak)?Map\b/.exec(line);
        if (!m) return;
        const where = `${rel(file)}:${i + 1} ${m[1]}`;
        if (m[2]) {
          if (!otherFiles.has(rel(file))) problems.push(`${where}: a WeakMap not listed in "Other per-isolate state"`);
        } else if (!(`${rel(file)} ${m[1]}` in NOT_CACHES)) {
          problems.push(`${where}: a module-level Map; make it a BoundedCache (src/core/bounded-cache.ts) or say here why it is no cache`);
        }
      });
    }
    expect(problems).toEqual([]);
  });
});
