/**
 * Tables of Lanyard's own identity tokens (docs/secrets-sync.md "Keyless destinations"): the
 * signing keys of the plugin-identity issuer and its per-namespace configuration (Vault API:
 * /identity/oidc/config, /identity/oidc/plugins/.well-known/keys). A private key never reaches
 * D1 in the clear: it is sealed (src/core/db/seal.ts) under a context that names its key id.
 * Times are Unix milliseconds. All access goes through src/engines/identity/store.ts.
 */
import { integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

export const identityKeys = sqliteTable("identity_keys", {
  /** The JWK `kid`: random, never reused. */
  kid: text("kid").primaryKey(),
  /** "ES256". */
  algorithm: text("algorithm").notNull(),
  /** The public key as a JWK (JSON text), what the key set publishes. */
  publicJwk: text("public_jwk").notNull(),
  /** The private key as a JWK, sealed. */
  sealedPrivateKey: text("sealed_private_key").notNull(),
  createdAt: integer("created_at").notNull(),
  /** When a newer key took over signing; null while this key signs. */
  rotatedAt: integer("rotated_at"),
  /** When the key leaves the key set (no token it signed is still valid then); null while it signs. */
  withdrawAt: integer("withdraw_at"),
});

/** identity/oidc/config per namespace: the public URL the issuer is named by. */
export const identityConfig = sqliteTable("identity_config", {
  namespaceId: text("namespace_id").primaryKey(),
  issuer: text("issuer").notNull(),
  updatedAt: integer("updated_at").notNull(),
});
