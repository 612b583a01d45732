/**
 * The dependency rules of src/ (docs/architecture.md), read from the source: every
 * import of every file (static, type-only, side-effect, re-exports, dynamic `import()` and
 * `import("…")` types), resolved to files. It fails naming the importing file, its line and the
 * import, on:
 * - a file-level import cycle;
 * - an import against the layers `core ← auth ← audit ← engines/* ← app` (and a file outside them);
 * - an import into an engine, from outside it, of anything but the engine's index.ts;
 * - an import of the Drizzle schema (src/core/db/schema*) by a module that is not a storage
 *   module (under a `storage/` folder, named `store.ts` / `*-store.ts`, or in src/core/db/);
 * - an engine's table (kv_*, pki_*, sync_*) named below the engines, in SQL text or by its Drizzle
 *   binding, outside the schema: core/, auth/ and audit/ ask the engines (e.g. `namespaceTables`).
 * It runs under plain Node (the "unit-node" Vitest project): it needs only the file system.
 * The rule checks are pure functions over an import list (or source texts), tested first on
 * made-up inputs.
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

/** A table an engine owns: its SQL name and, when the Drizzle schema declares it, its binding there. */
interface EngineTable {
  name: string;
  binding?: string;
}

/** Layers below the engines, which must not name an engine's tables (the schema declares them all). */
const belowEngines = (file: string): boolean => layerOf(file) >= 0 && layerOf(file) < LAYERS.indexOf("engines") && !isSchema(file);

/**
 * Places where a module below the engines (core/, auth/, audit/; not the Drizzle schema) names an
 * engine's table: in a string or template literal (SQL), or by the table's Drizzle binding. Such a
 * module must ask the engines instead (e.g. their `namespaceTables`). Comments may name tables.
 */
function engineTablesBelow(sources: { file: string; text: string }[], tables: EngineTable[]): string[] {
  if (tables.length === 0) return [];
  const inSql = new RegExp(`\\b(${tables.map((t) => t.name).join("|")})\\b`);
  const bindings = new Set(tables.flatMap((t) => (t.binding ? [t.binding] : [])));
  // Parsing is slow, so only a file that mentions a name anywhere (comments too) is parsed.
  const mentioned = new RegExp(`\\b(${tables.flatMap((t) => [t.name, ...(t.binding ? [t.binding] : [])]).join("|")})\\b`);
  const out: string[] = [];
  for (const { file, text } of sources.filter((s) => belowEngines(s.file) && mentioned.test(s.text))) {
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    const at = (node: ts.Node) => `src/${file}:${source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1}`;
    const visit = (node: ts.Node): void => {
      const literal = ts.isStringLiteralLike(node) || ts.isTemplateHead(node) || ts.isTemplateMiddle(node) || ts.isTemplateTail(node);
      const named = literal ? inSql.exec(node.text)?.[1] : undefined;
      if (named) out.push(`${at(node)} names the engine table "${named}" in SQL (let the engine declare it)`);
      if (ts.isIdentifier(node) && bindings.has(node.text)) out.push(`${at(node)} names the engine table "${node.text}" (its Drizzle binding)`);
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return out;
}

/**
 * The engines' tables: every table the Drizzle schema declares or a migration creates whose name
 * starts with an engine's folder name and "_" (kv_, pki_, sync_; pki_acme_ is the PKI engine's).
 */
function engineTables(src: string, migrations: string): EngineTable[] {
  const engines = fs.readdirSync(path.join(src, "engines"), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
  const owned = (name: string) => engines.some((e) => name.startsWith(`${e}_`));
  const found = new Map<string, EngineTable>();
  for (const file of sourceFiles(path.join(src, "core/db/schema"))) {
    const source = ts.createSourceFile(file, fs.readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node): void => {
      if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.initializer && ts.isCallExpression(node.initializer)) {
        const call = node.initializer;
        const first = call.arguments[0];
        if (call.expression.getText(source) === "sqliteTable" && first && ts.isStringLiteral(first) && owned(first.text)) {
          found.set(first.text, { name: first.text, binding: node.name.text });
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  for (const file of fs.readdirSync(migrations).filter((f) => f.endsWith(".sql"))) {
    for (const m of fs.readFileSync(path.join(migrations, file), "utf8").matchAll(/CREATE TABLE (?:IF NOT EXISTS )?[`"]?(\w+)/gi)) {
      const name = m[1] as string;
      if (owned(name) && !found.has(name)) found.set(name, { name });
    }
  }
  return [...found.values()];
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

  it("keeps the engines' tables out of the layers below them, in SQL and by Drizzle binding", () => {
    const tables: EngineTable[] = [{ name: "sync_destinations", binding: "syncDestinations" }, { name: "pki_certs" }];
    const sql = "const q = `SELECT 1 FROM namespaces WHERE id = ?1\n AND NOT EXISTS (SELECT 1 FROM sync_destinations WHERE namespace_id = ${x})`;";
    expect(engineTablesBelow([{ file: "auth/namespace-store.ts", text: sql }], tables)[0]).toMatch(/src\/auth\/namespace-store\.ts:1 .*"sync_destinations" in SQL/);
    expect(engineTablesBelow([{ file: "core/x.ts", text: 'db.prepare("DELETE FROM pki_certs")' }], tables)).toHaveLength(1);
    expect(engineTablesBelow([{ file: "audit/x.ts", text: "\n\nimport { syncDestinations } from './s';" }], tables)[0]).toMatch(/audit\/x\.ts:3 .*Drizzle binding/);
    // Comments, the schema itself, the engines and the app may name them; so may longer names.
    const allowed = [
      { file: "core/lifecycle.ts", text: "// the triggers guard sync_destinations and pki_certs\nconst a = 1;" },
      { file: "core/db/schema/sync.ts", text: 'export const syncDestinations = sqliteTable("sync_destinations", {});' },
      { file: "engines/sync/index.ts", text: 'const t = ["sync_destinations"];' },
      { file: "app/x.ts", text: 'const t = "pki_certs";' },
      { file: "core/y.ts", text: 'const t = "my_sync_destinations_view";' },
    ];
    expect(engineTablesBelow(allowed, tables)).toEqual([]);
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

  it("names no engine's table below the engines (core/, auth/, audit/ ask the engines instead)", () => {
    const tables = engineTables(SRC, path.resolve(SRC, "../migrations"));
    expect(tables.map((t) => t.name)).toEqual(expect.arrayContaining(["kv_versions", "pki_certs", "pki_acme_orders", "sync_destinations", "sync_repohost_apps"]));
    expect(tables.find((t) => t.name === "sync_destinations")?.binding).toBe("syncDestinations");
    const sources = files.map((file) => ({ file, text: fs.readFileSync(path.join(SRC, file), "utf8") }));
    expect(engineTablesBelow(sources, tables)).toEqual([]);
  });
});
