/**
 * Size limits on the names a request asks for and on a role's name lists. They
 * are checked before any parsing or matching, so the work a request can cause is bounded by its
 * own size and by the role's, and a refusal is a 400 that names the field. Lengths are UTF-8
 * bytes; counts are list entries after comma splitting. docs/security.md lists them.
 *
 * Upstream Vault sets none of these (Go's x509 does not enforce RFC 5280's upper bounds either);
 * each is chosen so that every value a standard allows still passes.
 */
import { badRequest } from "../../../core/errors";
import { utf8Length } from "../../../core/text";
import type { SanSpec } from "../x509/asn1";

/**
 * common_name, each alt_names entry, serial_number and each user_ids entry. 255 admits every DNS
 * name (253 octets, RFC 1035 §2.3.4 as RFC 5890's IDNA applies it, plus a trailing dot) and every
 * e-mail address (254 octets: RFC 5321 §4.5.3.1.3's 256-octet path less its angle brackets). It
 * is deliberately above RFC 5280's ub-common-name (64): upstream issues longer CNs and clients
 * rely on that. DNS names are still held to 253 octets and 63-octet labels by the IDNA
 * conversion (names.ts toAscii), as upstream's idna.VerifyDNSLength does.
 */
export const MAX_NAME_BYTES = 255;
/**
 * Each uri_sans and other_sans entry. The SPIFFE ID specification (§2.3) asks for IDs of up to
 * 2048 bytes to work, and 2048 is the URL length that HTTP clients have long supported.
 */
export const MAX_URI_BYTES = 2048;
/** Each ip_sans entry: the longest IP text (RFC 4291 §2.2 form 3) is 45 characters. */
export const MAX_IP_BYTES = 64;
/** Entries in one SAN list of a request or CSR (Let's Encrypt's per-certificate limit). */
export const MAX_SAN_ENTRIES = 100;
/** Entries in one name list of a role. */
export const MAX_ROLE_LIST_ENTRIES = 1000;
/**
 * The entries of one role list that contain `*`, in bytes together. Glob matching costs about
 * (subject length + pattern length) per pair, so this and MAX_SAN_ENTRIES bound the matching
 * work of one request; entries without `*` are compared exactly, which is cheap. At this bound a
 * role built to be slow (every glob failing late, every name passing on the last one) adds tens
 * of milliseconds to an issue in workerd; 8 KiB is still some 200 globs of typical length.
 */
export const MAX_ROLE_GLOB_BYTES = 8192;

/** Whether `s` is longer than `max` UTF-8 bytes, counting only when the length leaves doubt. */
function overBytes(s: string, max: number): boolean {
  // A UTF-16 code unit is 1 to 3 UTF-8 bytes (a surrogate pair is 4 for 2 units).
  if (s.length > max) return true;
  if (s.length * 3 <= max) return false;
  return utf8Length(s) > max;
}

/** One value: `<field>: longer than <max> bytes`. */
export function capValue(field: string, value: string, max: number): void {
  if (overBytes(value, max)) throw badRequest(`${field}: longer than ${max} bytes`);
}

/**
 * A list: `<field>: more than <n> entries`, `<field>: entry longer than <max> bytes`. `kind`
 * renames "entry" for lists whose field says little on its own (CSR SANs: `csr: URI SAN …`).
 */
export function capList(field: string, values: readonly string[], maxEntries: number, maxBytes: number, kind = { one: "entry", many: "entries" }): void {
  if (values.length > maxEntries) throw badRequest(`${field}: more than ${maxEntries} ${kind.many}`);
  for (const v of values) if (overBytes(v, maxBytes)) throw badRequest(`${field}: ${kind.one} longer than ${maxBytes} bytes`);
}

/** The name fields of a request (policy.ts NameRequest), declared here so limits import no policy. */
export interface RequestedNames {
  common_name: string;
  alt_names: readonly string[];
  ip_sans: readonly string[];
  uri_sans: readonly string[];
  other_sans: readonly string[];
  serial_number: string;
  user_ids: readonly string[];
}

