/**
 * The PKI secret's Revoke callback (OpenBao builtin/logical/pki/secret_certs.go; docs/leases.md): what
 * sys/leases/revoke, revoke-prefix and a lease's expiry do to a certificate issued with
 * `generate_lease`. It goes through the same revocation as POST revoke (revoke.ts), so the
 * pki_revoked row, the CRLs and OCSP all reflect it. As upstream:
 * - a certificate no longer stored (tidied, or the lease names none) is a success;
 * - a CA certificate (an issuer of the mount) is not revoked;
 * - an already revoked certificate keeps its revocation time;
 * - an expired one is not added to the CRL unless config/crl allow_expired_cert_revocation.
 * The sys endpoint answers 204 whatever happens here, so warnings stay server-side.
 */
import { ApiError } from "../../../core/errors";
import type { LeaseRow } from "../../../core/lease-store";
import type { IssueContext } from "../issuance/pipeline";
import { getCert } from "../storage/store";
import { normalizeSerial } from "../x509/pem";
import { revokeCertificate } from "./revoke";

/** The lease's internal data, as upstream's InternalData: the serial and the secret type. */
export function certLeaseData(serialNumber: string): Record<string, string> {
  return { secret_type: "pki", serial_number: serialNumber };
}

export async function revokeCertLease(ctx: IssueContext, lease: LeaseRow): Promise<void> {
  const serial = normalizeSerial(lease.internalData.serial_number ?? "");
  if (!serial || !(await getCert(ctx.db, ctx.mount.id, serial))) return;
  try {
    await revokeCertificate(ctx, { serialNumber: serial, certificate: undefined, privateKey: undefined, withKey: false });
  } catch (e) {
    // The one refusal for a stored serial: an issuer's own certificate (upstream: "CA, no-op").
    if (e instanceof ApiError && e.status === 400 && e.message.startsWith("adding issuer")) return;
    throw e;
  }
}
