/**
 * Applies a role to a request (in the order of OpenBao builtin/logical/pki/cert_util.go) and yields the subject
 * and SANs of the certificate to build. Pure: the CSR has already been parsed.
 */
import { badRequest } from "../../../core/errors";
import { OID, nameAttributes, type SanSpec, type SubjectSpec } from "../x509/asn1";
import { cidrContains, formatIp, parseCidr, parseIp } from "../../../core/ip";
import { checkCommonName, checkOtherSans, classifyNames, matchesAny, nameAllowed, parseOtherSan, type NamePolicy, type ParsedOtherSan } from "./names";
import { capCsrNames, capNameRequest } from "./name-limits";
import type { Role } from "./roles";
import type { CsrInfo } from "../x509/x509";

export interface NameRequest {
  common_name: string;
  alt_names: string[];
  ip_sans: string[];
  uri_sans: string[];
  other_sans: string[];
  serial_number: string;
  user_ids: string[];
  exclude_cn_from_sans: boolean;
}

/** A NameRequest from a request's name fields (engines/pki/fields.ts nameFields) and its user ids. */
export function nameRequestFrom(f: Omit<NameRequest, "user_ids">, userIds: string[]): NameRequest {
  return {
    common_name: f.common_name,
    alt_names: f.alt_names,
    ip_sans: f.ip_sans,
    uri_sans: f.uri_sans,
    other_sans: f.other_sans,
    serial_number: f.serial_number,
    user_ids: userIds,
    exclude_cn_from_sans: f.exclude_cn_from_sans,
  };
}

export interface CertSubject {
  subject: SubjectSpec;
  sans: SanSpec;
}

/** A role that allows everything: CA generation and similar paths (upstream's synthetic role). */
/**
 * A URI SAN is an IA5String (RFC 5280 §4.2.1.6): ASCII only. Non-ASCII characters are
 * percent-encoded as UTF-8 (RFC 3987 §3.1), as upstream's url.String() does, after the role's
 * globs have matched the value as the user wrote it.
 */
export function asciiUri(u: string): string {
  return u.replace(/[^\x21-\x7e]/gu, (ch) => encodeURIComponent(ch));
}

export function permissiveRole(base: Role): Role {
  return {
    ...base,
    allow_any_name: true,
    allow_localhost: true,
    allow_ip_sans: true,
    allowed_ip_sans_cidr: [],
    allowed_uri_sans: ["*"],
    allowed_other_sans: ["*"],
    allowed_serial_numbers: ["*"],
    allowed_user_ids: ["*"],
    allow_wildcard_certificates: true,
    enforce_hostnames: false,
    cn_validations: ["disabled"],
    require_cn: false,
    use_csr_common_name: false,
    use_csr_sans: false,
  };
}

function csrSubjectFields(csr: CsrInfo | null): { cn: string; serial: string; uids: string[] } {
  if (!csr) return { cn: "", serial: "", uids: [] };
  let attrs: { type: string; value: string }[];
  try {
    attrs = nameAttributes(csr.subject);
  } catch {
    throw badRequest("csr: the certificate request's subject could not be read");
  }
  return {
    cn: attrs.find((a) => a.type === OID.commonName)?.value ?? "",
    serial: attrs.find((a) => a.type === OID.serialNumber)?.value ?? "",
    uids: attrs.filter((a) => a.type === OID.userId).map((a) => a.value),
  };
}

/** The distinct values, in first-seen order (module-level: no closure per request). */
function uniq(xs: string[]): string[] {
  return xs.length < 2 ? xs.slice() : [...new Set(xs)];
}

