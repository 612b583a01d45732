/**
 * Tables of the PKI engine's ACME server (RFC 8555). Every row belongs to one PKI
 * mount (`mount_id`) and goes when the mount is disabled (src/engines/pki/purge.ts). Their doors:
 * src/engines/pki/storage/acme-store.ts (the ACME server) and acme-tidy-store.ts (tidy_acme's
 * bulk scans and deletes). Migration 0010 adds triggers that refuse
 * writes into a mount being disabled, as 0006 does for the other engine tables.
 * Times are Unix milliseconds.
 */
import { sql } from "drizzle-orm";
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

/** config/acme of a mount (Vault API: /pki/config/acme), one JSON value; no row = the defaults. */
export const pkiAcmeConfig = sqliteTable("pki_acme_config", {
  mountId: text("mount_id").primaryKey(),
  value: text("value", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
  updatedAt: integer("updated_at").notNull(),
});

/**
 * Replay nonces handed out (RFC 8555 §6.5). A nonce is consumed by one DELETE … RETURNING, so
 * two requests presenting it concurrently cannot both succeed.
 */
export const pkiAcmeNonces = sqliteTable(
  "pki_acme_nonces",
  {
    mountId: text("mount_id").notNull(),
    nonce: text("nonce").notNull(),
    expiresAt: integer("expires_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.mountId, t.nonce] }), index("pki_acme_nonces_expiry").on(t.mountId, t.expiresAt)],
);

/** ACME accounts (RFC 8555 §7.1.2). One account per key (thumbprint) per mount. */
export const pkiAcmeAccounts = sqliteTable(
  "pki_acme_accounts",
  {
    mountId: text("mount_id").notNull(),
    id: text("id").notNull(),
    /** RFC 7638 SHA-256 thumbprint (base64url) of the account key. */
    thumbprint: text("thumbprint").notNull(),
    /** The account's public JWK. */
    jwk: text("jwk", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    /** valid | deactivated | revoked. */
    status: text("status").notNull(),
    contact: text("contact", { mode: "json" }).$type<string[]>().notNull(),
    /** The directory the account was created in ("acme", "roles/web/acme", …); it is bound to it. */
    directory: text("directory").notNull(),
    /** The EAB key that created the account; "" when none. */
    eabId: text("eab_id").notNull(),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.mountId, t.id] }), uniqueIndex("pki_acme_accounts_key").on(t.mountId, t.thumbprint)],
);

/** Orders (RFC 8555 §7.1.3). `status` stored is pending|processing|valid|invalid; "ready" is derived. */
export const pkiAcmeOrders = sqliteTable(
  "pki_acme_orders",
  {
    mountId: text("mount_id").notNull(),
    id: text("id").notNull(),
    accountId: text("account_id").notNull(),
    directory: text("directory").notNull(),
    status: text("status").notNull(),
    /** [{type, value}] as requested. */
    identifiers: text("identifiers", { mode: "json" }).$type<{ type: string; value: string }[]>().notNull(),
    /** The requested notAfter (RFC 3339) or "". */
    notAfter: text("not_after").notNull(),
    /** What issues the certificate: the role ("" = sign-verbatim) and the issuer reference. */
    role: text("role").notNull(),
    issuer: text("issuer").notNull(),
    expiresAt: integer("expires_at").notNull(),
    /** Colon hex serial of the issued certificate, "" until finalized. */
    certSerial: text("cert_serial").notNull(),
    /** The PEM chain served at order/:id/cert. */
    certChain: text("cert_chain").notNull(),
    /** Unix ms: the certificate's notAfter (0 until issued; tidy reads it). */
    certExpiresAt: integer("cert_expires_at").notNull(),
    /** A problem document when the order failed, else null. */
    error: text("error", { mode: "json" }).$type<Record<string, unknown> | null>(),
    createdAt: integer("created_at").notNull(),
    /** The ACME profile asked for (draft-aaron-acme-profiles), "" for the directory's default (migration 0015). */
    profile: text("profile").notNull().default(""),
    /** The certID (RFC 9773 §4.1, canonical form) of the certificate this order replaces (§5), "" when none. */
    replaces: text("replaces").notNull().default(""),
  },
  (t) => [
    primaryKey({ columns: [t.mountId, t.id] }),
    index("pki_acme_orders_account").on(t.mountId, t.accountId),
    index("pki_acme_orders_serial").on(t.mountId, t.certSerial),
    // One order at a time replaces a certificate (RFC 9773 §5); an order that failed gives it up.
    uniqueIndex("pki_acme_orders_replaces").on(t.mountId, t.replaces).where(sql`${t.replaces} <> ''`),
  ],
);

/** Authorizations (RFC 8555 §7.1.4): one per identifier of an order. */
export const pkiAcmeAuthzs = sqliteTable(
  "pki_acme_authzs",
  {
    mountId: text("mount_id").notNull(),
    id: text("id").notNull(),
    orderId: text("order_id").notNull(),
    accountId: text("account_id").notNull(),
    /** "dns" | "ip"; the value without a wildcard's "*." */
    identifierType: text("identifier_type").notNull(),
    identifierValue: text("identifier_value").notNull(),
    wildcard: integer("wildcard", { mode: "boolean" }).notNull(),
    /** pending | valid | invalid | deactivated. */
    status: text("status").notNull(),
    expiresAt: integer("expires_at").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.mountId, t.id] }), index("pki_acme_authzs_order").on(t.mountId, t.orderId)],
);

/** Challenges (RFC 8555 §7.1.5, §8): one per offered type of an authorization. */
export const pkiAcmeChallenges = sqliteTable(
  "pki_acme_challenges",
  {
    mountId: text("mount_id").notNull(),
    authzId: text("authz_id").notNull(),
    type: text("type").notNull(),
    token: text("token").notNull(),
    /** pending | processing | valid | invalid. */
    status: text("status").notNull(),
    /** Unix ms of a successful validation, 0 before. */
    validatedAt: integer("validated_at").notNull(),
    error: text("error", { mode: "json" }).$type<Record<string, unknown> | null>(),
    /** Validation attempts made so far (patient validation, docs/pki-acme.md; migration 0015). */
    attempts: integer("attempts").notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.mountId, t.authzId, t.type] })],
);

/** External account binding keys (Vault API: /pki/acme/new-eab): single use, bound to a directory. */
export const pkiAcmeEab = sqliteTable(
  "pki_acme_eab",
  {
    mountId: text("mount_id").notNull(),
    id: text("id").notNull(),
    /** The HMAC key, sealed (context pki-acme-eab:<mount>:<id>). */
    sealedKey: text("sealed_key").notNull(),
    directory: text("directory").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.mountId, t.id] })],
);

/**
 * Early-renewal marks (RFC 9773 §4.2, docs/pki-acme.md "Renewal information"): an operator asked
 * every certificate of an issuer (`kind` "issuer", `ref` its id) or of a role (`kind` "role",
 * `ref` its name) to be renewed now. Migration 0015.
 */
export const pkiAcmeRenewalMarks = sqliteTable(
  "pki_acme_renewal_marks",
  {
    mountId: text("mount_id").notNull(),
    kind: text("kind").notNull(),
    ref: text("ref").notNull(),
    /** Shown to clients as the window's explanationURL; "" for none. */
    explanationUrl: text("explanation_url").notNull(),
    /** Unix ms. */
    markedAt: integer("marked_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.mountId, t.kind, t.ref] })],
);
