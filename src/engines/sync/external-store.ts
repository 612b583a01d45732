/**
 * The external secrets of each destination (docs/secrets-sync.md "What Lanyard guarantees at the destination", rules 1-3): table sync_external_secrets
 * (src/core/db/schema/sync.ts), whose only door this module is.
 *
 * Vault's Secrets Sync leaves name collisions to the user and deletes whatever name it unsyncs
 * (Vault API: custom_tags "last write wins"). Here every external name a destination's
 * association writes is first claimed: the row's primary key (destination, name_key) gives a name
 * to one association, and `claimNames` decides with one upsert per name that returns the owner,
 * so two associations racing for a name cannot both win (no read-then-write; D1 has no
 * interactive transactions: a batch is its only atomic unit). The first successful write records whether
 * Lanyard created the secret or found it there (`ownership`), and every write what Lanyard wrote
 * (an HMAC of the value, the provider's version/updated_at) for drift detection.
 */
import type { Db } from "../../core/db/client";
import type { DestinationType } from "./destinations/types";
import type { DestinationKey } from "./store";

export type Ownership = "created_by_lanyard" | "pre_existing";

export interface ExternalSecretRow {
  namespaceId: string;
  destinationType: DestinationType;
  destinationName: string;
  nameKey: string;
  name: string;
  associationId: string;
  subKey: string;
  /** null while claimed but not yet written. */
  ownership: Ownership | null;
  valueHmac: string | null;
  providerVersion: string | null;
  providerUpdatedAt: string | null;
  writtenAt: number | null;
  claimedAt: number;
}

interface Row {
  namespace_id: string;
  destination_type: string;
  destination_name: string;
  name_key: string;
  name: string;
  association_id: string;
  sub_key: string;
  ownership: string | null;
  value_hmac: string | null;
  provider_version: string | null;
  provider_updated_at: string | null;
  written_at: number | null;
  claimed_at: number;
}

function toRow(r: Row): ExternalSecretRow {
  return {
    namespaceId: r.namespace_id,
    destinationType: r.destination_type as DestinationType,
    destinationName: r.destination_name,
    nameKey: r.name_key,
    name: r.name,
    associationId: r.association_id,
    subKey: r.sub_key,
    ownership: r.ownership === "created_by_lanyard" || r.ownership === "pre_existing" ? r.ownership : null,
    valueHmac: r.value_hmac,
    providerVersion: r.provider_version,
    providerUpdatedAt: r.provider_updated_at,
    writtenAt: r.written_at,
    claimedAt: r.claimed_at,
  };
}

/**
 * The provider's identity of a name: Key Vault and the repository host compare secret names
 * without regard to case (Azure Key Vault REST API, GitHub REST API, Actions secrets), so "Db-Pass" and "db-pass" are one secret there.
 */
export function nameKey(type: DestinationType, name: string): string {
  return type === "cloudtwo-kv" || type === "repohost" ? name.toLowerCase() : name;
}

export interface Claim {
  subKey: string;
  name: string;
}

/**
 * Claims external names for an association, one conditional upsert per name in one batch. A name
 * nobody holds becomes the association's; a name it already holds stays its own (the sub-key is
 * refreshed); a name another association holds is left alone. Returns, per name lost, the id of
 * the association that owns it.
 */
export async function claimNames(db: Db, k: DestinationKey, associationId: string, claims: Claim[], now: number): Promise<{ name: string; ownerId: string }[]> {
  if (claims.length === 0) return [];
  const results = await db.$client.batch<{ association_id: string }>(claimStatements(db, k, associationId, claims, now));
  return lostClaims(associationId, claims, results);
}

/** The statements of `claimNames` (one upsert per claim), for a caller that batches them with others (./engine.ts). */
export function claimStatements(db: Db, k: DestinationKey, associationId: string, claims: Claim[], now: number): D1PreparedStatement[] {
  return claims.map((c) =>
    db.$client
      .prepare(
        `INSERT INTO sync_external_secrets (namespace_id, destination_type, destination_name, name_key, name, association_id, sub_key, claimed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (namespace_id, destination_type, destination_name, name_key) DO UPDATE SET
           sub_key = CASE WHEN association_id = excluded.association_id THEN excluded.sub_key ELSE sub_key END,
           name = CASE WHEN association_id = excluded.association_id THEN excluded.name ELSE name END
         RETURNING association_id`,
      )
      .bind(k.namespaceId, k.type, k.name, nameKey(k.type, c.name), c.name, associationId, c.subKey, now),
  );
}

/** The names lost, read from the results of `claimStatements` (in claim order). */
export function lostClaims(associationId: string, claims: Claim[], results: D1Result<unknown>[]): { name: string; ownerId: string }[] {
  const lost: { name: string; ownerId: string }[] = [];
  results.forEach((res, i) => {
    const owner = (res.results[0] as { association_id?: string } | undefined)?.association_id;
    const c = claims[i];
    if (c && owner !== undefined && owner !== associationId) lost.push({ name: c.name, ownerId: owner });
  });
  return lost;
}

/** `<mount>/<secret_name>` of an association, for messages naming the owner of a name. */
export async function associationLabel(db: Db, associationId: string): Promise<string> {
  const r = await db.$client
    .prepare("SELECT mount_path, secret_name FROM sync_associations WHERE id = ?")
    .bind(associationId)
    .first<{ mount_path: string; secret_name: string }>();
  return r ? `${r.mount_path.replace(/\/$/, "")}/${r.secret_name}` : `association ${associationId}`;
}