export function applyRole(role: Role, req: NameRequest, csr: CsrInfo | null): CertSubject {
  const policy: NamePolicy = role;
  const fromCsr = csrSubjectFields(csr);
  const useCsrSans = csr !== null && role.use_csr_sans;

  // 0. Size limits, before any name is parsed or matched (name-limits.ts): the CSR's
  // names only where this request would use them.
  capNameRequest(req);
  if (csr !== null) {
    capCsrNames(
      role.use_csr_common_name ? fromCsr.cn : "",
      req.serial_number === "" ? fromCsr.serial : "",
      req.user_ids.length === 0 ? fromCsr.uids : [],
      useCsrSans ? csr.sans : null,
    );
  }

  // 1. CN source.
  const cn = csr !== null && role.use_csr_common_name ? fromCsr.cn : req.common_name;
  if (cn === "" && role.require_cn) {
    throw badRequest(
      'the common_name field is required, or must be provided in a CSR with "use_csr_common_name" set to true, unless "require_cn" is set to false',
    );
  }

  // 2–3. CN and alt names → DNS / e-mail SANs.
  const names = { dns: [] as string[], email: [] as string[] };
  if (cn !== "" && !req.exclude_cn_from_sans) classifyNames([cn], names);
  if (useCsrSans) {
    classifyNames([...(csr?.sans?.dns ?? []), ...(csr?.sans?.email ?? [])], names);
  } else {
    classifyNames(req.alt_names, names);
  }

  // 4. CN validations.
  checkCommonName(policy, role.cn_validations, cn);

  // 5. Subject serial number.
  const serial = req.serial_number !== "" ? req.serial_number : fromCsr.serial;
  if (serial !== "" && !matchesAny(role.allowed_serial_numbers, serial)) throw badRequest(`serial_number ${serial} not allowed by this role`);

  // 6–7. Each DNS then e-mail SAN.
  for (const d of names.dns) if (!nameAllowed(policy, d)) throw badRequest(`subject alternate name ${d} not allowed by this role`);
  for (const e of names.email) if (!nameAllowed(policy, e)) throw badRequest(`email address ${e} not allowed by this role`);

  // 8. Other SANs.
  const otherSans = otherSansOf(role, req, useCsrSans ? csr : null);
  // 9. IP SANs.
  const ips = ipSansOf(role, req, useCsrSans ? csr : null);
  // 10. URI SANs.
  const uris = uriSansOf(role, req, useCsrSans ? csr : null);
  // 11. User ids.
  const userIds = req.user_ids.length > 0 ? req.user_ids : fromCsr.uids;
  checkUserIds(role, userIds);

  return {
    subject: {
      commonName: cn,
      country: uniq(role.country),
      province: uniq(role.province),
      locality: uniq(role.locality),
      streetAddress: uniq(role.street_address),
      postalCode: uniq(role.postal_code),
      organization: uniq(role.organization),
      organizationalUnit: uniq(role.ou),
      serialNumber: serial,
      userIds: uniq(userIds),
    },
    sans: { dns: names.dns, email: names.email, ip: ips, uri: uniq(uris.map(asciiUri)), otherNames: otherSans },
  };
}

/** Step 8: the request's other SANs, plus the CSR's when its SANs are used (`sansCsr`). */
function otherSansOf(role: Role, req: NameRequest, sansCsr: CsrInfo | null): ParsedOtherSan[] {
  const otherSans: ParsedOtherSan[] = [];
  for (const o of req.other_sans) {
    try {
      otherSans.push(parseOtherSan(o));
    } catch (e) {
      throw badRequest(`could not parse requested other SAN: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  if (sansCsr) otherSans.push(...(sansCsr.sans?.otherNames ?? []));
  checkOtherSans(role.allowed_other_sans, otherSans);
  return otherSans;
}

/** Step 9: IP SANs from the CSR when its SANs are used, else from `ip_sans`; allow_ip_sans and the CIDRs. */
function ipSansOf(role: Role, req: NameRequest, sansCsr: CsrInfo | null): Uint8Array[] {
  const ips: Uint8Array[] = [];
  if (sansCsr) ips.push(...(sansCsr.sans?.ip ?? []));
  else {
    for (const t of req.ip_sans) {
      const ip = parseIp(t);
      if (!ip) throw badRequest(`the value "${t}" is not a valid IP address`);
      ips.push(ip);
    }
  }
  if (ips.length > 0) {
    if (!role.allow_ip_sans) {
      throw badRequest(`IP Subject Alternative Names are not allowed in this role, but was provided via ${sansCsr ? "CSR" : "the API"}`);
    }
    if (role.allowed_ip_sans_cidr.length > 0) {
      const cidrs = role.allowed_ip_sans_cidr.map((c) => parseCidr(c)).filter((c) => c !== null);
      for (const ip of ips) {
        if (!cidrs.some((c) => cidrContains(c, ip))) throw badRequest(`the IP address "${formatIp(ip)}" is not allowed in this role`);
      }
    }
  }
  return ips;
}

/** Step 10: URI SANs must glob-match allowed_uri_sans (none allowed when it is empty) and parse as URLs. */
function uriSansOf(role: Role, req: NameRequest, sansCsr: CsrInfo | null): string[] {
  const uris = sansCsr ? (sansCsr.sans?.uri ?? []) : req.uri_sans;
  if (uris.length > 0) {
    const via = sansCsr ? "CSR" : "the API";
    if (role.allowed_uri_sans.length === 0) throw badRequest(`URI Subject Alternative Names are not allowed in this role, but were provided via ${via}`);
    for (const u of uris) {
      let ok = matchesAny(role.allowed_uri_sans, u);
      try {
        const parsed = new URL(u);
        ok = ok && parsed.protocol !== "";
      } catch {
        ok = false;
      }
      if (!ok) throw badRequest(`URI Subject Alternative Names were provided via ${via} which are not valid for this role`);
    }
  }
  return uris;
}

/** Step 11: each user id must match allowed_user_ids. */
function checkUserIds(role: Role, userIds: string[]): void {
  // Case-insensitive, as upstream; the role's list is lower-cased once, not once per user id.
  const allowedUserIds = userIds.length > 0 ? role.allowed_user_ids.map((a) => a.toLowerCase()) : [];
  for (const u of userIds) {
    if (!matchesAny(allowedUserIds, u.toLowerCase())) throw badRequest(`user_id ${u} is not allowed by this role`);
  }
}
