/**
 * The one place for the PKI engine's stored shapes and their defaults: roles, issuers and the
 * mount configuration entries. Storage fills rows written before a field existed from here
 * (storage/decode.ts) and the domain modules build new objects from here, so this module imports
 * nothing of the engine: both sides may depend on it without depending on each other.
 */
import type { IssuerAia } from "./storage/rows";

// -- roles (Vault API /pki/roles/:name) ---------------------------------------------------------

export interface PolicyInfo {
  oid: string;
  notice?: string;
  cps?: string;
}

/** The stored role: exactly the read shape of GET roles/:name. */
export interface Role {
  allow_any_name: boolean;
  allow_bare_domains: boolean;
  allow_glob_domains: boolean;
  allow_globs_in_identity_templates: boolean;
  allow_ip_sans: boolean;
  allow_localhost: boolean;
  allow_subdomains: boolean;
  allow_token_displayname: boolean;
  allow_wildcard_certificates: boolean;
  allowed_domains: string[];
  allowed_domains_template: boolean;
  allowed_ip_sans_cidr: string[];
  allowed_other_sans: string[];
  allowed_serial_numbers: string[];
  allowed_uri_sans: string[];
  allowed_uri_sans_template: boolean;
  allowed_user_ids: string[];
  basic_constraints_valid_for_non_ca: boolean;
  client_flag: boolean;
  cn_validations: string[];
  code_signing_flag: boolean;
  country: string[];
  email_protection_flag: boolean;
  enforce_hostnames: boolean;
  ext_key_usage: string[];
  ext_key_usage_oids: string[];
  generate_lease: boolean;
  issuer_ref: string;
  key_bits: number;
  key_type: string;
  key_usage: string[];
  locality: string[];
  max_ttl: number;
  no_store: boolean;
  no_store_metadata: boolean;
  not_after: string;
  not_after_bound: string;
  not_before: string;
  not_before_bound: string;
  not_before_duration: number;
  organization: string[];
  ou: string[];
  policy_identifiers: (string | PolicyInfo)[];
  postal_code: string[];
  province: string[];
  require_cn: boolean;
  server_flag: boolean;
  signature_bits: number;
  street_address: string[];
  ttl: number;
  use_csr_common_name: boolean;
  use_csr_sans: boolean;
  use_pss: boolean;
}

export const DEFAULT_KEY_USAGE: readonly string[] = ["DigitalSignature", "KeyAgreement", "KeyEncipherment"];

/**
 * The role every field of which has its default, as buildRole stores it (policy/roles.ts: the
 * request fields take their defaults from here; test/unit/pki-defaults.test.ts checks that
 * building a role from those fields gives exactly this). key_bits and signature_bits are the
 * resolved values of the request's 0 ("the key type's default") for key_type rsa.
 */
export const ROLE_DEFAULTS: Readonly<Role> = {
  allow_any_name: false,
  allow_bare_domains: false,
  allow_glob_domains: false,
  allow_globs_in_identity_templates: false,
  allow_ip_sans: true,
  allow_localhost: true,
  allow_subdomains: false,
  allow_token_displayname: false,
  allow_wildcard_certificates: true,
  allowed_domains: [],
  allowed_domains_template: false,
  allowed_ip_sans_cidr: [],
  allowed_other_sans: [],
  allowed_serial_numbers: [],
  allowed_uri_sans: [],
  allowed_uri_sans_template: false,
  allowed_user_ids: [],
  basic_constraints_valid_for_non_ca: false,
  client_flag: true,
  cn_validations: ["email", "hostname"],
  code_signing_flag: false,
  country: [],
  email_protection_flag: false,
  enforce_hostnames: true,
  ext_key_usage: [],
  ext_key_usage_oids: [],
  generate_lease: false,
  issuer_ref: "default",
  key_bits: 2048,
  key_type: "rsa",
  key_usage: [...DEFAULT_KEY_USAGE],
  locality: [],
  max_ttl: 0,
  no_store: false,
  no_store_metadata: false,
  not_after: "",
  not_after_bound: "permit",
  not_before: "",
  not_before_bound: "permit",
  not_before_duration: 30,
  organization: [],
  ou: [],
  policy_identifiers: [],
  postal_code: [],
  province: [],
  require_cn: true,
  server_flag: true,
  signature_bits: 256,
  street_address: [],
  ttl: 0,
  use_csr_common_name: true,
  use_csr_sans: true,
  use_pss: false,
};

