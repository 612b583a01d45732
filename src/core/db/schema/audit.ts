/**
 * Audit devices (Vault API: /sys/audit): one row per enabled device. Devices are
 * cluster-wide as in Vault (enabled from the root namespace only), so rows have no namespace.
 * src/audit/audit-store.ts is the table's only door. Nothing secret is stored in the clear: the
 * HMAC salt and an http device's `headers` map are sealed (src/core/db/seal.ts, context bound to
 * the row id). Times are Unix milliseconds.
 */
import { integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

export const auditDevices = sqliteTable(
  "audit_devices",
  {
    /** Random id of this enablement; queue messages name it, so a re-enabled path is a new device. */
    id: text("id").primaryKey(),
    /** "collector/": mount-style, trailing slash, unique. */
    path: text("path").notNull(),
    /** http | r2 | stdout */
    type: text("type").notNull(),
    description: text("description").notNull(),
    /** The options as given (Vault's string map), without `headers`. */
    options: text("options", { mode: "json" }).$type<Record<string, string>>().notNull(),
    /** http: the `headers` map as sealed JSON; null when none. */
    sealedHeaders: text("sealed_headers"),
    local: integer("local", { mode: "boolean" }).notNull(),
    /** The device's HMAC key (a random UUID, as Vault's salt), sealed. Never read back. */
    sealedSalt: text("sealed_salt").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [uniqueIndex("audit_devices_path").on(t.path)],
);
