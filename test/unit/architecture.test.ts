/**
 * The dependency rules of src/ (docs/architecture.md), read from the source: every
 * import of every file (static, type-only, side-effect, re-exports, dynamic `import()` and
 * `import("…")` types), resolved to files. It fails naming the importing file, its line and the
 * import, on:
 * - a file-level import cycle;
 * - an import against the layers `core ← auth ← audit ← engines/* ← app` (and a file outside them);
 * - an import into an engine, from outside it, of anything but the engine's index.ts;
 * - an import of the Drizzle schema (src/core/db/schema*) by a module that is not a storage
 *   module (under a `storage/` folder, named `store.ts` / `*-store.ts`, or in src/core/db/).
 * It runs under plain Node (the "unit-node" Vitest project): it needs only the file system.
 * The rule checks are pure functions over an import list, tested first on made-up graphs.
 */
import fs from "node:fs";
import path from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const SRC = path.resolve(import.meta.dirname, "../../src");

/** One resolved import: files are paths relative to src/ with "/" separators. */
interface Import {
  from: string;
  to: string;
  line: number;
  specifier: string;
}

const LAYERS = ["core", "auth", "audit", "engines", "app"] as const;

const show = (i: Import) => `src/${i.from}:${i.line} imports "${i.specifier}" (src/${i.to})`;

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (/\.(ts|tsx|mts)$/.test(e.name) && !e.name.endsWith(".d.ts")) out.push(p);
  }
  return out;
}

/** Every import of src/ that names a file of src/ (packages and `cloudflare:*` are left out). */
function readImports(root: string): { files: string[]; imports: Import[]; unresolved: string[] } {
  const abs = sourceFiles(root);
  const known = new Set(abs);
  const rel = (p: string) => path.relative(root, p).split(path.sep).join("/");
  const imports: Import[] = [];
  const unresolved: string[] = [];
  for (const file of abs) {
    const text = fs.readFileSync(file, "utf8");
    for (const ref of ts.preProcessFile(text, true, true).importedFiles) {
      const spec = ref.fileName;
      if (!spec.startsWith(".")) continue;
      const base = path.resolve(path.dirname(file), spec.replace(/\.(js|mjs|ts)$/, ""));
      const target = [base, `${base}.ts`, `${base}.tsx`, `${base}.mts`, path.join(base, "index.ts")].find((c) => known.has(c));
      const line = text.slice(0, ref.pos).split("\n").length;
      if (!target) unresolved.push(`src/${rel(file)}:${line} imports "${spec}", which is no file of src/`);
      else imports.push({ from: rel(file), to: rel(target), line, specifier: spec });
    }
  }
  return { files: abs.map(rel), imports, unresolved };
}

/** Each cycle once, as the chain of imports that closes it. */
function cycles(files: string[], imports: Import[]): string[] {
  const out = new Map<string, Import[]>();
  for (const f of files) out.set(f, []);
  for (const i of imports) out.get(i.from)?.push(i);
  // Tarjan's strongly connected components; each one with more than one file, or a file that
  // imports itself, holds a cycle.
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[] = [];
  const strong = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter);
    counter++;
    stack.push(v);
    onStack.add(v);
    for (const { to: w } of out.get(v) ?? []) {
      if (!index.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v) ?? 0, low.get(w) ?? 0));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) ?? 0, index.get(w) ?? 0));
    }
    if (low.get(v) !== index.get(v)) return;
    const scc = new Set<string>();
    let w: string | undefined;
    do {
      w = stack.pop();
      if (w !== undefined) {
        onStack.delete(w);
        scc.add(w);
      }
    } while (w !== undefined && w !== v);
    if (scc.size > 1 || (out.get(v) ?? []).some((i) => i.to === v)) found.push(chain(v, scc, out));
  };
  for (const f of files) if (!index.has(f)) strong(f);
  return found;
}

/** A shortest cycle through `start` within its component, as "a:3 imports "./b" → b:7 …". */
function chain(start: string, scc: Set<string>, out: Map<string, Import[]>): string {
  const via = new Map<string, Import>();
  const queue = [start];
  for (let k = 0; k < queue.length; k++) {
    const v = queue[k] as string;
    for (const i of out.get(v) ?? []) {
      if (!scc.has(i.to)) continue;
      if (i.to === start) {
        const steps = [i];
        for (let at = v; at !== start; ) {
          const prev = via.get(at);
          if (!prev) break;
          steps.unshift(prev);
          at = prev.from;
        }
        return `import cycle of ${scc.size} file(s): ${steps.map(show).join(" → ")}`;
      }
      if (!via.has(i.to)) {
        via.set(i.to, i);
        queue.push(i.to);
      }
    }
  }
  return `import cycle of ${scc.size} file(s) through src/${start}`;
}

const layerOf = (file: string): number => LAYERS.indexOf(file.split("/")[0] as (typeof LAYERS)[number]);
/** The engine a file belongs to ("pki" for engines/pki/...), or null outside engines/. */
const engineOf = (file: string): string | null => (file.startsWith("engines/") ? (file.split("/")[1] ?? null) : null);
const isSchema = (file: string): boolean => file.startsWith("core/db/schema/") || /^core\/db\/schema(\.\w+)?\.ts$/.test(file);
const isStorageModule = (file: string): boolean =>
  file.startsWith("core/db/") || file.split("/").slice(0, -1).includes("storage") || /(^|\/)(store|[\w.-]+-store)\.ts$/.test(file);

