/**
 * The role name policy applied at issuance (Vault API /pki/roles/:name; OpenBao
 * builtin/logical/pki/cert_util.go validateNames): which common names, DNS and
 * e-mail SANs, IP and URI SANs, other SANs, subject serial numbers and user ids a role allows.
 * Pure functions over plain data, so the matrix of upstream cases is unit-tested directly.
 */
import { badRequest } from "../../../core/errors";
import { globMatch } from "../../../core/glob";

export interface NamePolicy {
  allow_localhost: boolean;
  allowed_domains: string[];
  allow_bare_domains: boolean;
  allow_subdomains: boolean;
  allow_glob_domains: boolean;
  allow_wildcard_certificates: boolean;
  allow_any_name: boolean;
  enforce_hostnames: boolean;
}

// ---------------------------------------------------------------------------------------------
// IDNA (RFC 3492 Punycode for non-ASCII labels; the permissive profile upstream uses).

const BASE = 36;
const T_MIN = 1;
const T_MAX = 26;
const SKEW = 38;
const DAMP = 700;

function adapt(delta: number, numPoints: number, first: boolean): number {
  let d = first ? Math.floor(delta / DAMP) : delta >> 1;
  d += Math.floor(d / numPoints);
  let k = 0;
  while (d > ((BASE - T_MIN) * T_MAX) >> 1) {
    d = Math.floor(d / (BASE - T_MIN));
    k += BASE;
  }
  return k + Math.floor(((BASE - T_MIN + 1) * d) / (d + SKEW));
}

const digit = (d: number) => String.fromCharCode(d + 22 + 75 * (d < 26 ? 1 : 0));

export function punycode(label: string): string {
  const cps = Array.from(label, (c) => c.codePointAt(0) ?? 0);
  let out = cps.filter((c) => c < 0x80).map((c) => String.fromCharCode(c)).join("");
  const b = out.length;
  let h = b;
  if (b > 0) out += "-";
  let n = 0x80;
  let delta = 0;
  let bias = 72;
  while (h < cps.length) {
    const m = Math.min(...cps.filter((c) => c >= n));
    delta += (m - n) * (h + 1);
    n = m;
    for (const c of cps) {
      if (c < n) delta++;
      if (c === n) {
        let q = delta;
        for (let k = BASE; ; k += BASE) {
          const t = k <= bias ? T_MIN : k >= bias + T_MAX ? T_MAX : k - bias;
          if (q < t) break;
          out += digit(t + ((q - t) % (BASE - t)));
          q = Math.floor((q - t) / (BASE - t));
        }
        out += digit(q);
        bias = adapt(delta, h + 1, h === b);
        delta = 0;
        h++;
      }
    }
    delta++;
    n++;
  }
  return out;
}

export class IdnaError extends Error {}

/** ToASCII: punycodes non-ASCII labels; rejects empty labels, labels > 63 and names > 253 octets. */
export function toAscii(name: string): string {
  const trailingDot = name.endsWith(".");
  const labels = (trailingDot ? name.slice(0, -1) : name).split(".");
  const out = labels.map((l) => {
    if (l === "") throw new IdnaError(`idna: invalid label "${l}"`);
    // Every code point yields at least one output character and a code point is at most two
    // UTF-16 units, so a longer label cannot fit in 63 octets: refuse it before Punycode, whose
    // cost grows with the square of the label's length.
    if (l.length > 2 * 63) throw new IdnaError(`idna: invalid label "${l}"`);
    // eslint-disable-next-line no-control-regex
    const a = /^[\x00-\x7f]*$/.test(l) ? l : `xn--${punycode(l.normalize("NFC").toLowerCase())}`;
    if (a.length > 63) throw new IdnaError(`idna: invalid label "${l}"`);
    return a;
  });
  const joined = out.join(".") + (trailingDot ? "." : "");
  if (joined.length > 253) throw new IdnaError(`idna: name too long "${name}"`);
  return joined;
}

const LABEL = "([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])";
/** Upstream's hostname shape: optional leading `*.`, labels, optional trailing dot. */
export const HOSTNAME_RE = new RegExp(`^(\\*\\.)?(${LABEL}\\.)*${LABEL}\\.?$`);
const WILDCARD_LABEL_RE = new RegExp(`^(\\*|\\*${LABEL}|${LABEL}\\*|${LABEL}\\*${LABEL})$`);

/**
 * Shell-style glob where only `*` is special and matches any run, dots included (upstream's
 * go-glob). Linear, never a RegExp: see src/core/glob.ts.
 */
export { globMatch };

// ---------------------------------------------------------------------------------------------

