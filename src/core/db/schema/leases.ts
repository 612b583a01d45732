/**
 * Leases (Vault's expiration manager; Vault API: /sys/leases): one row per lease an engine
 * handed out, today only the PKI engine's certificates of roles with `generate_lease`. Leases are a
 * system feature: src/core/lease-store.ts is the only module that reads or writes this table, and
 * the engine that created a lease revokes its secret through its Engine value (`revokeLease`).
 * Times are Unix milliseconds.
 */
import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const leases = sqliteTable(
  "leases",
  {
    namespaceId: text("namespace_id").notNull(),
    /**
     * The lease id as clients see it: `<request path>/<24 base62>` relative to the namespace,
     * with Vault's `.<namespace id>` suffix outside the root namespace.
     */
    id: text("id").notNull(),
    /** The mount the lease's secret lives in: disabling it purges the lease (migrations/0008). */
    mountId: text("mount_id").notNull(),
    /** What the engine needs to revoke the secret (Vault's Secret.InternalData), e.g. PKI's `serial_number`. */
    internalData: text("internal_data", { mode: "json" }).$type<Record<string, string>>().notNull(),
    issueTime: integer("issue_time").notNull(),
    expireTime: integer("expire_time").notNull(),
  },
  (t) => [primaryKey({ columns: [t.namespaceId, t.id] }), index("leases_mount").on(t.mountId), index("leases_expire").on(t.expireTime)],
);
