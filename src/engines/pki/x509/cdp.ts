/**
 * The URIs of a certificate's CRL Distribution Points extension (RFC 5280 §4.2.1.13): how a
 * revocation finds the CRL shard of a certificate the mount signed but did not store
 * (docs/pki-revocation-crl.md "Sharded CRLs").
 */
import * as x509 from "@peculiar/x509";

/** The fullName URIs of every distribution point, in order; [] without the extension or on a parse error. */
export function crlDistributionPointUrls(der: Uint8Array<ArrayBuffer>): string[] {
  try {
    const ext = new x509.X509Certificate(der).getExtension(x509.CRLDistributionPointsExtension);
    if (!ext) return [];
    const out: string[] = [];
    for (const dp of ext.distributionPoints) {
      for (const name of dp.distributionPoint?.fullName ?? []) if (name.uniformResourceIdentifier) out.push(name.uniformResourceIdentifier);
    }
    return out;
  } catch {
    return [];
  }
}