/** Whether one DNS name or e-mail address is allowed (upstream's validateNames, one name). */
export function nameAllowed(p: NamePolicy, name: string): boolean {
  let reduced = name;
  let emailDomain = "";
  let isEmail = false;
  if (name.includes("@")) {
    const parts = name.split("@");
    if (parts.length !== 2) return false;
    reduced = parts[1] ?? "";
    emailDomain = reduced;
    isEmail = true;
  }
  let isWildcard = false;
  if (reduced.includes("*")) {
    if (!p.allow_wildcard_certificates) return false;
    if (isEmail) return false;
    const stars = reduced.split("*").length - 1;
    const labels = reduced.split(".");
    const first = labels[0] ?? "";
    if (stars !== 1 || !first.includes("*")) return false;
    isWildcard = true;
    if (p.enforce_hostnames && !WILDCARD_LABEL_RE.test(first)) return false;
    reduced = labels.slice(1).join(".");
  }
  if (p.enforce_hostnames && reduced !== "") {
    let ascii: string;
    try {
      ascii = toAscii(reduced);
    } catch {
      return false;
    }
    if (!HOSTNAME_RE.test(ascii)) return false;
  }
  if (p.allow_any_name) return true;
  if (p.allow_localhost) {
    for (const host of [reduced, emailDomain]) {
      if (host === "localhost" || host === "localdomain") return true;
      if (p.allow_subdomains && (host.endsWith(".localhost") || host.endsWith(".localdomain"))) return true;
    }
    if (p.allow_subdomains && isWildcard && (reduced === "localhost" || reduced === "localdomain")) return true;
  }
  // Lower-cased once, not once per allowed domain: a role may list up to
  // MAX_ROLE_LIST_ENTRIES domains and a request up to MAX_SAN_ENTRIES names (name-limits.ts).
  const nameLower = name.toLowerCase();
  const emailDomainLower = emailDomain.toLowerCase();
  const reducedLower = reduced.toLowerCase();
  const needLower = p.allow_bare_domains || (p.allow_subdomains && isWildcard);
  for (const d of p.allowed_domains) {
    if (d === "") continue;
    const dLower = needLower ? d.toLowerCase() : "";
    if (p.allow_bare_domains && (nameLower === dLower || (isEmail && emailDomainLower === dLower))) {
      return true;
    }
    if (p.allow_subdomains) {
      // reduced.endsWith(`.${d}`), without building that string for every pair.
      if (reduced.length > d.length && reduced.endsWith(d) && reduced[reduced.length - d.length - 1] === ".") return true;
      if (isWildcard && reducedLower === dLower) return true;
    }
    if (p.allow_glob_domains && d.includes("*") && globMatch(d, name)) return true;
  }
  return false;
}

export interface SubjectNames {
  dns: string[];
  email: string[];
}

/**
 * Sorts request names into DNS and e-mail SANs (the common name, then alt_names): names with `@`
 * are e-mail; others are IDNA-converted and kept only when hostname-shaped (others are
 * silently dropped, as upstream does).
 */
export function classifyNames(names: string[], into: SubjectNames): void {
  for (const raw of names) {
    if (raw === "") continue;
    if (raw.includes("@")) {
      if (!into.email.includes(raw)) into.email.push(raw);
      continue;
    }
    let ascii: string;
    try {
      ascii = toAscii(raw);
    } catch (e) {
      throw badRequest(e instanceof Error ? e.message : String(e));
    }
    if (HOSTNAME_RE.test(ascii) && !into.dns.includes(ascii)) into.dns.push(ascii);
  }
}

/** cn_validations (Vault API /pki/roles/:name): `email`, `hostname` or `disabled`. */
export function checkCommonName(p: NamePolicy, cnValidations: string[], cn: string): void {
  if (cnValidations.includes("disabled") || cn === "") return;
  const kindOk = cn.includes("@") ? cnValidations.includes("email") : cnValidations.includes("hostname");
  if (!kindOk || !nameAllowed(p, cn)) throw badRequest(`common name ${cn} not allowed by this role`);
}

/** Exact match or, for entries containing `*`, a glob match (serial numbers, URIs). */
export function matchesAny(patterns: string[], value: string, caseInsensitive = false): boolean {
  const v = caseInsensitive ? value.toLowerCase() : value;
  return patterns.some((raw) => {
    const p = caseInsensitive ? raw.toLowerCase() : raw;
    return p === v || (p.includes("*") && globMatch(p, v));
  });
}

export interface ParsedOtherSan {
  oid: string;
  value: string;
}

/** Parses `<oid>;<type>:<value>`; only UTF8 (any case, `utf-8` too) is supported. */
export function parseOtherSan(entry: string): ParsedOtherSan {
  const semi = entry.indexOf(";");
  if (semi < 0) throw new Error(`expected a semicolon in other SAN "${entry}"`);
  const oid = entry.slice(0, semi);
  const rest = entry.slice(semi + 1);
  const colon = rest.indexOf(":");
  if (colon < 0) throw new Error(`expected a colon in other SAN "${entry}"`);
  const type = rest.slice(0, colon).toLowerCase();
  if (type !== "utf8" && type !== "utf-8") throw new Error(`only utf8 other SANs are supported; found non-utf8 type "${type}" in "${entry}"`);
  if (!/^[0-2](\.\d+)+$/.test(oid)) throw new Error(`invalid OID "${oid}" in other SAN "${entry}"`);
  return { oid, value: rest.slice(colon + 1) };
}

/** Checks requested other SANs against the role's allowed_other_sans (`<oid>;UTF8:<glob>`, or `*`). */
export function checkOtherSans(allowed: string[], requested: ParsedOtherSan[]): void {
  if (requested.length === 0) return;
  if (allowed.length === 1 && allowed[0] === "*") return;
  const byOid = new Map<string, string[]>();
  for (const a of allowed) {
    if (a === "*") continue;
    const p = parseOtherSan(a);
    byOid.set(p.oid, [...(byOid.get(p.oid) ?? []), p.value]);
  }
  for (const r of requested) {
    const values = byOid.get(r.oid);
    if (!values) throw badRequest(`other SAN OID ${r.oid} not allowed by this role`);
    if (!values.some((v) => v === r.value || globMatch(v, r.value))) {
      throw badRequest(`other SAN ${r.value} not allowed for OID ${r.oid} by this role`);
    }
  }
}
