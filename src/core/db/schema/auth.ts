/**
 * Auth methods (Vault API: /auth/approle, /auth/jwt, /auth/kubernetes): the roles and configuration of approle, jwt and
 * kubernetes mounts, and AppRole's SecretIDs. An auth mount is a row of `mounts` whose path starts
 * with "auth/" (src/auth/methods/). Every row belongs to one auth mount (`mount_id`); like the
 * engines' rows they cannot be written once the mount is being disabled (migrations/0009
 * triggers), so the disable's purge leaves none behind. Times are Unix milliseconds.
 * Nothing secret is stored in the clear: SecretIDs are salted SHA-256 hashes, secret configuration
 * values (token_reviewer_jwt, oidc_client_secret) are sealed (src/auth/methods/method-store.ts).
 */
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

export const authRoles = sqliteTable(
  "auth_roles",
  {
    mountId: text("mount_id").notNull(),
    /** Lower-cased, as Vault stores role names. */
    name: text("name").notNull(),
    /** AppRole's RoleID (unique within the mount, looked up at login); null for other methods. */
    roleId: text("role_id"),
    /** The role's settings as the method defines them, always read and written whole. */
    config: text("config", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.mountId, t.name] }), uniqueIndex("auth_roles_role_id").on(t.mountId, t.roleId)],
);

export const authConfigs = sqliteTable("auth_configs", {
  mountId: text("mount_id").primaryKey(),
  /** The method's configuration; values of its secret keys are sealed strings. */
  config: text("config", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
  updatedAt: integer("updated_at").notNull(),
});

export const approleSecretIds = sqliteTable(
  "approle_secret_ids",
  {
    mountId: text("mount_id").notNull(),
    roleName: text("role_name").notNull(),
    /** SHA-256 (hex) of mount id, role name, the role's random salt and the SecretID; the SecretID itself is never stored. */
    hash: text("hash").notNull(),
    accessor: text("accessor").notNull(),
    metadata: text("metadata", { mode: "json" }).$type<Record<string, string>>().notNull(),
    cidrList: text("cidr_list", { mode: "json" }).$type<string[]>().notNull(),
    tokenBoundCidrs: text("token_bound_cidrs", { mode: "json" }).$type<string[]>().notNull(),
    /** 0 = unlimited. */
    numUses: integer("num_uses").notNull(),
    /** Uses left when numUses > 0; spent by one conditional UPDATE per login. */
    usesLeft: integer("uses_left").notNull(),
    /** Seconds, as generated; 0 = no expiry. */
    ttl: integer("ttl").notNull(),
    creationTime: integer("creation_time").notNull(),
    /** 0 = never expires. */
    expirationTime: integer("expiration_time").notNull(),
    lastUpdatedTime: integer("last_updated_time").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.mountId, t.hash] }),
    uniqueIndex("approle_secret_ids_accessor").on(t.mountId, t.accessor),
    index("approle_secret_ids_role").on(t.mountId, t.roleName),
  ],
);
