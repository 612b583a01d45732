/**
 * The inventory backfill (scheduled, every cron run): fills the inventory columns of pki_certs
 * rows stored before migration 0017 added them (common_name, sans, not_before; `revoked_at` was
 * filled by the migration itself, in SQL, from pki_revoked). SQL cannot read a DER certificate,
 * so this is done here, BATCH_ROWS rows a run: one SELECT through the partial index
 * pki_certs_inv_pending and one batch of UPDATEs (ROWS_PER_STATEMENT rows bound as one JSON
 * array each), 1 + BATCH_ROWS / ROWS_PER_STATEMENT = 9 D1 queries of the invocation's 1,000.
 * Until a row is filled, listings still show it (its facts are read from the DER on the fly,
 * ./inventory.ts) but the common_name and san filters cannot match it. `role` stays null for
 * such rows: it was never recorded (docs/pki-inventory.md "Older certificates").
 *
 * Concurrency: the UPDATE only writes rows still unfilled, so two overlapping runs write the
 * same values at worst; a row the certificate's own issuance filled is never touched.
 */
import { openDb } from "../../../core/db/client";
import { base64ToBytes } from "../../../core/encoding";
import { fillInventoryColumns, pendingInventoryRows, type FilledColumns } from "../storage/inventory-store";
import { inventoryColumns } from "./columns";

export const BATCH_ROWS = 2000;
const ROWS_PER_STATEMENT = 250;

/** Fills one batch; returns how many rows it filled (0: nothing is left). */
export async function backfillInventory(env: Env, limit = BATCH_ROWS): Promise<number> {
  const db = openDb(env.DB);
  const rows = await pendingInventoryRows(db, limit);
  const filled: FilledColumns[] = [];
  for (const r of rows) {
    let c: { commonName: string; sans: string; notBefore: number };
    try {
      c = inventoryColumns(base64ToBytes(r.der));
    } catch {
      // A stored row is a certificate this mount signed or accepted; one that does not parse is
      // marked with not_before 0 so it is not retried every minute, and listed with what is known.
      c = { commonName: "", sans: "", notBefore: 0 };
    }
    filled.push({ mount_id: r.mount_id, serial: r.serial, common_name: c.commonName, sans: c.sans, not_before: c.notBefore });
  }
  await fillInventoryColumns(db, filled, ROWS_PER_STATEMENT);
  return filled.length;
}
