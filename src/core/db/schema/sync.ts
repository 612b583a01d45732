/**
 * Tables of secrets sync (Vault API: /sys/sync; docs/secrets-sync.md).
 * Credentials never reach D1 in the clear: a destination keeps its non-sensitive connection
 * details as JSON and its sensitive members (keys, tokens, client secrets, service-account JSON)
 * sealed together (src/core/db/seal.ts); an app keeps its private key sealed. The seal context names
 * the row, so a sealed value copied to another row does not open there.
 * Times are Unix milliseconds. All access goes through src/engines/sync/store.ts and, for
 * sync_associations and sync_external_secrets, src/engines/sync/association-store.ts and
 * src/engines/sync/external-store.ts (sys/metrics' counts: src/engines/sync/metrics-store.ts, read only).
 */
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

/** The global sync switch (one row, id "global"; absent means the defaults). */
export const syncConfig = sqliteTable("sync_config", {
  id: text("id").primaryKey(),
  disabled: integer("disabled", { mode: "boolean" }).notNull(),
  queueCapacity: integer("queue_capacity").notNull(),
  updatedAt: integer("updated_at").notNull(),
  /** Seconds between drift reconciliation passes (drift repair); 0 turns them off. */
  reconcileInterval: integer("reconcile_interval").notNull().default(3600),
});

export const syncDestinations = sqliteTable(
  "sync_destinations",
  {
    namespaceId: text("namespace_id").notNull(),
    type: text("type").notNull(),
    name: text("name").notNull(),
    /** Non-sensitive connection details (region, key_vault_uri, repository_owner, ...). */
    connection: text("connection", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    /** Sealed JSON object of the sensitive connection members. */
    sealedCredentials: text("sealed_credentials").notNull(),
    /** {granularity, secret_name_template, custom_tags, drift_repair} (drift_repair absent = true). */
    options: text("options", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    /** Set once a delete with purge=true was accepted; part 2's engine carries the purge out. */
    purgeInitiatedAt: integer("purge_initiated_at"),
    purgeError: text("purge_error"),
    /** Bumped on every write; updates are conditional on it (compare-and-set, no lost updates). */
    version: integer("version").notNull(),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.namespaceId, t.type, t.name] }), index("sync_destinations_purge").on(t.purgeInitiatedAt)],
);

/**
 * Links between a KV-v2 secret and a destination, and the sync engine's state for each
 * (src/engines/sync/engine.ts). `generation` counts the triggers (set, remove, KV change, reconcile);
 * `done_generation` is the last generation whose outcome is final, so a redelivered message for
 * a finished generation is a no-op. `desired` is the user's latest intent ("synced" or
 * "unsynced"); a removed association stays as a tombstone (desired "unsynced", status
 * UNSYNCED) so its generation keeps growing if it is set again, and is hidden from reads.
 * `external` maps each sub-key ("" for secret-path granularity) to the name it has at the
 * provider and its own status. `lease_*` serialise the engine's work on one association.
 */
export const syncAssociations = sqliteTable(
  "sync_associations",
  {
    id: text("id").primaryKey(),
    namespaceId: text("namespace_id").notNull(),
    destinationType: text("destination_type").notNull(),
    destinationName: text("destination_name").notNull(),
    mountAccessor: text("mount_accessor").notNull(),
    secretName: text("secret_name").notNull(),
    syncStatus: text("sync_status").notNull(),
    updatedAt: integer("updated_at").notNull(),
    mountId: text("mount_id").notNull().default(""),
    mountPath: text("mount_path").notNull().default(""),
    desired: text("desired").notNull().default("synced"),
    generation: integer("generation").notNull().default(1),
    doneGeneration: integer("done_generation").notNull().default(0),
    external: text("external", { mode: "json" }).$type<Record<string, unknown>>().notNull().default({}),
    lastError: text("last_error"),
    attempts: integer("attempts").notNull().default(0),
    leaseToken: text("lease_token"),
    leaseUntil: integer("lease_until"),
    /** When the engine last called the provider for this association. */
    lastAttemptAt: integer("last_attempt_at"),
    /** When the queue will try again after a retryable failure; null when nothing is scheduled. */
    nextRetryAt: integer("next_retry_at"),
    /** Set when an operation exhausted its retries (dead letter); cleared by the next set. */
    deadLetteredAt: integer("dead_lettered_at"),
    /** Last time reconciliation found the provider's copy changed or gone. */
    driftDetectedAt: integer("drift_detected_at"),
    driftCount: integer("drift_count").notNull().default(0),
  },
  (t) => [
    index("sync_associations_destination").on(t.namespaceId, t.destinationType, t.destinationName),
    uniqueIndex("sync_associations_link").on(t.namespaceId, t.destinationType, t.destinationName, t.mountId, t.secretName),
    index("sync_associations_secret").on(t.mountId, t.secretName),
    index("sync_associations_status").on(t.syncStatus),
  ],
);

/**
 * One row per external secret name an association of a destination writes (its
 * ownership, for collision checks and drift repair).
 * The primary key makes a name belong to one association of the destination: an association
 * claims a name with one conditional upsert, and a second association wanting it loses
 * (`name_key` is the provider's identity of the name: lower-cased where the provider compares
 * names without case, cloudtwo-kv and repohost). `ownership` is null while the name is claimed
 * but not yet written, then `created_by_lanyard` or `pre_existing` (what the first write found;
 * never changed afterwards); Lanyard deletes only what it created. `value_hmac` (HMAC-SHA256 of
 * the value under a key derived from the seal key, "<kid>:<hex>") and the provider's
 * version/updated_at are what Lanyard last wrote, for drift detection. A row goes when the
 * name is no longer wanted and its removal at the provider (or, if pre-existing, its release) is done.
 */
export const syncExternalSecrets = sqliteTable(
  "sync_external_secrets",
  {
    namespaceId: text("namespace_id").notNull(),
    destinationType: text("destination_type").notNull(),
    destinationName: text("destination_name").notNull(),
    nameKey: text("name_key").notNull(),
    /** The name as written at the provider. */
    name: text("name").notNull(),
    associationId: text("association_id").notNull(),
    /** The association's sub-key ("" for secret-path granularity). */
    subKey: text("sub_key").notNull(),
    ownership: text("ownership"),
    valueHmac: text("value_hmac"),
    providerVersion: text("provider_version"),
    providerUpdatedAt: text("provider_updated_at"),
    writtenAt: integer("written_at"),
    claimedAt: integer("claimed_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.namespaceId, t.destinationType, t.destinationName, t.nameKey] }),
    index("sync_external_secrets_association").on(t.associationId),
  ],
);

/** Custom repository-host applications (reference §1.15). */
export const syncRepohostApps = sqliteTable(
  "sync_repohost_apps",
  {
    namespaceId: text("namespace_id").notNull(),
    name: text("name").notNull(),
    appId: integer("app_id").notNull(),
    /** Sealed PKCS#8 PEM of the app's RSA private key. */
    sealedPrivateKey: text("sealed_private_key").notNull(),
    /** "SHA256:<base64>" of the public key's DER SubjectPublicKeyInfo. */
    fingerprint: text("fingerprint").notNull(),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.namespaceId, t.name] })],
);
