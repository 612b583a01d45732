/**
 * What one CRL build writes (crl-rebuild.ts): a target per (CRL issuer group, scope), where the
 * scope is the full CRL (shard null) or one CRL shard (docs/pki-revocation-crl.md "Sharded CRLs"),
 * and how revocation entries reach the targets.
 *
 * Invariants:
 * - The full CRL lists every revocation of its group; a shard lists exactly the revocations whose
 *   pki_revoked.crl_shard is that shard. A build that covers only some shards reads only their
 *   entries (index pki_revoked_mount_shard), so its cost follows those shards' sizes, not the
 *   mount's.
 * - Each scope is its own CRL-number sequence and its own delta chain (RFC 5280 §5.2.3: numbers
 *   are per scope and CRL issuer): counters are keyed by group and shard, stored numbers are read
 *   from the rows of that scope only.
 * - A shard CRL is built only for a group whose issuers have CRL distribution points: its Issuing
 *   Distribution Point must name the URLs its certificates carry (crl-shards.ts).
 */
import type { Db } from "../../../core/db/client";
import { RevokedListWriter } from "../x509/crl";
import type { CrlGroup } from "./crl-groups";
import { resolveAia } from "../issuance/profile";
import { listRevokedEntriesOfShard, listRevokedEntriesSince, nextRevokedShard, type CrlKind, type RevokedEntry } from "../storage/revocation-store";
import type { ConfigShapes } from "../storage/store";
import { parseStoredKind, shardUrl, storedKind } from "./crl-shards";

/** Rows per D1 page while streaming revocations into the CRLs. */
const PAGE = 5000;

export interface Target {
  group: CrlGroup;
  /** null: the group's full CRL; n: CRL shard n. */
  shard: number | null;
  writer: RevokedListWriter;
  /** Revocations above this sequence belong on the delta (complete builds: unused). */
  baseSeq: number;
  completeNumber: number;
  /** The shard's Issuing Distribution Point URLs; null for the full CRL (no IDP). */
  idp: string[] | null;
}

/** The Authority's counter key of a target's number sequence. */
export const counterKey = (t: Pick<Target, "group" | "shard">): string => (t.shard === null ? t.group.id : `${t.group.id}:shard:${t.shard}`);

/** Where a report records a target's numbers: the issuer id, plus `/shard/<n>` for a shard. */
export const reportKey = (issuerId: string, shard: number | null): string => (shard === null ? issuerId : `${issuerId}/shard/${shard}`);

/** The scopes a build covers: every published one (`shards` absent), or the given shards. */
export function scopesOf(shards: number[] | undefined, published: number): (number | null)[] {
  if (shards) return [...new Set(shards)].filter((s) => Number.isInteger(s) && s >= 0 && s < published).sort((a, b) => a - b);
  const out: (number | null)[] = [null];
  if (published > 1) for (let s = 0; s < published; s++) out.push(s);
  return out;
}