/** The request's own name fields (issue, sign, and CA generation through applyRole). */
export function capNameRequest(req: RequestedNames): void {
  capValue("common_name", req.common_name, MAX_NAME_BYTES);
  capList("alt_names", req.alt_names, MAX_SAN_ENTRIES, MAX_NAME_BYTES);
  capList("ip_sans", req.ip_sans, MAX_SAN_ENTRIES, MAX_IP_BYTES);
  capList("uri_sans", req.uri_sans, MAX_SAN_ENTRIES, MAX_URI_BYTES);
  capList("other_sans", req.other_sans, MAX_SAN_ENTRIES, MAX_URI_BYTES);
  capValue("serial_number", req.serial_number, MAX_NAME_BYTES);
  capList("user_ids", req.user_ids, MAX_SAN_ENTRIES, MAX_NAME_BYTES);
}

const kindOf = (one: string) => ({ one, many: `${one}s` });
// Built once: the CSR checks run on every sign.
const CSR_KINDS = {
  cn: kindOf("common name"),
  serial: kindOf("subject serial number"),
  uid: kindOf("user id"),
  dns: kindOf("DNS SAN"),
  email: kindOf("e-mail SAN"),
  uri: kindOf("URI SAN"),
  other: kindOf("other SAN"),
};

/** The names a CSR supplies (use_csr_common_name, use_csr_sans, its serialNumber and UIDs). */
export function capCsrNames(cn: string, serial: string, uids: readonly string[], sans: SanSpec | null): void {
  capList("csr", [cn], 1, MAX_NAME_BYTES, CSR_KINDS.cn);
  capList("csr", [serial], 1, MAX_NAME_BYTES, CSR_KINDS.serial);
  capList("csr", uids, MAX_SAN_ENTRIES, MAX_NAME_BYTES, CSR_KINDS.uid);
  if (!sans) return;
  capList("csr", sans.dns, MAX_SAN_ENTRIES, MAX_NAME_BYTES, CSR_KINDS.dns);
  capList("csr", sans.email, MAX_SAN_ENTRIES, MAX_NAME_BYTES, CSR_KINDS.email);
  capList("csr", sans.uri, MAX_SAN_ENTRIES, MAX_URI_BYTES, CSR_KINDS.uri);
  capList(
    "csr",
    sans.otherNames.map((o) => o.value),
    MAX_SAN_ENTRIES,
    MAX_URI_BYTES,
    CSR_KINDS.other,
  );
  if (sans.ip.length > MAX_SAN_ENTRIES) throw badRequest(`csr: more than ${MAX_SAN_ENTRIES} IP SANs`);
}

/** A role's name lists, as written (before the role is stored). */
export interface RoleNameLists {
  allowed_domains: readonly string[];
  allowed_uri_sans: readonly string[];
  allowed_other_sans: readonly string[];
  allowed_serial_numbers: readonly string[];
  allowed_user_ids: readonly string[];
  allowed_ip_sans_cidr: readonly string[];
}

const ROLE_LIST_BYTES: Record<keyof RoleNameLists, number> = {
  allowed_domains: MAX_NAME_BYTES,
  allowed_uri_sans: MAX_URI_BYTES,
  allowed_other_sans: MAX_URI_BYTES,
  allowed_serial_numbers: MAX_NAME_BYTES,
  allowed_user_ids: MAX_NAME_BYTES,
  allowed_ip_sans_cidr: MAX_IP_BYTES,
};

export function capRoleLists(lists: RoleNameLists): void {
  for (const field of Object.keys(ROLE_LIST_BYTES) as (keyof RoleNameLists)[]) {
    const values = lists[field];
    capList(field, values, MAX_ROLE_LIST_ENTRIES, ROLE_LIST_BYTES[field]);
    let globBytes = 0;
    for (const v of values) if (v.includes("*")) globBytes += utf8Length(v);
    if (globBytes > MAX_ROLE_GLOB_BYTES) {
      throw badRequest(`${field}: entries containing "*" are longer than ${MAX_ROLE_GLOB_BYTES} bytes together`);
    }
  }
}
