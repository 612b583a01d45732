/**
 * The certificate inventory (docs/pki-inventory.md): LIST certs/detailed (OpenBao's path and
 * answer shape, `keys` and `key_info`, with filters, sorting and `after`/`limit` paging), counts
 * per state and the expiry histogram. Certificates issued with `no_store` were never stored, so
 * no answer can include them; each answer says so (`excludes_no_store: true`).
 *
 * A page with a substring filter (common_name, san: Lanyard's extension) reads at most
 * SCAN_WINDOW rows (per sort) and says where it stopped (`next_after`, `scan_incomplete`), so that a rare
 * substring costs a bounded time per page instead of one pass over the whole mount; pages without
 * one are OpenBao's keyset pages, unchanged (docs/pki-inventory.md "Substring search").
 */
import { badRequest } from "../../../core/errors";
import { base64ToBytes } from "../../../core/encoding";
import type { MountRow } from "../../../core/mount-store";
import type { Db } from "../../../core/db/client";
import { resolveIssuerIn } from "../ca/issuers";
import { normalizeSerial } from "../x509/pem";
import { loadIssuanceState } from "../storage/store";
import { expiryPerDay, hasSubstring, inventoryPage, positionOf, SCAN_WINDOW, stateCounts, type CertState, type InventoryFilter, type InventoryRow, type Position, type StateCounts } from "../storage/inventory-store";
import { inventoryColumns, sanList } from "./columns";
import { filterParams, intParam, MAX_HISTOGRAM_DAYS, pageParams } from "./query";

type Params = Record<string, unknown>;


const rfc3339 = (sec: number): string => new Date(sec * 1000).toISOString().replace(".000Z", "Z");

export interface KeyInfo {
  serial_number: string;
  common_name: string;
  /** Every SAN value (DNS names, email addresses, IP addresses, URIs). */
  alt_names: string[];
  issuer_id: string;
  role: string | null;
  not_before: string;
  not_after: string;
  revoked: boolean;
  revocation_time?: string;
  state: CertState;
}

function keyInfo(r: InventoryRow, now: number): KeyInfo {
  let cn = r.common_name ?? "";
  let sans = sanList(r.sans);
  let notBefore = r.not_before ?? 0;
  if (r.not_before === null && r.der !== null && r.der !== "") {
    // Not backfilled yet (./backfill.ts): the same facts, read from the certificate now.
    const c = inventoryColumns(base64ToBytes(r.der));
    cn = c.commonName;
    sans = sanList(c.sans);
    notBefore = c.notBefore;
  }
  const revoked = r.revoked_at !== null;
  const state: CertState = revoked ? "revoked" : r.not_after < now ? "expired" : "valid";
  return {
    serial_number: r.serial,
    common_name: cn,
    alt_names: sans,
    issuer_id: r.issuer_id,
    role: r.role,
    not_before: rfc3339(notBefore),
    not_after: rfc3339(r.not_after),
    revoked,
    ...(r.revoked_at !== null ? { revocation_time: rfc3339(r.revoked_at) } : {}),
    state,
  };
}

/** The filter of a request, its issuer_ref resolved as every issuer reference is (id, name or "default"). */
async function filterOf(db: Db, mount: MountRow, p: Params): Promise<InventoryFilter> {
  const { filter, issuerRef } = filterParams(p);
  if (issuerRef === undefined) return filter;
  const { issuers, config } = await loadIssuanceState(db, mount.id, null);
  try {
    return { ...filter, issuerId: resolveIssuerIn(issuers, config.issuers, issuerRef).id };
  } catch {
    throw badRequest(`issuer_ref: unable to find PKI issuer for reference: ${issuerRef}`);
  }
}

export interface DetailedList {
  keys: string[];
  key_info: Record<string, KeyInfo>;
  excludes_no_store: true;
  /** Substring-filtered pages only: pass as `after` to continue; absent when the scan reached the end. */
  next_after?: string;
  /** Substring-filtered pages only: true when the scan window ended before `limit` matches were found. */
  scan_incomplete?: boolean;
}

/** The position after which a page starts (`after`), its not_after (and id, for ties) read back when sorting by it. */
async function afterOf(db: Db, mountId: string, raw: string | undefined, sort: "not_after" | "serial"): Promise<Position | null> {
  if (raw === undefined) return null;
  const serial = normalizeSerial(raw);
  if (!serial) throw badRequest(`after: "${raw}" is not a serial number`);
  if (sort === "serial") return { serial, notAfter: 0, id: 0 };
  const at = await positionOf(db, mountId, serial);
  if (at === null) throw badRequest(`after: no stored certificate has serial ${serial} (removed by tidy since?)`);
  return at;
}

export async function listDetailed(db: Db, mount: MountRow, p: Params, nowMs = Date.now()): Promise<DetailedList> {
  const page = pageParams(p);
  const filter = await filterOf(db, mount, p);
  const now = Math.floor(nowMs / 1000);
  const after = await afterOf(db, mount.id, page.after, page.sort);
  const windowed = hasSubstring(filter);
  const q = { filter, sort: page.sort, order: page.order, after, limit: page.limit, now, ...(windowed ? { window: SCAN_WINDOW[page.sort] } : {}) };
  const { rows, edge } = await inventoryPage(db, mount.id, q);
  const key_info: Record<string, KeyInfo> = {};
  for (const r of rows) key_info[r.serial] = keyInfo(r, now);
  const keys = rows.map((r) => r.serial);
  const out: DetailedList = { keys, key_info, excludes_no_store: true };
  if (!windowed) return out;
  // A full page continues after its last key, as every keyset page; a short one after the edge of
  // its window when the window was full (the matches up to it were all returned), else it is the end.
  const full = keys.length === page.limit;
  const next = full ? keys[keys.length - 1] : edge?.serial;
  if (next !== undefined) out.next_after = next;
  out.scan_incomplete = !full && edge !== null;
  return out;
}

export async function countsByState(db: Db, mount: MountRow, p: Params, nowMs = Date.now()): Promise<StateCounts & { excludes_no_store: true }> {
  const filter = await filterOf(db, mount, p);
  return { ...(await stateCounts(db, mount.id, filter, Math.floor(nowMs / 1000))), excludes_no_store: true };
}

export interface Histogram {
  days: number;
  from: string;
  histogram: { date: string; count: number }[];
  excludes_no_store: true;
}

/**
 * Certificates not revoked and not yet expired, per UTC day on which they expire: `days` dates
 * from today's, every date listed (zero included), the first counting only from now on.
 */
export async function expiryHistogram(db: Db, mount: MountRow, p: Params, nowMs = Date.now()): Promise<Histogram> {
  const days = intParam(p, "days", 90, MAX_HISTOGRAM_DAYS);
  const now = Math.floor(nowMs / 1000);
  const dayStart = now - (now % 86400);
  const perDay = await expiryPerDay(db, mount.id, dayStart, now, dayStart + days * 86400);
  const histogram = Array.from({ length: days }, (_, d) => ({ date: rfc3339(dayStart + d * 86400).slice(0, 10), count: perDay.get(d) ?? 0 }));
  return { days, from: rfc3339(now), histogram, excludes_no_store: true };
}
