/**
 * Every table a storage snapshot covers, each as its rows in rowid order (BLOBs as arrays of
 * octets), for tests that compare the database before a snapshot with the one after its restore
 * (docs/operations.md "Snapshots").
 */
import { env } from "cloudflare:test";

export async function dumpTables(): Promise<Record<string, unknown[]>> {
  const tables = await env.DB.prepare(
    String.raw`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' AND name NOT LIKE '\_cf\_%' ESCAPE '\' AND name NOT IN ('d1_migrations', 'deployment_identity') ORDER BY name`,
  ).all<{ name: string }>();
  const out: Record<string, unknown[]> = {};
  for (const { name } of tables.results) out[name] = (await env.DB.prepare(`SELECT * FROM "${name}" ORDER BY rowid`).raw()).map((r) => r.map((v) => (v instanceof ArrayBuffer ? [...new Uint8Array(v)] : v)));
  return out;
}
