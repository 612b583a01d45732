/**
 * Roles (Vault API /pki/roles/:name): the field declarations with their defaults, and the pure
 * validation that turns request fields into the stored role object (the same object a read
 * returns). Whether `issuer_ref` resolves is checked by the route (it needs storage).
 */
import { badRequest } from "../../../core/errors";
import { defineFields, type FieldValues } from "../../../core/fields";
import { ROLE_DEFAULTS, type PolicyInfo, type Role } from "../defaults";
import { css, extKeyUsageFields, flag, subjectAttributeFields } from "../fields";
import { isValidOid } from "../x509/der";
import { validateKeySpec } from "../x509/keytypes";
import { capRoleLists } from "./name-limits";
import { formatCidr, networkOf, parseCidr } from "../../../core/ip";
import { parseOtherSan } from "./names";

const D = ROLE_DEFAULTS;

/** The role fields; their defaults are ROLE_DEFAULTS (../defaults.ts) except where noted. */
export const roleFields = defineFields({
  name: { type: "string", description: "Name of the role.", required: true },
  issuer_ref: { type: "string", description: "Issuer used by this role: id, name or 'default'.", default: D.issuer_ref },
  ttl: { type: "duration", description: "Default TTL of issued certificates (0: mount default).", default: D.ttl },
  max_ttl: { type: "duration", description: "Maximum TTL (0: mount maximum).", default: D.max_ttl },
  allow_localhost: flag("Allow localhost/localdomain names.", D.allow_localhost),
  allowed_domains: css("Domains the role may issue for.", D.allowed_domains),
  allowed_domains_template: flag("Identity templating in allowed_domains (not supported: names are literal; true warns).", D.allowed_domains_template),
  allow_globs_in_identity_templates: flag("Allow * in template substitutions (not supported; true warns).", D.allow_globs_in_identity_templates),
  allow_bare_domains: flag("Allow the allowed domains themselves.", D.allow_bare_domains),
  allow_subdomains: flag("Allow subdomains of the allowed domains, any depth.", D.allow_subdomains),
  allow_glob_domains: flag("Treat allowed domains containing * as globs.", D.allow_glob_domains),
  allow_wildcard_certificates: flag("Allow wildcard names.", D.allow_wildcard_certificates),
  allow_any_name: flag("Skip domain matching.", D.allow_any_name),
  enforce_hostnames: flag("Names must be valid hostnames.", D.enforce_hostnames),
  allow_ip_sans: flag("Allow IP SANs.", D.allow_ip_sans),
  allowed_ip_sans_cidr: css("CIDRs IP SANs must fall in (empty: no restriction).", D.allowed_ip_sans_cidr),
  allowed_uri_sans: css("Allowed URI SANs (globs).", D.allowed_uri_sans),
  allowed_uri_sans_template: flag("Identity templating in allowed_uri_sans (not supported: patterns are literal; true warns).", D.allowed_uri_sans_template),
  allowed_other_sans: css("Allowed other SANs, <oid>;UTF8:<value glob>, or *.", D.allowed_other_sans),
  allowed_serial_numbers: css("Allowed subject serial numbers (globs).", D.allowed_serial_numbers),
  allowed_user_ids: css("Allowed user ids (globs).", D.allowed_user_ids),
  server_flag: flag("ServerAuth EKU.", D.server_flag),
  client_flag: flag("ClientAuth EKU.", D.client_flag),
  code_signing_flag: flag("CodeSigning EKU.", D.code_signing_flag),
  email_protection_flag: flag("EmailProtection EKU.", D.email_protection_flag),
  key_type: { type: "string", description: "rsa, ec, ed25519 or any.", default: D.key_type },
  // 0 is "the key type's default": buildRole stores the resolved size (ROLE_DEFAULTS.key_bits).
  key_bits: { type: "int", description: "Key size (0: type default).", default: 0 },
  // As key_bits: 0 resolves to the key type's hash size.
  signature_bits: { type: "int", description: "Hash size for RSA signatures (0: 256).", default: 0 },
  use_pss: flag("RSA-PSS signatures.", D.use_pss),
  key_usage: css("Key usages.", D.key_usage),
  ...extKeyUsageFields,
  use_csr_common_name: flag("Sign: take the CN from the CSR.", D.use_csr_common_name),
  use_csr_sans: flag("Sign: take the SANs from the CSR.", D.use_csr_sans),
  ...subjectAttributeFields,
  generate_lease: flag("Attach a lease to issued certificates.", D.generate_lease),
  no_store: flag("Do not store issued certificates.", D.no_store),
  no_store_metadata: flag("Do not store certificate metadata.", D.no_store_metadata),
  require_cn: flag("Require a common name.", D.require_cn),
  cn_validations: css("email, hostname, or disabled.", D.cn_validations),
  policy_identifiers: { type: "any", description: "Certificate policy OIDs, or a JSON list of {oid, notice, cps}.", default: [] },
  basic_constraints_valid_for_non_ca: flag("Add CA:false basic constraints.", D.basic_constraints_valid_for_non_ca),
  not_before_duration: { type: "duration", description: "Backdating of notBefore.", default: D.not_before_duration },
  not_before: { type: "string", description: "Fixed notBefore (RFC 3339).", default: D.not_before },
  not_before_bound: { type: "string", description: "permit, duration or forbid.", default: D.not_before_bound },
  not_after: { type: "string", description: "Fixed notAfter (RFC 3339).", default: D.not_after },
  not_after_bound: { type: "string", description: "permit, ttl-limited, forbid or an RFC 3339 time.", default: D.not_after_bound },
});

