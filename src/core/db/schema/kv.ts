/**
 * Tables of the versioned key/value engine (KV-v2). Secret data is sealed (AES-GCM, see
 * src/core/db/seal.ts) before it is written. The primary key of kv_versions is what makes
 * check-and-set safe across isolates: two writers of the same next version cannot both insert.
 */
import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const kvConfig = sqliteTable("kv_config", {
  mountId: text("mount_id").primaryKey(),
  maxVersions: integer("max_versions").notNull(),
  casRequired: integer("cas_required", { mode: "boolean" }).notNull(),
  deleteVersionAfter: integer("delete_version_after").notNull(),
});

export const kvMetadata = sqliteTable(
  "kv_metadata",
  {
    mountId: text("mount_id").notNull(),
    path: text("path").notNull(),
    currentVersion: integer("current_version").notNull(),
    oldestVersion: integer("oldest_version").notNull(),
    maxVersions: integer("max_versions").notNull(),
    casRequired: integer("cas_required", { mode: "boolean" }).notNull(),
    deleteVersionAfter: integer("delete_version_after").notNull(),
    customMetadata: text("custom_metadata", { mode: "json" }).$type<Record<string, string>>().notNull(),
    createdTime: integer("created_time").notNull(),
    updatedTime: integer("updated_time").notNull(),
  },
  (t) => [primaryKey({ columns: [t.mountId, t.path] })],
);

export const kvVersions = sqliteTable(
  "kv_versions",
  {
    mountId: text("mount_id").notNull(),
    path: text("path").notNull(),
    version: integer("version").notNull(),
    /** Sealed JSON of the secret's data; null once the version is destroyed. */
    sealedData: text("sealed_data"),
    createdTime: integer("created_time").notNull(),
    /** When the version is (or will be, with delete_version_after) soft-deleted. */
    deletionTime: integer("deletion_time"),
    destroyed: integer("destroyed", { mode: "boolean" }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.mountId, t.path, t.version] })],
);
