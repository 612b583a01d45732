/**
 * Tables of the service core: namespaces, ACL policies, tokens and mounts.
 * Times are Unix milliseconds. Nothing secret is stored here in the clear: tokens are kept as
 * SHA-256 hashes only (docs/storage-schema.md).
 */
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

export const namespaces = sqliteTable("namespaces", {
  id: text("id").primaryKey(),
  /** Full path with a trailing slash ("team/", "team/dev/"); the root namespace is "" and implicit. */
  path: text("path").notNull().unique(),
  parentId: text("parent_id").notNull(),
  customMetadata: text("custom_metadata", { mode: "json" }).$type<Record<string, string>>().notNull(),
  createdAt: integer("created_at").notNull(),
  /**
   * "deleting" from the moment a delete begins: triggers then refuse every row written into the
   * namespace (src/core/lifecycle.ts), so the delete's purge cannot miss one.
   */
  state: text("state", { enum: ["active", "deleting"] }).notNull().default("active"),
});

export const policies = sqliteTable(
  "policies",
  {
    namespaceId: text("namespace_id").notNull(),
    name: text("name").notNull(),
    text: text("text").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.namespaceId, t.name] })],
);

export const tokens = sqliteTable(
  "tokens",
  {
    /** SHA-256 of the token, hex. The token itself is never stored. */
    hash: text("hash").primaryKey(),
    accessor: text("accessor").notNull().unique(),
    namespaceId: text("namespace_id").notNull(),
    /** Accessor of the parent token; null for orphans and for children of the configured root token. */
    parentAccessor: text("parent_accessor"),
    policies: text("policies", { mode: "json" }).$type<string[]>().notNull(),
    displayName: text("display_name").notNull(),
    meta: text("meta", { mode: "json" }).$type<Record<string, string> | null>(),
    numUses: integer("num_uses").notNull(),
    /** Uses left when numUses > 0; decremented atomically on each use. */
    usesLeft: integer("uses_left").notNull(),
    ttl: integer("ttl").notNull(),
    explicitMaxTtl: integer("explicit_max_ttl").notNull(),
    renewable: integer("renewable", { mode: "boolean" }).notNull(),
    creationTime: integer("creation_time").notNull(),
    expireTime: integer("expire_time"),
    /** Hard limit from explicit_max_ttl or the parent's expiry; renewals never pass it. */
    maxExpireTime: integer("max_expire_time"),
    /** The path that created it, as lookup shows it: "auth/token/create", "auth/approle/login". */
    path: text("path").notNull().default("auth/token/create"),
    /** Seconds; > 0 makes the token periodic (each renewal extends it by the period). */
    period: integer("period").notNull().default(0),
    /** The auth mount that issued it at login; null for tokens of auth/token/. */
    authMountId: text("auth_mount_id"),
    /** The role it was created or logged in through; "" when none. */
    roleName: text("role_name").notNull().default(""),
    /** CIDR blocks the token may be used from (token_bound_cidrs); empty = anywhere. */
    boundCidrs: text("bound_cidrs", { mode: "json" }).$type<string[]>().notNull().default([]),
  },
  (t) => [index("tokens_parent").on(t.parentAccessor), index("tokens_namespace").on(t.namespaceId), index("tokens_auth_role").on(t.authMountId, t.roleName)],
);

export const mounts = sqliteTable(
  "mounts",
  {
    id: text("id").primaryKey(),
    namespaceId: text("namespace_id").notNull(),
    /** Path with a trailing slash, relative to the namespace ("secret/", "team/pki/"). */
    path: text("path").notNull(),
    type: text("type").notNull(),
    accessor: text("accessor").notNull().unique(),
    description: text("description").notNull(),
    options: text("options", { mode: "json" }).$type<Record<string, string>>().notNull(),
    /** Seconds; 0 means the system default (768h, docs/http-conventions.md). */
    defaultLeaseTtl: integer("default_lease_ttl").notNull(),
    maxLeaseTtl: integer("max_lease_ttl").notNull(),
    createdAt: integer("created_at").notNull(),
    /**
     * "disabling" from the moment a disable begins: triggers then refuse every insert or update
     * of the mount's engine rows (src/core/lifecycle.ts), so the purge that follows removes all.
     */
    state: text("state", { enum: ["active", "disabling"] }).notNull().default("active"),
  },
  (t) => [uniqueIndex("mounts_ns_path").on(t.namespaceId, t.path)],
);

/**
 * Token roles (auth/token/roles/:name; Vault API: /auth/token): what tokens created through
 * auth/token/create/:name get. The role's settings are one JSON document (src/auth/token-role-store.ts
 * defines and validates it), since they are always read and written whole.
 */
export const tokenRoles = sqliteTable(
  "token_roles",
  {
    namespaceId: text("namespace_id").notNull(),
    /** Stored lower-case, as Vault does. */
    name: text("name").notNull(),
    config: text("config", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.namespaceId, t.name] })],
);

/**
 * Activated features (Vault API: /sys/activation-flags): one row per feature
 * that was activated ("secrets-sync"). Cluster-wide, as in Vault; activation is one-way.
 */
export const activationFlags = sqliteTable("activation_flags", {
  name: text("name").primaryKey(),
  activatedAt: integer("activated_at").notNull(),
});

/**
 * One row (id 1): a known text sealed with SEAL_KEY at first start, the proof that the configured
 * keys open this database's data (src/core/db/seal-canary.ts, the door of this table).
 */
export const sealCanary = sqliteTable("seal_canary", {
  id: integer("id").primaryKey(),
  sealed: text("sealed").notNull(),
  updatedAt: integer("updated_at").notNull(),
});

/**
 * One row (id 1): this database's deployment identity, a random id written the first time a
 * snapshot is taken or restored (src/core/db/snapshot-tables.ts, the door of this table). A
 * snapshot names the deployment it came from; a plain restore refuses another deployment's
 * (`snapshot-force` does not). Never copied by a snapshot: a restore keeps the target's identity.
 */
export const deploymentIdentity = sqliteTable("deployment_identity", {
  id: integer("id").primaryKey(),
  deploymentId: text("deployment_id").notNull(),
  createdAt: integer("created_at").notNull(),
});
