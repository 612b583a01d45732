/**
 * The inventory's request parameters (docs/pki-inventory.md "Filters"): read from the query
 * string of a LIST or GET, or from the JSON body of a POST-style list, each checked with a 400
 * that names the parameter. Unknown values are refused rather than ignored, so a typo never
 * widens a listing silently.
 */
import { badRequest } from "../../../core/errors";
import type { CertState, InventoryFilter } from "../storage/inventory-store";

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;
export const MAX_HISTOGRAM_DAYS = 366;
const MAX_SEARCH_BYTES = 255;
const MAX_NAME_BYTES = 255;

type Params = Record<string, unknown>;

/** One string parameter: absent, or a single string (a repeated query parameter is refused). */
export function stringParam(p: Params, name: string, maxBytes = MAX_SEARCH_BYTES): string | undefined {
  const v = p[name];
  if (v === undefined || v === null) return undefined;
  const s = typeof v === "number" ? String(v) : v;
  if (typeof s !== "string") throw badRequest(`${name}: must be a single string`);
  if (new TextEncoder().encode(s).length > maxBytes) throw badRequest(`${name}: longer than ${maxBytes} bytes`);
  return s;
}

/** RFC 3339 date-time or Unix seconds → Unix seconds. */
export function timeParam(p: Params, name: string): number | undefined {
  const s = stringParam(p, name, 64);
  if (s === undefined || s === "") return undefined;
  if (/^-?\d+$/.test(s)) return Number(s);
  // RFC 3339 §5.6 date-time: a full date, "T", a time and an offset (Z or ±hh:mm).
  if (!/^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/.test(s)) throw badRequest(`${name}: "${s}" is neither an RFC 3339 time nor Unix seconds`);
  const ms = Date.parse(s);
  if (!Number.isFinite(ms)) throw badRequest(`${name}: "${s}" is not a valid time`);
  return Math.floor(ms / 1000);
}

/** A positive integer parameter within [1, max]; `dflt` when absent. */
export function intParam(p: Params, name: string, dflt: number, max: number): number {
  const s = stringParam(p, name, 32);
  if (s === undefined || s === "") return dflt;
  if (!/^\d+$/.test(s)) throw badRequest(`${name}: "${s}" is not a whole number`);
  const n = Number(s);
  if (n < 1 || n > max) throw badRequest(`${name}: must be between 1 and ${max}`);
  return n;
}

function oneOf<T extends string>(p: Params, name: string, allowed: readonly T[]): T | undefined {
  const s = stringParam(p, name, 32);
  if (s === undefined || s === "") return undefined;
  if (!(allowed as readonly string[]).includes(s)) throw badRequest(`${name}: "${s}" is not one of ${allowed.join(", ")}`);
  return s as T;
}

const nonEmpty = (s: string | undefined): string | undefined => (s === undefined || s === "" ? undefined : s);

/** The filter parameters (issuer_ref is returned as given; the caller resolves it). */
export function filterParams(p: Params): { filter: Omit<InventoryFilter, "issuerId">; issuerRef: string | undefined } {
  const filter: Omit<InventoryFilter, "issuerId"> = {};
  const cn = nonEmpty(stringParam(p, "common_name"));
  if (cn !== undefined) filter.commonName = cn;
  const san = nonEmpty(stringParam(p, "san"));
  if (san !== undefined) filter.san = san;
  const role = nonEmpty(stringParam(p, "role", MAX_NAME_BYTES));
  if (role !== undefined) filter.role = role;
  const state = oneOf<CertState>(p, "state", ["valid", "expired", "revoked"]);
  if (state !== undefined) filter.state = state;
  const before = timeParam(p, "expires_before");
  if (before !== undefined) filter.expiresBefore = before;
  const after = timeParam(p, "expires_after");
  if (after !== undefined) filter.expiresAfter = after;
  return { filter, issuerRef: nonEmpty(stringParam(p, "issuer_ref", MAX_NAME_BYTES)) };
}

export interface PageParams {
  sort: "not_after" | "serial";
  order: "asc" | "desc";
  after: string | undefined;
  limit: number;
}

/** Sorting and paging: `sort` not_after (default) or serial, `order` asc (default) or desc. */
export function pageParams(p: Params): PageParams {
  return {
    sort: oneOf(p, "sort", ["not_after", "serial"] as const) ?? "not_after",
    order: oneOf(p, "order", ["asc", "desc"] as const) ?? "asc",
    after: nonEmpty(stringParam(p, "after", 128)),
    limit: intParam(p, "limit", DEFAULT_LIMIT, MAX_LIMIT),
  };
}
