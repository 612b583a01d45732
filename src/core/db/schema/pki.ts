/**
 * Tables of the PKI engine. Every row belongs to one mount (`mount_id`); disabling the mount
 * removes them (src/engines/pki/purge.ts purgePkiMount). Private keys are sealed (src/core/db/seal.ts) with
 * the key id as context, so a sealed key copied to another row does not open there.
 * Times are Unix milliseconds unless a column says otherwise.
 */
import { sql } from "drizzle-orm";
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { serialBlob } from "./pki-serial";

export const pkiKeys = sqliteTable(
  "pki_keys",
  {
    id: text("id").primaryKey(),
    mountId: text("mount_id").notNull(),
    /** "" when unnamed; unique per mount otherwise (checked by the engine). */
    name: text("name").notNull(),
    keyType: text("key_type").notNull(),
    keyBits: integer("key_bits").notNull(),
    /** base64 DER SubjectPublicKeyInfo: how issuers are linked to keys. */
    publicKey: text("public_key").notNull(),
    /** Sealed base64 PKCS#8. */
    sealedPrivateKey: text("sealed_private_key").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [index("pki_keys_mount").on(t.mountId)],
);

export const pkiIssuers = sqliteTable(
  "pki_issuers",
  {
    id: text("id").primaryKey(),
    mountId: text("mount_id").notNull(),
    name: text("name").notNull(),
    /** "" when no key of the mount matches the certificate's public key. */
    keyId: text("key_id").notNull(),
    /** Normalised PEM: trimmed plus exactly one trailing newline. */
    certificate: text("certificate").notNull(),
    /** Colon hex serial of the issuer certificate. */
    serial: text("serial").notNull(),
    /** base64 DER of the subject and issuer names, for chain building. */
    subjectDer: text("subject_der").notNull(),
    issuerDer: text("issuer_der").notNull(),
    publicKey: text("public_key").notNull(),
    notAfter: integer("not_after").notNull(),
    /** Computed chain: issuer ids, self first. */
    caChain: text("ca_chain", { mode: "json" }).$type<string[]>().notNull(),
    manualChain: text("manual_chain", { mode: "json" }).$type<string[] | null>(),
    leafNotAfterBehavior: text("leaf_not_after_behavior").notNull(),
    usage: text("usage", { mode: "json" }).$type<string[]>().notNull(),
    revocationSignatureAlgorithm: text("revocation_signature_algorithm").notNull(),
    aia: text("aia", { mode: "json" }).$type<IssuerAia | null>(),
    revoked: integer("revoked", { mode: "boolean" }).notNull(),
    revocationTime: integer("revocation_time"),
    lastModified: integer("last_modified").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [index("pki_issuers_mount").on(t.mountId)],
);

export interface IssuerAia {
  issuing_certificates: string[];
  crl_distribution_points: string[];
  delta_crl_distribution_points: string[];
  ocsp_servers: string[];
  enable_aia_url_templating: boolean;
}

/** Mount-level settings by name: "issuers", "keys", "urls", "cluster" (JSON values). */
export const pkiConfig = sqliteTable(
  "pki_config",
  {
    mountId: text("mount_id").notNull(),
    name: text("name").notNull(),
    value: text("value", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
  },
  (t) => [primaryKey({ columns: [t.mountId, t.name] })],
);

export const pkiRoles = sqliteTable(
  "pki_roles",
  {
    mountId: text("mount_id").notNull(),
    name: text("name").notNull(),
    /** The role object exactly as a read returns it (Vault API: /pki/roles/:name). */
    data: text("data", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.mountId, t.name] })],
);

/**
 * Mount and issuer ids by number (migration 0019): pki_certs keeps the small `no` in each row and
 * index entry instead of the 36-character id. A row is added (INSERT OR IGNORE) in the same batch
 * as the first certificate that needs it and never renumbered (`no` is a declared column, not an
 * implicit rowid, so VACUUM keeps it); rows of removed mounts and issuers stay (a few bytes each).
 */
export const pkiIds = sqliteTable(
  "pki_ids",
  {
    no: integer("no").primaryKey(),
    id: text("id").notNull(),
  },
  (t) => [uniqueIndex("pki_ids_id").on(t.id)],
);

/**
 * Certificates issued by (or generated in) the mount, in the slim layout of migration 0019
 * (docs/storage-schema.md "pki_certs": about 250 bytes of D1 per certificate with its indexes).
 * The unique index on (mount, serial) is the last line of defence behind the Authority Durable
 * Object's serial reservation. Mount and issuer are pki_ids numbers; the inventory indexes end
 * at not_after and order ties by `id`, which every SQLite index entry carries.
 */
export const pkiCerts = sqliteTable(
  "pki_certs",
  {
    /** Storage order; ties in not_after are ordered by it (docs/pki-inventory.md). */
    id: integer("id").primaryKey(),
    /** pki_ids.no of the mount. */
    mountNo: integer("mount_no").notNull(),
    /** The serial's octets (./pki-serial.ts); colon hex in TypeScript. */
    serial: serialBlob("serial").notNull(),
    /** base64 DER for rows that keep their body in D1; '' when the body is in R2 (cert-bodies.ts). */
    der: text("der").notNull().default(""),
    /** pki_ids.no of the issuer. */
    issuerNo: integer("issuer_no").notNull(),
    /** Unix seconds. */
    notAfter: integer("not_after").notNull(),
    createdAt: integer("created_at").notNull(),
    /** Sealed cert_metadata (spec "Issue": base64 value tied to the serial); null when none. */
    metadata: text("metadata"),
    // The inventory's columns (docs/pki-inventory.md): written with the row; rows stored before
    // them are filled by the inventory backfill job (not_before IS NULL marks one not yet done).
    /** The subject's common name ("" when none). */
    commonName: text("common_name"),
    /** The SAN values (DNS, email, IP, URI), one per line. */
    sans: text("sans"),
    /** Unix seconds. */
    notBefore: integer("not_before"),
    /** The role that issued it; null for CA certificates, sign-verbatim without a role and older rows. */
    role: text("role"),
    /** pki_revoked.revocation_time, set by the trigger pki_certs_inv_revoked_mark; null while not revoked. */
    revokedAt: integer("revoked_at"),
    /**
     * The CRL shard fixed at issuance (docs/pki-revocation-crl.md "Sharded CRLs"; migration 0018);
     * null when issued with one shard (or before sharding): the certificate names the full CRL.
     */
    crlShard: integer("crl_shard"),
  },
  (t) => [
    uniqueIndex("pki_certs_mount_serial").on(t.mountNo, t.serial),
    index("pki_certs_inv_not_after").on(t.mountNo, t.notAfter),
    index("pki_certs_inv_role").on(t.mountNo, t.role, t.notAfter),
    // Also covers sys/metrics' count by mount, issuer and time to expiry: the count reads this
    // index, never the rows (docs/operations.md "Metrics").
    index("pki_certs_inv_issuer").on(t.mountNo, t.issuerNo, t.notAfter),
    index("pki_certs_inv_revoked").on(t.mountNo, t.notAfter).where(sql`${t.revokedAt} IS NOT NULL`),
    index("pki_certs_inv_pending").on(t.mountNo, t.serial).where(sql`${t.notBefore} IS NULL`),
  ],
);

/**
 * Expiry notifications (docs/pki-notifications.md): one row per (certificate or issuer, threshold,
 * target), written before its message is queued, so each is sent once. `serial` is the
 * certificate's serial, or "issuer:<id>" for an issuer; `target` a hash of the target's format
 * and URL. `state`: "pending" until the target answered 2xx, then "sent". The message's facts
 * (mount path, common name, not_after) are copied here, so a tidied certificate is still told of.
 */
export const pkiNotifySent = sqliteTable(
  "pki_notify_sent",
  {
    mountId: text("mount_id").notNull(),
    serial: text("serial").notNull(),
    threshold: text("threshold").notNull(),
    target: text("target").notNull(),
    kind: text("kind").notNull(),
    mountPath: text("mount_path").notNull(),
    commonName: text("common_name").notNull(),
    notAfter: integer("not_after").notNull(),
    state: text("state").notNull(),
    attempts: integer("attempts").notNull(),
    lastError: text("last_error"),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
    sentAt: integer("sent_at"),
  },
  (t) => [primaryKey({ columns: [t.mountId, t.serial, t.threshold, t.target] }), index("pki_notify_sent_pending").on(t.updatedAt).where(sql`${t.state} = 'pending'`)],
);

/** How far each (mount, threshold) scan has come: the last (not_after, serial) it scheduled. */
export const pkiNotifyMarks = sqliteTable(
  "pki_notify_marks",
  {
    mountId: text("mount_id").notNull(),
    threshold: text("threshold").notNull(),
    notAfter: integer("not_after").notNull(),
    serial: text("serial").notNull(),
  },
  (t) => [primaryKey({ columns: [t.mountId, t.threshold] })],
);

/**
 * Revoked certificates of the mount (the entries of its CRLs, RFC 5280 §5.1.2.6). `id` is a
 * mount-wide, strictly growing sequence: a complete CRL records the highest id it covered
 * (`pki_crls.max_seq`), and a
 * delta CRL lists exactly the entries above it. Revoked issuers get a row here too when their
 * certificate was stored by this mount.
 */
export const pkiRevoked = sqliteTable(
  "pki_revoked",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    mountId: text("mount_id").notNull(),
    /** Colon-separated lowercase hex, as in pki_certs. */
    serial: text("serial").notNull(),
    /** The issuer whose key signed the certificate; "" when none of the mount's issuers did. */
    issuerId: text("issuer_id").notNull(),
    /** Unix seconds. */
    revocationTime: integer("revocation_time").notNull(),
    /** Unix seconds: the certificate's notAfter (tidy removes entries past it plus a buffer). */
    notAfter: integer("not_after").notNull(),
    /** base64 DER of the revoked certificate. */
    der: text("der").notNull(),
    createdAt: integer("created_at").notNull(),
    /** RFC 5280 §5.3.1 CRLReason; 0 (unspecified) writes no reasonCode entry extension (migration 0015). */
    reason: integer("reason").notNull().default(0),
    /** The certificate's CRL shard (pki_certs.crl_shard), null for the full CRL only (migration 0018). */
    crlShard: integer("crl_shard"),
  },
  (t) => [
    uniqueIndex("pki_revoked_mount_serial").on(t.mountId, t.serial),
    index("pki_revoked_mount_issuer").on(t.mountId, t.issuerId),
    index("pki_revoked_mount_shard").on(t.mountId, t.crlShard, t.id),
  ],
);

