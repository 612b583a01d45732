/**
 * ACME revoke-cert (RFC 8555 §7.6): the certificate (base64url DER) is revoked when the request is
 * signed by the account that ordered it (`kid`), or by the certificate's own key (`jwk`). The
 * revocation itself is the PKI's (revocation/revoke.ts): the pki_revoked row, then the CRLs
 * rebuilt, so CRLs and OCSP show it like any other. The `reason` (RFC 5280 §5.3.1) is recorded
 * and written in the CRL entry (reasonCode); absent, it is unspecified (RFC 8555 §7.6) and the
 * entry has none. Refused (`badRevocationReason`): 7 (unused), 6 (certificateHold: an ACME
 * revocation is final) and 8 (removeFromCRL: delta CRLs only).
 */
import { importJWK, type JWK } from "jose";
import { base64ToBytes, base64UrlToBytes } from "../../../core/encoding";
import { revokeCertificate } from "../revocation/revoke";
import { getOrderBySerial } from "../storage/acme-store";
import { getRevoked } from "../storage/revocation-store";
import { getCertWithBody } from "../storage/store";
import { normalizeSerial } from "../x509/pem";
import { parseCertificate, type CertInfo } from "../x509/x509";
import type { AcmeReply, SignedRequest } from "./context";
import { acmeError } from "./problem";

const ALLOWED_REASONS: readonly number[] = [0, 1, 2, 3, 4, 5, 9, 10];

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Whether the JWS key is the certificate's key (its SPKI, as WebCrypto exports it). */
async function isCertKey(jwk: Record<string, unknown>, alg: string, cert: CertInfo): Promise<boolean> {
  try {
    const key = await importJWK(jwk as JWK, alg, { extractable: true });
    if (key instanceof Uint8Array) return false;
    // exportKey's "spki" format always yields an ArrayBuffer (the JsonWebKey overload is "jwk").
    const spki = (await crypto.subtle.exportKey("spki", key)) as ArrayBuffer;
    return sameBytes(new Uint8Array(spki), cert.spki);
  } catch {
    return false;
  }
}

export async function revokeCert(s: SignedRequest): Promise<AcmeReply> {
  const p = s.payload;
  if (!p || typeof p.certificate !== "string" || !/^[A-Za-z0-9_-]+$/.test(p.certificate)) {
    throw acmeError("malformed", "'certificate' must be the base64url DER of the certificate to revoke");
  }
  if (p.reason !== undefined && !ALLOWED_REASONS.includes(p.reason as number)) {
    throw acmeError("badRevocationReason", `'reason' must be an RFC 5280 reason code this server accepts: ${ALLOWED_REASONS.join(", ")}`);
  }
  let cert: CertInfo;
  try {
    cert = parseCertificate(base64UrlToBytes(p.certificate));
  } catch {
    throw acmeError("malformed", "'certificate' cannot be parsed as an X.509 certificate");
  }
  const serial = normalizeSerial(cert.serialHex) ?? "";
  const { db, mount } = s.ctx;
  const stored = serial ? await getCertWithBody(db, s.ctx.env.CERTS, mount.id, serial) : null;
  if (!stored || !sameBytes(base64ToBytes(stored.der), cert.der)) throw acmeError("unauthorized", "this mount did not issue the certificate");

  if (s.account) {
    const order = await getOrderBySerial(db, mount.id, serial);
    if (!order || order.accountId !== s.account.id) throw acmeError("unauthorized", "the account did not order this certificate; sign with the certificate's key instead");
  } else if (!(await isCertKey(s.jwk, s.jws.header.alg, cert))) {
    throw acmeError("unauthorized", "the 'jwk' is not the certificate's public key");
  }
  if (await getRevoked(db, mount.id, serial)) throw acmeError("alreadyRevoked", `certificate ${serial} is already revoked`);
  const reply = await revokeCertificate(s.ctx, { serialNumber: serial, certificate: undefined, privateKey: undefined, withKey: false, reason: typeof p.reason === "number" ? p.reason : 0 });
  if (reply.data === null || reply.data === undefined) throw acmeError("unauthorized", (reply.warnings ?? []).join("; ") || `certificate ${serial} cannot be revoked`);
  return { status: 200 };
}
