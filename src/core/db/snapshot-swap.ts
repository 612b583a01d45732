/**
 * The last step of a restore: the live tables' contents replaced from the staging tables, in one
 * D1 batch, hence one transaction (https://developers.cloudflare.com/d1/worker-api/d1-database/#batch).
 *
 * The triggers on the restored tables (the lifecycle guards of migrations 0006-0010, which refuse
 * an insert into a mount being disabled) are dropped first and re-created from their own SQL
 * (sqlite_master) last, inside the same batch: rows are copied as they were stored, including
 * those of a mount that was being disabled when the snapshot was taken, and no trigger is ever
 * missing outside the transaction. Rows are inserted in the order the snapshot listed them.
 */
import { quoteIdent, triggersOn } from "./snapshot-tables";

export interface StagedTable {
  name: string;
  staging: string;
  columns: string[];
}

export async function swapFromStaging(d1: D1Database, tables: readonly StagedTable[]): Promise<void> {
  const triggers = await triggersOn(d1, tables.map((t) => t.name));
  const stmts: D1PreparedStatement[] = [
    ...triggers.map((t) => d1.prepare(`DROP TRIGGER IF EXISTS ${quoteIdent(t.name)}`)),
    ...tables.map((t) => d1.prepare(`DELETE FROM ${quoteIdent(t.name)}`)),
    ...tables.map((t) => {
      const cols = t.columns.map(quoteIdent).join(", ");
      return d1.prepare(`INSERT INTO ${quoteIdent(t.name)} (${cols}) SELECT ${cols} FROM ${quoteIdent(t.staging)} ORDER BY rowid`);
    }),
    ...triggers.map((t) => d1.prepare(t.definition)),
    ...tables.map((t) => d1.prepare(`DROP TABLE ${quoteIdent(t.staging)}`)),
  ];
  await d1.batch(stmts);
}
