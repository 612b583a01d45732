/**
 * The engine's per-run state of an association row (sync_associations): the lease that lets one
 * worker at a time drive it, the in-flight mark, and the outcome of a round. Every outcome write
 * is conditional on the generation it was computed for, so a stale worker cannot overwrite a
 * newer intent. What must happen together goes in one D1 batch, one round trip (`leaseAndLoad`,
 * `finishRound`, `markInFlightStatement` for the engine's own batch); a batch runs its
 * statements in order as one transaction, so each keeps its own condition, and the lease is
 * released with an outcome only if that outcome was recorded.
 */
import type { Db } from "../../core/db/client";
import { toAssociation, type Association, type ExternalEntry, type Row, type SyncStatus } from "./association-store";

/** What `leaseAndLoad` found: the row (null: gone), whether this worker now holds it, and whether sync is disabled. */
export interface LeaseStart {
  assoc: Association | null;
  leased: boolean;
  disabled: boolean;
}

/**
 * Takes the association's lease and reads the row and the global `disabled` switch, in one D1
 * batch (one round trip; the batch is one transaction, so the row read is the row as the lease
 * update left it). `leased` is true only when the row now carries this worker's token.
 */
export async function leaseAndLoad(db: Db, id: string, token: string, now: number, ttlMs: number): Promise<LeaseStart> {
  const [, row, cfg] = await db.$client.batch([
    db.$client
      .prepare("UPDATE sync_associations SET lease_token = ?, lease_until = ? WHERE id = ? AND (lease_until IS NULL OR lease_until < ?)")
      .bind(token, now + ttlMs, id, now),
    db.$client.prepare("SELECT * FROM sync_associations WHERE id = ?").bind(id),
    // The sync_config row (./store.ts getSyncConfig reads the same row): no row = enabled.
    db.$client.prepare("SELECT disabled FROM sync_config WHERE id = 'global'"),
  ]);
  const r = (row?.results[0] as (Row & { lease_token: string | null }) | undefined) ?? null;
  const disabled = Boolean((cfg?.results[0] as { disabled: number } | undefined)?.disabled);
  return { assoc: r ? toAssociation(r) : null, leased: r?.lease_token === token, disabled };
}

/** The statement of `markInFlight`, for a caller that batches it with others (./engine.ts). */
export function markInFlightStatement(db: Db, id: string, gen: number, status: SyncStatus, now: number): D1PreparedStatement {
  return db.$client.prepare("UPDATE sync_associations SET sync_status = ?, updated_at = ? WHERE id = ? AND generation = ?").bind(status, now, id, gen);
}

/** Takes the association's lease (one engine worker at a time); false when someone holds it. */
export async function acquireLease(db: Db, id: string, token: string, now: number, ttlMs: number): Promise<boolean> {
  const res = await db.$client
    .prepare("UPDATE sync_associations SET lease_token = ?, lease_until = ? WHERE id = ? AND (lease_until IS NULL OR lease_until < ?)")
    .bind(token, now + ttlMs, id, now)
    .run();
  return (res.meta.changes ?? 0) === 1;
}

export async function releaseLease(db: Db, id: string, token: string): Promise<void> {
  await db.$client.prepare("UPDATE sync_associations SET lease_token = NULL, lease_until = NULL WHERE id = ? AND lease_token = ?").bind(id, token).run();
}

/** Marks the in-flight state of generation `gen`; false when the generation moved on. */
export async function markInFlight(db: Db, id: string, gen: number, status: SyncStatus, now: number): Promise<boolean> {
  const res = await db.$client
    .prepare("UPDATE sync_associations SET sync_status = ?, updated_at = ? WHERE id = ? AND generation = ?")
    .bind(status, now, id, gen)
    .run();
  return (res.meta.changes ?? 0) === 1;
}

export interface Outcome {
  status: SyncStatus;
  external: Record<string, ExternalEntry>;
  lastError: string | null;
  /** Final for this generation (success, client error, retries exhausted). */
  done: boolean;
  /** When the queue will try again (a retryable failure that is not final); null otherwise. */
  nextRetryAt: number | null;
  /** Retries exhausted: the association stays failed until a new set (docs/secrets-sync.md "5. Failures are visible"). */
  deadLetter: boolean;
}

/**
 * The two statements of an outcome: the external map is stored whatever the generation (it
 * records what is at the provider now); status, error and done only if `gen` is still current.
 */
function outcomeStmts(db: Db, id: string, gen: number, o: Outcome, now: number): D1PreparedStatement[] {
  return [
    db.$client.prepare("UPDATE sync_associations SET external = ? WHERE id = ?").bind(JSON.stringify(o.external), id),
    db.$client
      .prepare(
        `UPDATE sync_associations SET sync_status = ?, last_error = ?, updated_at = ?, attempts = attempts + 1,
           last_attempt_at = ?, next_retry_at = ?, dead_lettered_at = CASE WHEN ? THEN ? ELSE NULL END,
           done_generation = CASE WHEN ? THEN generation ELSE done_generation END
         WHERE id = ? AND generation = ?`,
      )
      .bind(o.status, o.lastError, now, now, o.nextRetryAt, o.deadLetter ? 1 : 0, now, o.done ? 1 : 0, id, gen),
  ];
}

/**
 * Ends a round of the engine in one D1 batch: `before` (the caller's statements that belong to
 * the outcome, e.g. releasing names), then the outcome (outcomeStmts), then the
 * lease is released only if the outcome was recorded (the generation is still `gen`: otherwise
 * the engine keeps the lease and looks again), then the row as it stands. Returns whether the
 * generation was still current, and the row (null if it was deleted meanwhile).
 */
export async function finishRound(
  db: Db,
  id: string,
  gen: number,
  o: Outcome,
  now: number,
  token: string,
  before: D1PreparedStatement[] = [],
): Promise<{ current: boolean; assoc: Association | null }> {
  const results = await db.$client.batch([
    ...before,
    ...outcomeStmts(db, id, gen, o, now),
    db.$client
      .prepare("UPDATE sync_associations SET lease_token = NULL, lease_until = NULL WHERE id = ? AND lease_token = ? AND generation = ?")
      .bind(id, token, gen),
    db.$client.prepare("SELECT * FROM sync_associations WHERE id = ?").bind(id),
  ]);
  const outcome = results[before.length + 1];
  const row = results[before.length + 3]?.results[0] as Row | undefined;
  return { current: (outcome?.meta.changes ?? 0) === 1, assoc: row ? toAssociation(row) : null };
}