/** Files outside core/, auth/, engines/<name>/ and app/. */
function outsideLayers(files: string[]): string[] {
  return files
    .filter((f) => layerOf(f) < 0 || (f.startsWith("engines/") && f.split("/").length < 3))
    .map((f) => `src/${f} is in none of the layers core/, auth/, engines/<engine>/, app/`);
}

/** Imports from a lower layer into a higher one (core ← auth ← engines ← app). */
function againstLayers(imports: Import[]): string[] {
  return imports
    .filter((i) => layerOf(i.from) >= 0 && layerOf(i.to) > layerOf(i.from))
    .map((i) => `against the layers (${LAYERS[layerOf(i.from)]} must not import ${LAYERS[layerOf(i.to)]}): ${show(i)}`);
}

/** Imports into an engine from outside it that do not go through its index.ts. */
function pastEngineFaces(imports: Import[]): string[] {
  return imports
    .filter((i) => {
      const target = engineOf(i.to);
      return target !== null && engineOf(i.from) !== target && i.to !== `engines/${target}/index.ts`;
    })
    .map((i) => `past the engine's index.ts (use engines/${engineOf(i.to) ?? "?"}/index.ts): ${show(i)}`);
}

/** Imports of the Drizzle schema from modules that are not storage modules. */
function schemaOutsideStorage(imports: Import[]): string[] {
  return imports
    .filter((i) => isSchema(i.to) && !isStorageModule(i.from))
    .map((i) => `the Drizzle schema outside a storage module (go through the area's store): ${show(i)}`);
}

const imp = (from: string, to: string): Import => ({ from, to, line: 1, specifier: `./${to}` });

describe("the dependency rules, on made-up graphs", () => {
  it("finds cycles and names the imports that close them", () => {
    const files = ["core/a.ts", "core/b.ts", "core/c.ts", "core/d.ts"];
    expect(cycles(files, [imp("core/a.ts", "core/b.ts"), imp("core/b.ts", "core/c.ts")])).toEqual([]);
    const found = cycles(files, [imp("core/a.ts", "core/b.ts"), imp("core/b.ts", "core/c.ts"), imp("core/c.ts", "core/a.ts"), imp("core/d.ts", "core/d.ts")]);
    expect(found).toHaveLength(2);
    expect(found.join("\n")).toContain("src/core/c.ts:1 imports");
    expect(found.join("\n")).toContain("cycle of 1 file(s): src/core/d.ts:1");
  });

  it("flags imports against the layers and files outside them", () => {
    expect(againstLayers([imp("app/x.ts", "engines/kv/index.ts"), imp("engines/kv/a.ts", "auth/t.ts"), imp("auth/t.ts", "core/e.ts")])).toEqual([]);
    expect(againstLayers([imp("core/e.ts", "auth/t.ts")])[0]).toMatch(/core must not import auth.*src\/core\/e\.ts:1/);
    expect(againstLayers([imp("engines/kv/a.ts", "app/engines.ts")])[0]).toMatch(/engines must not import app/);
    expect(outsideLayers(["core/a.ts", "util/x.ts", "engines/stray.ts"])).toHaveLength(2);
  });

  it("lets engines reach each other only through index.ts", () => {
    expect(pastEngineFaces([imp("engines/sync/a.ts", "engines/kv/index.ts"), imp("app/x.ts", "engines/pki/index.ts"), imp("engines/kv/a.ts", "engines/kv/store.ts")])).toEqual([]);
    expect(pastEngineFaces([imp("engines/sync/a.ts", "engines/kv/store.ts")])[0]).toContain("src/engines/sync/a.ts:1");
    expect(pastEngineFaces([imp("app/x.ts", "engines/sync/routes/index.ts")])).toHaveLength(1);
  });

  it("keeps the schema to storage modules", () => {
    for (const f of ["core/db/client.ts", "engines/pki/storage/keystore.ts", "engines/kv/store.ts", "auth/token-store.ts", "core/mount-store.ts"]) {
      expect(schemaOutsideStorage([imp(f, "core/db/schema/index.ts")])).toEqual([]);
    }
    expect(schemaOutsideStorage([imp("engines/pki/routes/generate.ts", "core/db/schema/index.ts")])).toHaveLength(1);
    expect(schemaOutsideStorage([imp("core/caller.ts", "core/db/schema/core.ts")])).toHaveLength(1);
    expect(schemaOutsideStorage([imp("engines/kv/restore.ts", "core/db/schema/kv.ts")])).toHaveLength(1);
  });
});

describe("src/", () => {
  const { files, imports, unresolved } = readImports(SRC);

  it("is read: its files and their imports", () => {
    expect(files.length).toBeGreaterThan(50);
    expect(imports.length).toBeGreaterThan(files.length);
    expect(unresolved).toEqual([]);
  });

  it("has no import cycle", () => {
    expect(cycles(files, imports)).toEqual([]);
  });

  it("keeps every file in a layer and every import with the layers: core ← auth ← audit ← engines/* ← app", () => {
    expect([...outsideLayers(files), ...againstLayers(imports)]).toEqual([]);
  });

  it("reaches an engine from outside it only through its index.ts", () => {
    expect(pastEngineFaces(imports)).toEqual([]);
  });

  it("imports the Drizzle schema only in storage modules", () => {
    expect(schemaOutsideStorage(imports)).toEqual([]);
  });
});