export type RoleFieldValues = FieldValues<typeof roleFields>;

// The stored shape is declared with its defaults (../defaults.ts); policy and issuance take it from here.
export type { PolicyInfo, Role };

/** Parses policy_identifiers: a list of OIDs, or a JSON string (or list) of {oid, notice, cps}. */
export function parsePolicyIdentifiers(raw: unknown): (string | PolicyInfo)[] {
  let v = raw;
  if (typeof v === "string") {
    const t = v.trim();
    if (t === "") return [];
    if (t.startsWith("[") || t.startsWith("{")) {
      try {
        v = JSON.parse(t);
      } catch {
        throw badRequest("policy_identifiers: invalid JSON");
      }
    } else {
      v = t.split(",").map((s) => s.trim()).filter((s) => s !== "");
    }
  }
  const list = Array.isArray(v) ? v : [v];
  return list.map((item) => {
    if (typeof item === "string") {
      if (!isValidOid(item)) throw badRequest(`policy_identifiers: "${item}" is not a valid OID`);
      return item;
    }
    if (typeof item === "object" && item !== null && typeof (item as { oid?: unknown }).oid === "string") {
      const o = item as { oid: string; notice?: unknown; cps?: unknown };
      if (!isValidOid(o.oid)) throw badRequest(`policy_identifiers: "${o.oid}" is not a valid OID`);
      const out: PolicyInfo = { oid: o.oid };
      if (typeof o.notice === "string" && o.notice !== "") out.notice = o.notice;
      if (typeof o.cps === "string" && o.cps !== "") out.cps = o.cps;
      return out;
    }
    throw badRequest("policy_identifiers: entries must be OIDs or objects with an oid");
  });
}

function validateCnValidations(list: string[]): string[] {
  const out: string[] = [];
  for (const raw of list) {
    const v = raw.trim().toLowerCase();
    if (!["email", "hostname", "disabled"].includes(v)) throw badRequest(`cn_validations value incorrect: unknown type: \`${v}\``);
    if (out.includes(v)) throw badRequest(`cn_validations value incorrect: \`${v}\` specified multiple times`);
    out.push(v);
  }
  if (out.includes("disabled") && out.length > 1) {
    throw badRequest("cn_validations value incorrect: cannot specify `disabled` along with `email` or `hostname`");
  }
  return out.length === 0 ? ["email", "hostname"] : out;
}

