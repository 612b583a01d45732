/**
 * Validity computation for issued certificates (ttl, not_after, not_before of Vault API
 * /pki/issue/:name). Pure: callers pass the clock. Lanyard refuses a ttl above the applicable
 * max_ttl (docs/http-conventions.md "Settled questions"),
 * where upstream caps it with a warning.
 */
import { badRequest } from "../../../core/errors";
import { formatGoDuration } from "../../../core/duration";

export type LeafNotAfterBehavior = "err" | "truncate" | "permit";

export interface ValidityInput {
  now: number; // ms
  requestTtl: number; // s, 0 = none
  requestNotAfter: string; // "" = none
  roleTtl: number;
  roleMaxTtl: number;
  roleNotAfter: string;
  /** "permit" | "ttl-limited" | "forbid" | RFC 3339 timestamp */
  notAfterBound: string;
  mountDefaultTtl: number;
  mountMaxTtl: number;
  notBeforeDuration: number; // s
  /** Fixed notBefore from the role ("" = none). */
  notBefore: string;
  /** The signing issuer, unless the certificate is self-signed. */
  issuer: { notAfter: number; behavior: LeafNotAfterBehavior } | null;
  /** Refuse a ttl above max (issue/sign); CA generation caps it with a warning instead. */
  refuseOverMax: boolean;
}

export interface Validity {
  notBefore: Date;
  notAfter: Date;
  warnings: string[];
}

/** Parses `YYYY-MM-DDTHH:MM:SSZ` (RFC 3339, as upstream's not_after); throws 400 otherwise. */
export function parseRfc3339(field: string, value: string): number {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.exec(value.trim());
  const t = m ? Date.parse(value.trim()) : NaN;
  if (!m || Number.isNaN(t)) {
    throw badRequest(`${field}: parsing time "${value}" as "2006-01-02T15:04:05Z07:00": cannot parse; expected YYYY-MM-DDTHH:MM:SSZ`);
  }
  // Date.parse rolls impossible dates over (2030-02-30 becomes March 2nd); Go's parser, like
  // RFC 3339 §5.7, refuses them. Round-trip the fields to catch that.
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const probe = new Date(0);
  probe.setUTCFullYear(year, month - 1, day); // not Date.UTC, which maps years 0-99 to 19xx
  if (probe.getUTCMonth() !== month - 1 || probe.getUTCDate() !== day || hour > 23 || minute > 59 || second > 59) {
    throw badRequest(`${field}: parsing time "${value}": day, month or time of day out of range`);
  }
  return t;
}

const iso = (ms: number) => new Date(ms).toISOString().replace(".000Z", "Z");

export function computeValidity(v: ValidityInput): Validity {
  const warnings: string[] = [];
  let notAfterText = "";
  if (v.roleNotAfter) {
    notAfterText = v.roleNotAfter;
  } else if (v.requestNotAfter) {
    if (v.notAfterBound === "forbid") throw badRequest("not_after_bound is set to forbid. not_after cannot be provided.");
    notAfterText = v.requestNotAfter;
  }
  const absolute = notAfterText ? parseRfc3339("not_after", notAfterText) : null;
  if (absolute !== null && v.requestTtl > 0) {
    throw badRequest("Either ttl or not_after should be provided. Both should not be provided in the same request.");
  }
  const max = v.roleMaxTtl || v.mountMaxTtl;
  let ttl = v.requestTtl || v.roleTtl || v.mountDefaultTtl;
  if (ttl > max) {
    if (v.requestTtl > 0 && v.refuseOverMax) {
      throw badRequest(`ttl: the requested ttl "${formatGoDuration(v.requestTtl)}" is longer than the maximum allowed ttl "${formatGoDuration(max)}"`);
    }
    warnings.push(`TTL "${formatGoDuration(ttl)}" is longer than permitted maxTTL "${formatGoDuration(max)}", so maxTTL is being used`);
    ttl = max;
  }
  if (v.notAfterBound === "ttl-limited" && absolute !== null && absolute > v.now + ttl * 1000) {
    throw badRequest(`not_after: ${notAfterText} is beyond the role's ttl (not_after_bound is ttl-limited)`);
  }
  // Whole seconds: X.509 times carry no fractions (RFC 5280 §4.1.2.5).
  let notAfter = Math.floor((absolute ?? v.now + ttl * 1000) / 1000) * 1000;
  if (!["permit", "ttl-limited", "forbid", ""].includes(v.notAfterBound)) {
    const bound = parseRfc3339("not_after_bound", v.notAfterBound);
    if (notAfter > bound) throw badRequest(`notAfter ${iso(notAfter)} is beyond the role's not_after_bound ${iso(bound)}`);
  }
  if (v.issuer && notAfter > v.issuer.notAfter) {
    if (v.issuer.behavior === "err") {
      throw badRequest(
        `cannot satisfy request, as TTL would result in notAfter of ${iso(notAfter)} that is beyond the expiration of the CA certificate at ${iso(v.issuer.notAfter)}`,
      );
    }
    if (v.issuer.behavior === "truncate") {
      if (v.issuer.notAfter < v.now) throw badRequest(`cannot satisfy request, as NotAfter date ${iso(v.issuer.notAfter)} is in the past`);
      notAfter = v.issuer.notAfter;
    }
  }
  let notBefore = v.notBefore ? parseRfc3339("not_before", v.notBefore) : v.now - v.notBeforeDuration * 1000;
  notBefore = Math.floor(notBefore / 1000) * 1000;
  if (notBefore > notAfter) {
    throw badRequest(`The certificate's Not Before (${iso(notBefore)}) is later than the certificate's Not After (${iso(notAfter)})`);
  }
  if (notBefore === notAfter) {
    throw badRequest(`The certificate's Not Before (${iso(notBefore)}) is equal to the certificate's Not After (${iso(notAfter)})`);
  }
  return { notBefore: new Date(notBefore), notAfter: new Date(notAfter), warnings };
}
