/**
 * The PKI engine's request fields that more than one endpoint takes, and the helpers the field
 * tables are written with (the declaration system is src/core/fields.ts). An endpoint's own
 * fields stay with it; a field declared here means the same on every path that spreads it in,
 * so its type, default and description cannot drift apart between paths.
 */
import { MAX_URL_BYTES } from "../../core/limits";

/**
 * A comma-separated list (or JSON list) of strings; absent means `def`. The default is copied,
 * so no field table shares an array with another table or with ../defaults.ts.
 */
export const css = (description: string, def: readonly string[] = []) => ({ type: "comma-string-slice" as const, description, default: [...def] });

/** A list without a default: absent stays undefined, so an update can leave the stored value alone. */
export const cssUnset = (description: string) => ({ type: "comma-string-slice" as const, description });

export const flag = (description: string, def: boolean) => ({ type: "bool" as const, description, default: def });

/** `:ref` of the per-issuer paths. */
export const issuerRefField = {
  ref: { type: "string", description: "Issuer id, name or 'default'.", required: true },
} as const;

/** The names a certificate asks for (issue, sign, CA generation, sign-intermediate). */
export const nameFields = {
  common_name: { type: "string", description: "Subject CN.", default: "" },
  alt_names: css("Comma-separated DNS names and e-mail addresses."),
  ip_sans: css("IP SANs."),
  uri_sans: css("URI SANs."),
  other_sans: css("Other SANs, <oid>;UTF8:<value>."),
  exclude_cn_from_sans: { type: "bool", description: "Leave the CN out of the SANs.", default: false },
  serial_number: { type: "string", description: "Subject serialNumber attribute.", default: "" },
} as const;

/** Subject attributes beyond the CN (roles, CA generation). */
export const subjectAttributeFields = {
  ou: css("Subject OU."),
  organization: css("Subject O."),
  country: css("Subject C."),
  locality: css("Subject L."),
  province: css("Subject ST."),
  street_address: css("Subject street address."),
  postal_code: css("Subject postal code."),
} as const;

/** A key to generate (keys/generate, CA generation, external-policy issue). */
export const keyGenFields = {
  key_type: { type: "string", description: "rsa, ec or ed25519.", default: "rsa" },
  key_bits: { type: "int", description: "Key size (0: the type's default, rsa 2048, ec 256).", default: 0 },
} as const;

/** How an RSA signer hashes and pads (CA generation, sign-intermediate, sign-verbatim). */
export const signatureFields = {
  signature_bits: { type: "int", description: "RSA: hash size 256, 384 or 512 (0: automatic).", default: 0 },
  use_pss: { type: "bool", description: "RSA: RSA-PSS signatures.", default: false },
} as const;

/** Extended key usages by name and by OID (roles, CA generation). */
export const extKeyUsageFields = {
  ext_key_usage: css("Extended key usage names."),
  ext_key_usage_oids: css("Extended key usage OIDs."),
} as const;

export const formatField = {
  format: { type: "string", description: "pem, der or pem_bundle.", default: "pem" },
} as const;

export const privateKeyFormatField = {
  private_key_format: { type: "string", description: "der or pkcs8.", default: "der" },
} as const;

export const removeRootsField = {
  remove_roots_from_chain: { type: "bool", description: "Drop self-signed CAs from ca_chain.", default: false },
} as const;

export const notAfterField = {
  not_after: { type: "string", description: "Absolute notAfter, YYYY-MM-DDTHH:MM:SSZ.", default: "" },
} as const;

/** A PEM CSR that may be left out (the handler says what is missing). */
export const csrField = {
  csr: { type: "string", description: "PEM certificate request.", default: "" },
} as const;

/** The AIA URL lists of config/urls and issuer/:ref; without defaults, so an update sees what was sent. */
export const aiaUrlFields = {
  issuing_certificates: { ...cssUnset("AIA caIssuers URLs."), maxBytes: MAX_URL_BYTES },
  crl_distribution_points: { ...cssUnset("CRL distribution point URLs."), maxBytes: MAX_URL_BYTES },
  delta_crl_distribution_points: { ...cssUnset("Delta CRL distribution point URLs."), maxBytes: MAX_URL_BYTES },
  ocsp_servers: { ...cssUnset("OCSP responder URLs."), maxBytes: MAX_URL_BYTES },
} as const;