// -- issuers (Vault API /pki/issuer/:issuer_ref) -----------------------------------------------

/** Every usage an issuer can have; a new issuer gets all that its certificate's key usage allows. */
export const ALL_USAGES: readonly string[] = ["crl-signing", "issuing-certificates", "ocsp-signing"];

/**
 * The issuer columns that have a default: what an imported issuer starts with (ca/issuers.ts),
 * and what a row lacking the column reads as (storage/decode.ts). The others (id, certificate,
 * names, key link, times) come from the certificate and have none.
 */
export const ISSUER_DEFAULTS = {
  manualChain: null,
  leafNotAfterBehavior: "err",
  usage: ALL_USAGES,
  revocationSignatureAlgorithm: "",
  aia: null,
  revoked: false,
  revocationTime: null,
} as const;

/** The per-issuer AIA entry once an issuer has one (issuer/:ref writes). */
export const ISSUER_AIA_DEFAULTS: Readonly<IssuerAia> = {
  issuing_certificates: [],
  crl_distribution_points: [],
  delta_crl_distribution_points: [],
  ocsp_servers: [],
  enable_aia_url_templating: false,
};

// -- mount configuration ----------------------------------------------------------------------

export interface IssuersConfig {
  default: string;
  default_follows_latest_issuer: boolean;
}

export interface KeysConfig {
  default: string;
}

export interface UrlsConfig {
  issuing_certificates: string[];
  crl_distribution_points: string[];
  delta_crl_distribution_points: string[];
  ocsp_servers: string[];
  enable_templating: boolean;
}

export interface ClusterConfig {
  path: string;
  aia_path: string;
}

/** config/crl (Vault API /pki/config/crl). Durations are kept as the strings the user wrote. */
export interface CrlConfig {
  expiry: string;
  disable: boolean;
  ocsp_disable: boolean;
  ocsp_expiry: string;
  auto_rebuild: boolean;
  auto_rebuild_grace_period: string;
  enable_delta: boolean;
  delta_rebuild_interval: string;
  allow_expired_cert_revocation: boolean;
  max_crl_entries: number;
  /**
   * CRL shards new certificates are spread over (docs/pki-revocation-crl.md "Sharded CRLs"); 1 =
   * one full CRL, as upstream. A Lanyard extension.
   */
  shard_count: number;
  /** The highest shard_count ever set: shards 0 … published_shards−1 stay published (read only). */
  published_shards: number;
}

/** Vault's cluster-wide revocation switches: accepted and echoed; Lanyard is a single cluster. */
export interface CrlClusterFlags {
  cross_cluster_revocation: boolean;
  unified_crl: boolean;
  unified_crl_on_existing_paths: boolean;
}

export const CRL_CLUSTER_DEFAULTS: Readonly<CrlClusterFlags> = { cross_cluster_revocation: false, unified_crl: false, unified_crl_on_existing_paths: false };

/** What one tidy run does and with which buffers; durations in seconds, the pause in ms (tidy/tidy.ts). */
export interface TidyParams {
  tidy_cert_store: boolean;
  tidy_revoked_certs: boolean;
  tidy_invalid_certs: boolean;
  tidy_revoked_cert_issuer_associations: boolean;
  tidy_expired_issuers: boolean;
  tidy_move_legacy_ca_bundle: boolean;
  tidy_acme: boolean;
  safety_buffer: number;
  revoked_safety_buffer: number;
  issuer_safety_buffer: number;
  acme_account_safety_buffer: number;
  pause_ms: number;
  page_size: number;
}

/**
 * config/auto-tidy (Vault API /pki/config/auto-tidy). Durations in seconds except `pause_ms`;
 * `revoked_safety_buffer` null follows `safety_buffer`, as upstream's unset pointer does.
 */
export interface AutoTidyConfig extends Omit<TidyParams, "revoked_safety_buffer"> {
  enabled: boolean;
  interval_duration: number;
  revoked_safety_buffer: number | null;
  maintain_stored_certificate_counts: boolean;
  publish_stored_certificate_count_metrics: boolean;
}