/** The names an association holds. */
export async function externalSecretsOf(db: Db, associationId: string): Promise<ExternalSecretRow[]> {
  const rows = await db.$client.prepare("SELECT * FROM sync_external_secrets WHERE association_id = ? ORDER BY name").bind(associationId).all<Row>();
  return rows.results.map(toRow);
}

/** The statement of `externalSecretsOf`, for a caller that batches it; read its result with `heldRows`. */
export function externalSecretsStatement(db: Db, associationId: string): D1PreparedStatement {
  return db.$client.prepare("SELECT * FROM sync_external_secrets WHERE association_id = ? ORDER BY name").bind(associationId);
}

export function heldRows(result: D1Result<unknown> | undefined): ExternalSecretRow[] {
  return ((result?.results ?? []) as Row[]).map(toRow);
}

export interface WriteRecord {
  /** What this write found; kept only if the name's ownership is not known yet (the first write decides). */
  ownership: Ownership;
  /**
   * `ownership` replaces the recorded one: only ever `pre_existing`, when the write found objects
   * under the name Lanyard did not create (./connectors/types.ts PutResult.foreign).
   */
  forceOwnership?: boolean;
  valueHmac: string;
  providerVersion: string | null;
  providerUpdatedAt: string | null;
}

/**
 * Records a successful write of a name the association holds (no change when it no longer
 * holds it). A statement: the engine commits it with the round's outcome (./engine.ts).
 */
export function recordWriteStatement(db: Db, k: DestinationKey, associationId: string, name: string, w: WriteRecord, now: number): D1PreparedStatement {
  return db.$client
    .prepare(
      `UPDATE sync_external_secrets SET ownership = CASE WHEN ? = 1 THEN 'pre_existing' ELSE coalesce(ownership, ?) END, value_hmac = ?,
         provider_version = ?, provider_updated_at = ?, written_at = ?, name = ?
       WHERE namespace_id = ? AND destination_type = ? AND destination_name = ? AND name_key = ? AND association_id = ?`,
    )
    .bind(w.forceOwnership === true && w.ownership === "pre_existing" ? 1 : 0, w.ownership, w.valueHmac, w.providerVersion, w.providerUpdatedAt, now, name, k.namespaceId, k.type, k.name, nameKey(k.type, name), associationId);
}

/** Releases names the association holds (after their removal at the provider, or when left there). */
export async function releaseNames(db: Db, k: DestinationKey, associationId: string, names: string[]): Promise<void> {
  if (names.length === 0) return;
  await db.$client.batch(
    names.map((n) =>
      db.$client
        .prepare(
          "DELETE FROM sync_external_secrets WHERE namespace_id = ? AND destination_type = ? AND destination_name = ? AND name_key = ? AND association_id = ?",
        )
        .bind(k.namespaceId, k.type, k.name, nameKey(k.type, n), associationId),
    ),
  );
}

/** Releases every name of an association except `keep` (names, compared by the provider's identity). */
export async function releaseAllExcept(db: Db, k: DestinationKey, associationId: string, keep: string[]): Promise<void> {
  const keepKeys = new Set(keep.map((n) => nameKey(k.type, n)));
  const held = await externalSecretsOf(db, associationId);
  await releaseNames(
    db,
    k,
    associationId,
    held.filter((r) => !keepKeys.has(r.nameKey)).map((r) => r.name),
  );
}

/**
 * `releaseAllExcept` as one statement (for a caller that batches it with the outcome,
 * ./engine.ts): deletes the association's rows of the destination whose name_key is not one of
 * `keep`'s (by the provider's identity of a name). Same rows as reading them and releasing
 * those not kept, without the read.
 */
export function releaseAllExceptStatement(db: Db, k: DestinationKey, associationId: string, keep: string[]): D1PreparedStatement {
  const keepKeys = [...new Set(keep.map((n) => nameKey(k.type, n)))];
  const notIn = keepKeys.length > 0 ? ` AND name_key NOT IN (${keepKeys.map(() => "?").join(", ")})` : "";
  return db.$client
    .prepare(`DELETE FROM sync_external_secrets WHERE namespace_id = ? AND destination_type = ? AND destination_name = ? AND association_id = ?${notIn}`)
    .bind(k.namespaceId, k.type, k.name, associationId, ...keepKeys);
}

/** Pre-existing names the associations of a destination hold (what a purge leaves in place). */
export async function preExistingOfDestination(db: Db, k: DestinationKey): Promise<string[]> {
  const rows = await db.$client
    .prepare(
      `SELECT name FROM sync_external_secrets WHERE namespace_id = ? AND destination_type = ? AND destination_name = ?
       AND ownership = 'pre_existing' ORDER BY name`,
    )
    .bind(k.namespaceId, k.type, k.name)
    .all<{ name: string }>();
  return rows.results.map((r) => r.name);
}

/** Deletes every external-secret row of a destination (the end of a purge). */
export async function deleteExternalSecretsOf(db: Db, k: DestinationKey): Promise<void> {
  await db.$client
    .prepare("DELETE FROM sync_external_secrets WHERE namespace_id = ? AND destination_type = ? AND destination_name = ?")
    .bind(k.namespaceId, k.type, k.name)
    .run();
}

/**
 * Records drift on an association (docs/secrets-sync.md "3. Drift is detected and repaired"): stamps `drift_detected_at` and counts it.
 * Kept here beside the rows it is about, so reconciliation needs no other door.
 */
export async function recordDrift(db: Db, associationId: string, now: number): Promise<void> {
  await db.$client
    .prepare("UPDATE sync_associations SET drift_detected_at = ?, drift_count = drift_count + 1 WHERE id = ?")
    .bind(now, associationId)
    .run();
}
