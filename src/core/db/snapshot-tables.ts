/**
 * What a storage snapshot covers, read from the database itself so that a table a later migration
 * adds is never forgotten: every table in sqlite_master except SQLite's own (`sqlite_*`), D1's
 * (`_cf_*`, `d1_migrations`), this deployment's identity and the staging tables of a restore in
 * progress. Core names no engine table; the list, the columns (PRAGMA table_info) and the
 * triggers all come from the schema the migrations built.
 *
 * Also the door of `deployment_identity`: one row, a random id written the first time a snapshot
 * is taken or restored, and never part of a snapshot (a restore keeps the target's identity).
 */
import { randomHex } from "../encoding";

/** Staging tables of a restore: `lanyard_restore_<started, base 36>_<random>_<table>`. */
export const STAGING_PREFIX = "lanyard_restore_";
const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

export interface TableInfo {
  name: string;
  columns: string[];
}

/** A checked identifier, double-quoted for SQL (names come from sqlite_master or are checked against it). */
export function quoteIdent(name: string): string {
  if (!IDENT.test(name)) throw new Error(`snapshot: ${JSON.stringify(name.slice(0, 64))} is not a plain identifier`);
  return `"${name}"`;
}

const TABLES_SQL = String.raw`SELECT name FROM sqlite_master WHERE type = 'table'
  AND name NOT LIKE 'sqlite\_%' ESCAPE '\' AND name NOT LIKE '\_cf\_%' ESCAPE '\'
  AND name NOT LIKE 'lanyard\_restore\_%' ESCAPE '\' AND name NOT IN ('d1_migrations', 'deployment_identity')
  ORDER BY name`;

/** The newest applied migration: the schema a snapshot must match to be restored. */
const SCHEMA_SQL = "SELECT name FROM d1_migrations ORDER BY name DESC LIMIT 1";

/** The tables a snapshot covers and their columns (in table order), and the schema version. */
export async function snapshotTables(d1: D1Database): Promise<{ schema: string; tables: TableInfo[] }> {
  const [names, schema] = await d1.batch<{ name: string }>([d1.prepare(TABLES_SQL), d1.prepare(SCHEMA_SQL)]);
  const tableNames = (names?.results ?? []).map((r) => r.name).filter((n) => IDENT.test(n));
  const version = schema?.results[0]?.name;
  if (!version) throw new Error("snapshot: d1_migrations is empty; apply the migrations first");
  if (tableNames.length === 0) return { schema: version, tables: [] };
  const infos = await d1.batch<{ name: string; cid: number }>(tableNames.map((n) => d1.prepare(`PRAGMA table_info(${quoteIdent(n)})`)));
  const tables = tableNames.map((name, i) => ({
    name,
    columns: [...(infos[i]?.results ?? [])].sort((a, b) => a.cid - b.cid).map((c) => c.name),
  }));
  for (const t of tables) for (const c of t.columns) quoteIdent(c);
  return { schema: version, tables };
}

/** The triggers on the given tables, with the SQL that created them (a restore drops and re-creates them). */
export async function triggersOn(d1: D1Database, tables: readonly string[]): Promise<{ name: string; definition: string }[]> {
  const rows = await d1.prepare("SELECT name, tbl_name, sql AS definition FROM sqlite_master WHERE type = 'trigger' ORDER BY name").all<{ name: string; tbl_name: string; definition: string | null }>();
  const wanted = new Set(tables);
  return rows.results.flatMap((r) => (wanted.has(r.tbl_name) && r.definition !== null ? [{ name: r.name, definition: r.definition }] : []));
}

/** This database's deployment identity, written on first use. */
export async function deploymentId(d1: D1Database): Promise<string> {
  const fresh = randomHex(16);
  // Two first uses racing: whichever row stands is the identity.
  await d1.prepare("INSERT INTO deployment_identity (id, deployment_id, created_at) VALUES (1, ?, ?) ON CONFLICT (id) DO NOTHING").bind(fresh, Date.now()).run();
  const row = await d1.prepare("SELECT deployment_id FROM deployment_identity WHERE id = 1").first<{ deployment_id: string }>();
  if (!row) throw new Error("snapshot: the deployment identity could not be read");
  return row.deployment_id;
}

/** Staging tables left by a restore that died mid-way (the Worker stopped), older than `olderThanMs`. */
export async function leftoverStaging(d1: D1Database, now: number, olderThanMs: number): Promise<string[]> {
  const rows = await d1.prepare(String.raw`SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'lanyard\_restore\_%' ESCAPE '\'`).all<{ name: string }>();
  return rows.results
    .map((r) => r.name)
    .filter((n) => {
      const started = parseInt(n.slice(STAGING_PREFIX.length).split("_")[0] ?? "", 36);
      return IDENT.test(n) && (!Number.isFinite(started) || now - started > olderThanMs);
    });
}