/**
 * The identity-templating flags (Vault's API docs, /pki/roles/:name): Lanyard has no identity
 * entities, so `{{identity.…}}` in allowed_domains or allowed_uri_sans is never filled in and
 * matches only itself (never a valid DNS name). Terraform's provider always sends the flags, so
 * false passes silently and true is answered with a warning naming the flag.
 */
function identityTemplateWarnings(f: Pick<RoleFieldValues, "allowed_domains_template" | "allowed_uri_sans_template" | "allow_globs_in_identity_templates">): string[] {
  const why = "Lanyard has no identity entities, so templates are not filled in and match only their literal text";
  const out: string[] = [];
  if (f.allowed_domains_template) out.push(`allowed_domains_template: ${why}`);
  if (f.allowed_uri_sans_template) out.push(`allowed_uri_sans_template: ${why}`);
  if (f.allow_globs_in_identity_templates) out.push(`allow_globs_in_identity_templates: ${why}`);
  return out;
}

function validateBound(field: string, v: string, allowed: string[], allowTimestamp: boolean): void {
  if (allowed.includes(v)) return;
  if (allowTimestamp && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(v) && !Number.isNaN(Date.parse(v))) return;
  throw badRequest(`Unknown value for field \`${field}\`. Possible values are ${allowed.map((a) => `\`${a}\``).join(" ")}${allowTimestamp ? " or an RFC 3339 timestamp" : ""}`);
}

/** What validation makes of the fields that are not stored as given. */
interface ValidatedRoleFields {
  cidrs: string[];
  generateLease: boolean;
  spec: ReturnType<typeof validateKeySpec>;
  policies: ReturnType<typeof parsePolicyIdentifiers>;
  cnValidations: string[];
  warnings: string[];
}

/**
 * Validates role fields in upstream's order (OpenBao builtin/logical/pki/path_roles.go): other
 * SANs and CIDRs, no_store vs generate_lease, the not_before/not_after bounds, ttl ≤ max_ttl, key
 * type and sizes, extended key usage OIDs, policy identifiers, cn_validations.
 */
function validateRoleFields(f: Omit<RoleFieldValues, "name">): ValidatedRoleFields {
  const warnings: string[] = [];
  // Size limits first, so no entry is parsed or stored unbounded (name-limits.ts).
  capRoleLists(f);
  for (const entry of f.allowed_other_sans) {
    if (entry === "*") continue;
    try {
      parseOtherSan(entry);
    } catch (e) {
      throw badRequest(`error parsing allowed_other_sans: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  const cidrs = f.allowed_ip_sans_cidr.map((c) => {
    const parsed = parseCidr(c);
    if (!parsed) throw badRequest(`error parsing allowed_ip_sans_cidr: invalid CIDR address: ${c}`);
    return formatCidr(networkOf(parsed));
  });
  let generateLease = f.generate_lease;
  if (f.no_store && generateLease) {
    generateLease = false;
    warnings.push("mutually exclusive values no_store=true and generate_lease=true were both specified; no_store=true takes priority");
  } else if (generateLease) {
    warnings.push(
      "it is encouraged to disable generate_lease and rely on PKI's native capabilities when possible; this option can cause Vault-wide issues with large numbers of issued certificates",
    );
  }
  validateBound("not_after_bound", f.not_after_bound, ["permit", "ttl-limited", "forbid"], true);
  validateBound("not_before_bound", f.not_before_bound, ["permit", "duration", "forbid"], false);
  if (f.not_after !== "" && Number.isNaN(Date.parse(f.not_after))) throw badRequest(`not_after: "${f.not_after}" is not an RFC 3339 time`);
  if (f.not_before !== "" && Number.isNaN(Date.parse(f.not_before))) throw badRequest(`not_before: "${f.not_before}" is not an RFC 3339 time`);
  if (f.ttl > 0 && f.max_ttl > 0 && f.ttl > f.max_ttl) throw badRequest('"ttl" value must be less than "max_ttl" value');
  const spec = validateKeySpec(f.key_type, f.key_bits, f.signature_bits);
  for (const o of f.ext_key_usage_oids) {
    if (!isValidOid(o)) throw badRequest(`"${o}" could not be parsed as a valid oid for an extended key usage`);
  }
  const policies = parsePolicyIdentifiers(f.policy_identifiers);
  const cnValidations = validateCnValidations(f.cn_validations);
  warnings.push(...identityTemplateWarnings(f));
  return { cidrs, generateLease, spec, policies, cnValidations, warnings };
}

