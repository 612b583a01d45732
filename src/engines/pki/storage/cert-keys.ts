/**
 * The keys of the slim pki_certs (migration 0019, docs/storage-schema.md "pki_certs"): mount and
 * issuer ids as pki_ids numbers, serials as their octets (src/core/db/schema/pki-serial.ts). The
 * storage modules build their pki_certs statements from these pieces, so the API's forms (ids,
 * colon hex) never leave storage/ changed.
 *
 * Invariant: every statement that writes a pki_certs row runs in a batch after the statements of
 * its mount and issuer (ensureIdsStmts; an id without a number would make mount_no/issuer_no NULL: the NOT NULL
 * constraint refuses the row rather than storing it under no mount). Reads use the subquery
 * `(SELECT no FROM pki_ids WHERE id = ?)`: a constant for SQLite, so the indexes on mount_no are
 * searched by equality; an id never numbered matches nothing.
 */
import { sql, type SQL } from "drizzle-orm";
import type { Db } from "../../../core/db/client";
import { pkiIds } from "../../../core/db/schema";
import type { BatchItem } from "drizzle-orm/batch";

export { firstSerialAfter, serialFromHex, serialOctets, serialText, type BlobValue } from "../../../core/db/schema/pki-serial";

/** Raw SQL: the number of the id bound in its place. */
export const NO_OF = "(SELECT no FROM pki_ids WHERE id = ?)";

/** Raw SQL: the id of a number column (e.g. `ID_OF("issuer_no")`). */
export const ID_OF = (column: string): string => `(SELECT id FROM pki_ids WHERE no = ${column})`;

/** Drizzle: the number of an id. */
export const noOf = (id: string): SQL<number> => sql<number>`(SELECT no FROM pki_ids WHERE id = ${id})`;

/** Drizzle: the id of a number column. */
export const idOf = (column: SQL | { name: string }): SQL<string> => sql<string>`(SELECT id FROM pki_ids WHERE no = ${column})`;

/** Ids per statement: D1 binds at most 100 parameters per statement. */
const IDS_PER_STATEMENT = 90;

/** Numbers the ids not numbered yet (for the batch that writes rows naming them): one statement per 90 distinct ids. */
export function ensureIdsStmts(db: Db, ids: Iterable<string>): BatchItem<"sqlite">[] {
  const values = [...new Set(ids)].map((id) => ({ id }));
  const out: BatchItem<"sqlite">[] = [];
  for (let i = 0; i < values.length; i += IDS_PER_STATEMENT) out.push(db.insert(pkiIds).values(values.slice(i, i + IDS_PER_STATEMENT)).onConflictDoNothing());
  return out;
}