export const AUTO_TIDY_DEFAULTS: AutoTidyConfig = {
  enabled: false,
  interval_duration: 43200,
  tidy_cert_store: false,
  tidy_revoked_certs: false,
  tidy_invalid_certs: false,
  tidy_revoked_cert_issuer_associations: false,
  tidy_expired_issuers: false,
  tidy_move_legacy_ca_bundle: false,
  tidy_acme: false,
  safety_buffer: 259200,
  revoked_safety_buffer: null,
  issuer_safety_buffer: 31536000,
  acme_account_safety_buffer: 2592000,
  pause_ms: 0,
  page_size: 1000,
  maintain_stored_certificate_counts: false,
  publish_stored_certificate_count_metrics: false,
};

/** config/external-policy (docs/pki-external-policy.md; external-policy/config.ts). */
export interface ExternalPolicyConfig {
  enabled: boolean;
  external_service_url: string;
  /** Seconds. */
  timeout: number;
  trusted_ca: string;
  trusted_leaf_certificate_bundle: string;
  /** The client certificate bundle (key and certificates), sealed under SEAL_KEY; "" when unset. */
  sealed_client_cert_bundle: string;
  /** The same bundle's certificates only: what a read shows (upstream's `vault_client_cert_bundle_no_keys`). */
  client_cert_bundle_no_keys: string;
  entity_jmespath: string;
  group_jmespath: string;
  /** RFC 3339 time of the last configuration write; "" before the first one. */
  external_service_last_updated: string;
}

/**
 * Kept apart from the configuration so that an issuance recording its success never overwrites
 * a concurrent configuration write (D1 has no read-modify-write transactions).
 */
export interface ExternalPolicyStatus {
  /** The `external_service_last_updated` stamp of the configuration the service last answered for. */
  validated_for: string;
  /** RFC 3339 time of the last well-formed answer from the service. */
  last_successful_request: string;
}

export const EXTERNAL_POLICY_DEFAULTS: ExternalPolicyConfig = {
  enabled: false,
  external_service_url: "",
  timeout: 15,
  trusted_ca: "",
  trusted_leaf_certificate_bundle: "",
  sealed_client_cert_bundle: "",
  client_cert_bundle_no_keys: "",
  entity_jmespath: "",
  group_jmespath: "",
  external_service_last_updated: "",
};

export const EXTERNAL_POLICY_STATUS_DEFAULTS: ExternalPolicyStatus = { validated_for: "", last_successful_request: "" };

/** The configuration entries of a mount (pki_config rows by name). */
export interface ConfigShapes {
  issuers: IssuersConfig;
  keys: KeysConfig;
  urls: UrlsConfig;
  cluster: ClusterConfig;
  crl: CrlConfig;
  /** config/auto-tidy (src/engines/pki/tidy/tidy.ts, docs/pki-tidy.md). */
  auto_tidy: AutoTidyConfig;
  /** config/external-policy (src/engines/pki/external-policy/config.ts, docs/pki-external-policy.md). */
  external_policy: ExternalPolicyConfig;
  /** The policy service's last good answer (kept apart so issuance never overwrites a config write). */
  external_policy_status: ExternalPolicyStatus;
}

export const CONFIG_DEFAULTS: ConfigShapes = {
  issuers: { default: "", default_follows_latest_issuer: false },
  keys: { default: "" },
  urls: { issuing_certificates: [], crl_distribution_points: [], delta_crl_distribution_points: [], ocsp_servers: [], enable_templating: false },
  cluster: { path: "", aia_path: "" },
  crl: {
    expiry: "72h",
    disable: false,
    ocsp_disable: false,
    ocsp_expiry: "12h",
    auto_rebuild: false,
    auto_rebuild_grace_period: "12h",
    enable_delta: false,
    delta_rebuild_interval: "15m",
    allow_expired_cert_revocation: false,
    max_crl_entries: 100000,
    shard_count: 1,
    published_shards: 1,
  },
  auto_tidy: AUTO_TIDY_DEFAULTS,
  external_policy: EXTERNAL_POLICY_DEFAULTS,
  external_policy_status: EXTERNAL_POLICY_STATUS_DEFAULTS,
};