/**
 * Builds a role from fully-resolved field values (defaults already applied, or merged from the
 * stored role for PATCH), validating in upstream's order. Returns the role and warnings.
 */
export function buildRole(f: Omit<RoleFieldValues, "name">): { role: Role; warnings: string[] } {
  const { cidrs, generateLease, spec, policies, cnValidations, warnings } = validateRoleFields(f);
  const role: Role = {
    allow_any_name: f.allow_any_name,
    allow_bare_domains: f.allow_bare_domains,
    allow_glob_domains: f.allow_glob_domains,
    allow_globs_in_identity_templates: f.allow_globs_in_identity_templates,
    allow_ip_sans: f.allow_ip_sans,
    allow_localhost: f.allow_localhost,
    allow_subdomains: f.allow_subdomains,
    allow_token_displayname: false,
    allow_wildcard_certificates: f.allow_wildcard_certificates,
    allowed_domains: f.allowed_domains,
    allowed_domains_template: f.allowed_domains_template,
    allowed_ip_sans_cidr: cidrs,
    allowed_other_sans: f.allowed_other_sans,
    allowed_serial_numbers: f.allowed_serial_numbers,
    allowed_uri_sans: f.allowed_uri_sans,
    allowed_uri_sans_template: f.allowed_uri_sans_template,
    allowed_user_ids: f.allowed_user_ids,
    basic_constraints_valid_for_non_ca: f.basic_constraints_valid_for_non_ca,
    client_flag: f.client_flag,
    cn_validations: cnValidations,
    code_signing_flag: f.code_signing_flag,
    country: f.country,
    email_protection_flag: f.email_protection_flag,
    enforce_hostnames: f.enforce_hostnames,
    ext_key_usage: f.ext_key_usage,
    ext_key_usage_oids: f.ext_key_usage_oids,
    generate_lease: generateLease,
    issuer_ref: f.issuer_ref.trim() === "" ? "default" : f.issuer_ref,
    key_bits: spec.keyBits,
    key_type: spec.keyType,
    key_usage: f.key_usage,
    locality: f.locality,
    max_ttl: f.max_ttl,
    no_store: f.no_store,
    no_store_metadata: f.no_store_metadata,
    not_after: f.not_after,
    not_after_bound: f.not_after_bound,
    not_before: f.not_before,
    not_before_bound: f.not_before_bound,
    not_before_duration: f.not_before_duration,
    organization: f.organization,
    ou: f.ou,
    policy_identifiers: policies,
    postal_code: f.postal_code,
    province: f.province,
    require_cn: f.require_cn,
    server_flag: f.server_flag,
    signature_bits: spec.signatureBits,
    street_address: f.street_address,
    ttl: f.ttl,
    use_csr_common_name: f.use_csr_common_name,
    use_csr_sans: f.use_csr_sans,
    use_pss: f.use_pss,
  };
  return { role, warnings };
}

/** Turns a stored role back into field values, so PATCH can overlay the request on it. */
export function roleToFields(role: Role): Omit<RoleFieldValues, "name"> {
  return { ...role };
}

/** The role every field of which has its default (the base of synthetic CA-generation roles). */
export function defaultRole(): Role {
  return structuredClone(ROLE_DEFAULTS);
}