/** The URLs naming shard `shard` of a group: every member's CRL distribution points + `/shard/<n>`. */
function shardIdpUrls(group: CrlGroup, shard: number, cfg: ConfigShapes, warnings: string[]): string[] {
  const out = new Set<string>();
  for (const m of group.members) {
    try {
      for (const u of resolveAia(m.id, m.aia, cfg.urls, cfg.cluster).crlDistributionPoints) out.add(shardUrl(u, shard));
    } catch (e) {
      warnings.push(`issuer ${m.id}: CRL distribution points left out of the shard CRLs: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  return [...out];
}

type CrlMeta = { issuerId: string; kind: string; number: number; maxSeq: number };

/** The stored CRL of a group's scope (its representative's row). */
export function storedOf(metas: CrlMeta[], group: CrlGroup, shard: number | null, kind: CrlKind): CrlMeta | undefined {
  const k = storedKind(kind, shard);
  return metas.find((r) => r.issuerId === group.representative.id && r.kind === k);
}

/** The highest number stored in D1 for a group's scope (complete and delta share the sequence). */
export function storedNumber(metas: CrlMeta[], group: CrlGroup, shard: number | null): number {
  const ids = new Set(group.members.map((m) => m.id));
  return Math.max(0, ...metas.filter((r) => ids.has(r.issuerId) && parseStoredKind(r.kind)?.shard === shard).map((r) => r.number));
}

/**
 * The targets of a build, and its kind: a delta build needs every target's complete CRL as its
 * base; lacking one (a new issuer or shard), the build is complete.
 */
export function planTargets(groups: CrlGroup[], scopes: (number | null)[], metas: CrlMeta[], requested: CrlKind, cfg: ConfigShapes, warnings: string[]): { kind: CrlKind; targets: Target[] } {
  const targets: Target[] = [];
  for (const group of groups) {
    for (const shard of scopes) {
      const idp = shard === null ? null : shardIdpUrls(group, shard, cfg, warnings);
      if (idp !== null && idp.length === 0) {
        if (shard === scopes.find((s) => s !== null)) warnings.push(`issuer ${group.representative.id}: no CRL distribution points configured; its shard CRLs are not built`);
        continue;
      }
      targets.push({ group, shard, writer: new RevokedListWriter(), baseSeq: 0, completeNumber: 0, idp });
    }
  }
  if (requested === "complete") return { kind: "complete", targets };
  for (const t of targets) {
    const base = storedOf(metas, t.group, t.shard, "complete");
    if (!base) return { kind: "complete", targets: targets.map((x) => ({ ...x, baseSeq: 0, completeNumber: 0 })) };
    t.baseSeq = base.maxSeq;
    t.completeNumber = base.number;
  }
  return { kind: "delta", targets };
}

async function stream(load: (after: number) => Promise<RevokedEntry[]>, from: number, place: (e: RevokedEntry) => void): Promise<void> {
  let after = from;
  for (;;) {
    const page = await load(after);
    for (const e of page) place(e);
    const last = page[page.length - 1];
    if (!last || page.length < PAGE) return;
    after = last.id;
  }
}

/**
 * Streams the revocations the targets need into their writers: every entry when a full CRL is
 * among them, else only the entries of the targets' shards, shard by shard. `route` names the
 * group an entry belongs to (null: none).
 */
export async function fillTargets(
  db: Db,
  mountId: string,
  kind: CrlKind,
  targets: Target[],
  maxSeq: number,
  route: (issuerId: string, serial: string) => CrlGroup | null,
): Promise<void> {
  if (targets.length === 0) return;
  const byKey = new Map(targets.map((t) => [counterKey(t), t]));
  const from = kind === "delta" ? Math.min(...targets.map((t) => t.baseSeq)) : 0;
  const place = (e: RevokedEntry) => {
    const g = route(e.issuerId, e.serial);
    if (!g) return;
    const scopes: (number | null)[] = e.crlShard === null ? [null] : [null, e.crlShard];
    for (const shard of scopes) {
      const t = byKey.get(counterKey({ group: g, shard }));
      if (!t || (kind === "delta" && e.id <= t.baseSeq)) continue;
      t.writer.add(e.serial, e.revocationTime, e.reason);
    }
  };
  if (kind === "delta" && targets.some((t) => t.shard === null)) {
    // Only the revocations since the oldest base: one walk of the primary key over that range
    // (a walk per shard would cost two queries per published shard, even for an empty delta).
    await stream((after) => listRevokedEntriesSince(db, mountId, after, maxSeq, PAGE), from, place);
    return;
  }
  if (targets.some((t) => t.shard === null)) {
    // Every entry, segment by segment (no shard, then each shard that has entries): each page is
    // an index range (revocation-store.ts listRevokedEntriesOfShard), so the build stays linear.
    // The full CRL lists them in that order, which is the sequence order on an unsharded mount.
    let segment: number | null = null;
    for (;;) {
      const s = segment;
      await stream((after) => listRevokedEntriesOfShard(db, mountId, s, after, maxSeq, PAGE), from, place);
      segment = await nextRevokedShard(db, mountId, s ?? -1);
      if (segment === null) return;
    }
  }
  for (const shard of new Set(targets.map((t) => t.shard ?? -1))) {
    await stream((after) => listRevokedEntriesOfShard(db, mountId, shard, after, maxSeq, PAGE), from, place);
  }
}
