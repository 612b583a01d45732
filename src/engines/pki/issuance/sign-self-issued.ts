/**
 * root/sign-self-issued and issuer/:ref/sign-self-issued (Vault API /pki/root/sign-self-issued): an issuer
 * of the mount signs a self-issued CA certificate as it is — the root-rolling cross-signature.
 * Minimal validation (a CA, actually self-issued); the TBSCertificate keeps every byte except
 * the issuer DN (the signer's subject), the authority key ID (the signer's SKI), the signature
 * algorithm and, when the mount or issuer has URLs configured, the CRL distribution points and
 * authority information access (Vault API /pki/config/urls). Upstream neither stores the result nor
 * changes its serial number, and neither does this.
 */
import { badRequest } from "../../../core/errors";
import { defineFields, type FieldValues } from "../../../core/fields";
import { base64ToBytes } from "../../../core/encoding";
import { aiaExtension, akiExtension, distributionPointsExtension, publicKeyFacts, type ExtensionDer, type PublicKeyFacts } from "../x509/asn1";
import { certDerFromPem } from "../ca/issuers";
import { issuerKeyId, issuerSigner, signingIssuer, type IssueContext, type SignatureChoice } from "./pipeline";
import { PemError, decodePemBlocks, toPem } from "../x509/pem";
import { resolveAia } from "./profile";
import { encodeTbs, readTbs, replaceExtensions, type TbsParts } from "../x509/resign";
import { parseCertificate, signTbsCertificate, type CertInfo } from "../x509/x509";

export const signSelfIssuedFields = defineFields({
  issuer_ref: { type: "string", description: "Signing issuer (per-issuer path).", default: "default" },
  certificate: { type: "string", description: "PEM of the self-issued CA certificate to sign.", default: "" },
  require_matching_certificate_algorithms: {
    type: "bool",
    description: "Refuse when the signer's public key algorithm differs from the certificate's.",
    default: false,
  },
});

/** The one CERTIFICATE block of the field, parsed; 400 naming the field otherwise. */
function submittedCertificate(text: string): { info: CertInfo; parts: TbsParts } {
  if (text.trim() === "") throw badRequest("certificate: a PEM-encoded self-issued certificate is required");
  let blocks;
  try {
    blocks = decodePemBlocks(text).filter((b) => b.label === "CERTIFICATE");
  } catch (e) {
    throw badRequest(`certificate: ${e instanceof PemError ? e.message : "invalid PEM data"}`);
  }
  if (blocks.length === 0) throw badRequest("certificate: certificate could not be PEM-decoded");
  if (blocks.length > 1) throw badRequest(`certificate: ${blocks.length} certificates found in PEM file, expected 1`);
  const der = blocks[0]?.der ?? new Uint8Array(0);
  try {
    return { info: parseCertificate(der), parts: readTbs(der) };
  } catch (e) {
    // Whatever the parsers reject is the client's input, never a server fault.
    throw badRequest(`certificate: error parsing certificate: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/**
 * Hash and padding for the new signature. Upstream signs with the submitted certificate's own
 * signature algorithm when the key types match (Go keeps the template's), else with the
 * signer's default (SHA-256 for RSA). Only RSA signers have a choice to keep.
 */
function signatureChoice(info: CertInfo, certKey: PublicKeyFacts, signerKey: PublicKeyFacts): SignatureChoice {
  if (signerKey.type !== "rsa" || certKey.type !== "rsa") return { signatureBits: 0, usePss: false };
  const m = /^SHA(256|384|512)WithRSA(PSS)?$/.exec(info.signatureAlgorithm);
  return m ? { signatureBits: Number(m[1]), usePss: m[2] === "PSS" } : { signatureBits: 0, usePss: false };
}

export async function signSelfIssued(ctx: IssueContext, f: FieldValues<typeof signSelfIssuedFields>, issuerRef: string) {
  const { info, parts } = submittedCertificate(f.certificate);
  // Vault API /pki/root/sign-self-issued: "it must be a CA certificate and actually self-issued".
  if (!info.isCa) throw badRequest("certificate: given certificate is not a CA certificate");
  if (!equalBytes(parts.subject.raw, parts.issuer.raw)) throw badRequest("certificate: given certificate is not self-issued");
  let certKey: PublicKeyFacts;
  try {
    certKey = await publicKeyFacts(info.spki);
  } catch (e) {
    throw badRequest(`certificate: ${e instanceof Error ? e.message : "unsupported public key"}`);
  }

  const { issuer, key, cfg } = await signingIssuer(ctx, issuerRef);
  const issuerSpki = base64ToBytes(issuer.publicKey);
  const signerKey = await publicKeyFacts(issuerSpki);
  if (signerKey.type !== certKey.type && f.require_matching_certificate_algorithms) {
    throw badRequest(
      `require_matching_certificate_algorithms: the certificate's public key type (${certKey.type}) and the signing issuer's (${signerKey.type}) do not match; set it to false or sign with a matching issuer`,
    );
  }

  const aia = resolveAia(issuer.id, issuer.aia, cfg.urls, cfg.cluster);
  const changed: ExtensionDer[] = [akiExtension(await issuerKeyId(issuer))];
  // "if set, distribution points": only URLs that are configured replace the certificate's.
  const crl = distributionPointsExtension(aia.crlDistributionPoints, "crl");
  const delta = distributionPointsExtension(aia.deltaCrlDistributionPoints, "delta");
  const access = aiaExtension(aia.issuingCertificates, aia.ocspServers);
  for (const e of [crl, delta, access]) if (e) changed.push(e);

  // The pipeline's signer stage; the rest is DER surgery on the submitted TBS (x509/resign.ts):
  // no new serial, validity or record (upstream stores nothing here either).
  const signer = await issuerSigner(ctx.env, issuer, key, signatureChoice(info, certKey, signerKey));
  const issuerSubject = base64ToBytes(issuer.subjectDer);
  const extensions = replaceExtensions(parts.extensions, changed);
  const der = await signTbsCertificate((algorithm) => encodeTbs(parts, { algorithm, issuer: issuerSubject, extensions }), signer);
  return {
    data: {
      certificate: toPem("CERTIFICATE", der),
      issuing_ca: toPem("CERTIFICATE", certDerFromPem(issuer.certificate)),
    },
  };
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