/**
 * The last CRLs built for each issuer (RFC 5280 §5; delta CRLs §5.2.4): one complete and one
 * delta row per issuer. Written only by the mount's Authority Durable Object, which serializes rebuilds.
 */
export const pkiCrls = sqliteTable(
  "pki_crls",
  {
    mountId: text("mount_id").notNull(),
    issuerId: text("issuer_id").notNull(),
    /**
     * "complete" or "delta" (the full CRL), or "shard:<n>:complete" / "shard:<n>:delta" for CRL
     * shard n (docs/pki-revocation-crl.md "Sharded CRLs"; each has its own number sequence).
     */
    kind: text("kind").notNull(),
    /** The CRL number (RFC 5280 §5.2.3); complete and delta CRLs share the counter. */
    number: integer("number").notNull(),
    /** base64 DER of the signed CRL. */
    der: text("der").notNull(),
    /**
     * The highest pki_revoked.id the CRL covers: a complete CRL lists every revocation up to it;
     * a delta lists those above its complete CRL's max_seq, up to its own (src/engines/pki/revocation/crl-rebuild.ts).
     */
    maxSeq: integer("max_seq").notNull(),
    /** Unix milliseconds. */
    thisUpdate: integer("this_update").notNull(),
    nextUpdate: integer("next_update").notNull(),
  },
  (t) => [primaryKey({ columns: [t.mountId, t.issuerId, t.kind] })],
);

/**
 * The DER of a CRL too large for one D1 value (D1 caps a string at 2 MB; a 100,000-entry CRL is
 * about 4 MB of DER): base64 slices in order. A pki_crls row whose `der` is "" is stored here.
 * Rows are replaced together with their pki_crls row in one D1 batch (one transaction), and
 * read with it in one batch, so a reader never mixes slices of two builds.
 */
export const pkiCrlChunks = sqliteTable(
  "pki_crl_chunks",
  {
    mountId: text("mount_id").notNull(),
    issuerId: text("issuer_id").notNull(),
    kind: text("kind").notNull(),
    idx: integer("idx").notNull(),
    data: text("data").notNull(),
  },
  (t) => [primaryKey({ columns: [t.mountId, t.issuerId, t.kind, t.idx] })],
);
