/**
 * CRL shards (docs/pki-revocation-crl.md "Sharded CRLs"): with config/crl shard_count N > 1, each
 * new end-entity certificate is assigned shard (serial mod N) when it is signed, names that shard's
 * URL in its CRL Distribution Points (RFC 5280 §4.2.1.13), and keeps that shard for life: the
 * number is stored with its row (pki_certs.crl_shard) and copied onto its revocation entry, so
 * changing N later never moves it (as Let's Encrypt's Boulder assigns shards at issuance).
 *
 * Invariants:
 * - A certificate has a shard exactly when its CDP names a shard URL: shard_count > 1, the issuer
 *   has CRL distribution points configured, and nothing else wrote the extension (a sign-verbatim
 *   CSR's own CDP is kept, and the certificate then has no shard).
 * - A shard URL is a configured CRL (or delta CRL) distribution point with `/shard/<n>` appended;
 *   the shard CRL's Issuing Distribution Point names exactly those URLs, byte for byte, because
 *   relying parties (OpenSSL among them) match the two names exactly (RFC 5280 §6.3.3 (b)).
 * - Shards 0 … published_shards−1 are published; published_shards only grows (config/crl).
 */
import type { AiaUrls } from "../issuance/profile";
import type { CrlKind } from "../storage/revocation-store";

/** The shard of a serial (hex, colons allowed) among `count` shards: its value modulo count. */
export function shardOf(serialHex: string, count: number): number {
  const hex = serialHex.replaceAll(":", "").replaceAll("-", "");
  return Number(BigInt(`0x${hex === "" ? "0" : hex}`) % BigInt(count));
}

/** A distribution point URL for shard `n`: the configured one with `/shard/<n>` appended. */
export function shardUrl(url: string, shard: number): string {
  return `${url.replace(/\/+$/, "")}/shard/${shard}`;
}

/** The AIA URLs of a certificate in `shard` (null: the configured URLs, unchanged). */
export function shardAia(aia: AiaUrls, shard: number | null): AiaUrls {
  if (shard === null) return aia;
  return {
    ...aia,
    crlDistributionPoints: aia.crlDistributionPoints.map((u) => shardUrl(u, shard)),
    deltaCrlDistributionPoints: aia.deltaCrlDistributionPoints.map((u) => shardUrl(u, shard)),
  };
}

/**
 * How many shards a certificate signed now is spread over: config/crl shard_count when it will
 * name a shard (an end-entity certificate whose CDP this mount writes, with URLs configured), else
 * 1 (no shard).
 */
export function shardCountFor(shardCount: number, aia: AiaUrls, opts: { ca: boolean; ownCdp?: boolean }): number {
  if (opts.ca || opts.ownCdp || aia.crlDistributionPoints.length === 0) return 1;
  return shardCount;
}

/** The pki_crls kind of a CRL: "complete"/"delta" for the full CRL, "shard:<n>:<kind>" for a shard. */
export function storedKind(kind: CrlKind, shard: number | null): string {
  return shard === null ? kind : `shard:${shard}:${kind}`;
}

/** The scope and kind of a stored pki_crls kind (the inverse of storedKind); null when unknown. */
export function parseStoredKind(stored: string): { kind: CrlKind; shard: number | null } | null {
  if (stored === "complete" || stored === "delta") return { kind: stored, shard: null };
  const m = /^shard:(\d+):(complete|delta)$/.exec(stored);
  if (!m) return null;
  return { kind: m[2] as CrlKind, shard: Number(m[1]) };
}

/**
 * The shard a certificate's CDP URLs name (one of `configured` + `/shard/<n>`, n < published), or
 * null: how a revocation places a certificate the mount signed without storing it.
 */
export function shardNamedBy(certUrls: string[], configured: string[], published: number): number | null {
  for (const url of certUrls) {
    const m = /\/shard\/(\d+)$/.exec(url);
    if (!m) continue;
    const n = Number(m[1]);
    if (n < published && configured.some((c) => shardUrl(c, n) === url)) return n;
  }
  return null;
}
