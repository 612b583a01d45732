/**
 * The PKI engine's gauges for sys/metrics (docs/operations.md "Metrics"), read with four aggregate
 * statements in one D1 batch: certificates by mount, issuer and time to expiry (a GROUP BY over
 * the covering index pki_certs_inv_issuer, never the rows' DER), revocations by mount and issuer,
 * each issuer's notAfter, and each issuer's CRLs' thisUpdate. Nothing is scanned in JavaScript.
 */
import type { Db } from "../../../core/db/client";
import { gauge, namespaceLabel, type GaugeFamily, type MetricsContext } from "../../../core/metrics";
import { ID_OF } from "./cert-keys";

/** The expiry buckets, by seconds left: already expired, under a day, a week, 30 days, later. */
const DAY = 86_400;
export const EXPIRY_BUCKETS = ["expired", "lt_24h", "lt_7d", "lt_30d", "later"] as const;

interface CertCountRow {
  mount_id: string;
  issuer_id: string;
  expiry: string;
  n: number;
}
interface RevokedRow {
  mount_id: string;
  issuer_id: string;
  n: number;
}
interface IssuerRow {
  mount_id: string;
  id: string;
  name: string;
  not_after: number;
}
interface CrlRow {
  mount_id: string;
  issuer_id: string;
  kind: string;
  this_update: number;
}

/** pki_certs.not_after is in seconds, pki_issuers.not_after and pki_crls.this_update in milliseconds. */
async function readAggregates(db: Db, nowSeconds: number) {
  const c = db.$client;
  const bucket = `CASE WHEN not_after <= ?1 THEN 'expired' WHEN not_after <= ?1 + ${DAY} THEN 'lt_24h'
    WHEN not_after <= ?1 + ${7 * DAY} THEN 'lt_7d' WHEN not_after <= ?1 + ${30 * DAY} THEN 'lt_30d' ELSE 'later' END`;
  const [certs, revoked, issuers, crls] = await c.batch([
    c.prepare(
      `SELECT ${ID_OF("g.mount_no")} AS mount_id, ${ID_OF("g.issuer_no")} AS issuer_id, g.expiry, g.n
       FROM (SELECT mount_no, issuer_no, ${bucket} AS expiry, count(*) AS n FROM pki_certs GROUP BY mount_no, issuer_no, expiry) g`,
    ).bind(nowSeconds),
    c.prepare("SELECT mount_id, issuer_id, count(*) AS n FROM pki_revoked GROUP BY mount_id, issuer_id"),
    c.prepare("SELECT mount_id, id, name, not_after FROM pki_issuers"),
    // The full CRLs only: up to 256 shards per issuer would make 512 series each (docs/pki-revocation-crl.md "Sharded CRLs").
    c.prepare("SELECT mount_id, issuer_id, kind, this_update FROM pki_crls WHERE kind IN ('complete', 'delta')"),
  ]);
  return {
    certs: (certs?.results ?? []) as CertCountRow[],
    revoked: (revoked?.results ?? []) as RevokedRow[],
    issuers: (issuers?.results ?? []) as IssuerRow[],
    crls: (crls?.results ?? []) as CrlRow[],
  };
}

/** The gauges of every PKI mount (labels: namespace, mount, issuer id, and what each counts by). */
export async function pkiMetrics(ctx: MetricsContext): Promise<GaugeFamily[]> {
  const { certs, revoked, issuers, crls } = await readAggregates(ctx.db, Math.floor(ctx.now / 1000));
  const where = (mountId: string) => {
    const p = ctx.mountPlace(mountId);
    return { namespace: namespaceLabel(p.namespace), mount: p.mount };
  };
  return [
    gauge(
      "lanyard.pki.certificates",
      "Stored certificates by mount, issuer and time to expiry (expired, lt_24h, lt_7d, lt_30d, later); revoked ones included.",
      certs.map((r) => ({ labels: { ...where(r.mount_id), issuer: r.issuer_id, expiry: r.expiry }, value: r.n })),
    ),
    gauge(
      "lanyard.pki.certificates.revoked",
      "Revoked certificates (entries of the CRLs) by mount and issuer.",
      revoked.map((r) => ({ labels: { ...where(r.mount_id), issuer: r.issuer_id }, value: r.n })),
    ),
    gauge(
      "lanyard.pki.issuer.expiry_seconds",
      "Seconds until each issuer's certificate expires (negative once expired).",
      issuers.map((r) => ({ labels: { ...where(r.mount_id), issuer: r.id, issuer_name: r.name }, value: Math.round((r.not_after - ctx.now) / 1000) })),
    ),
    gauge(
      "lanyard.pki.crl.age_seconds",
      "Seconds since the thisUpdate of each issuer's last built CRL (kind complete or delta).",
      crls.map((r) => ({ labels: { ...where(r.mount_id), issuer: r.issuer_id, kind: r.kind }, value: Math.max(0, Math.round((ctx.now - r.this_update) / 1000)) })),
    ),
  ];
}
