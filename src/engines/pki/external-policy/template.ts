/**
 * The certificate template an external policy service answers with (docs/pki-external-policy.md "The template"): what is
 * taken from it and what Lanyard replaces. Pure functions over DER.
 *
 * Taken: subject, validity, every extension (SANs, key usage, EKU, policies, custom ones …) in
 * the template's order. Replaced, as upstream's protocol document says: the signature (made by
 * the signing issuer; a signature algorithm the issuer can produce is kept), the issuer DN, the
 * serial number (from the mount's Authority), the Authority Key Identifier (the issuer's SKI,
 * RFC 5280 §4.2.1.1) and the AIA / CRL distribution points / FreshestCRL (the issuer's or the
 * mount's URLs, Vault API /pki/config/urls). Also replaced: the public key, which is always the requester's (the CSR's,
 * or the key generated here for issue), so a template can never bind another key.
 */
import { ApiError } from "../../../core/errors";
import { OID, aiaExtension, akiExtension, distributionPointsExtension, skiExtension, type ExtensionDer, type KeyType } from "../x509/asn1";
import { DerError, TAG, children, decodeOid, expectTag, parse, type Node } from "../x509/der";
import { decodePemBlocks } from "../x509/pem";
import type { AiaUrls } from "../issuance/profile";
import type { IssuanceMode } from "./client";
import { X509Error, parseCertificate } from "../x509/x509";

export interface Template {
  subject: Uint8Array<ArrayBuffer>;
  notBefore: Date;
  notAfter: Date;
  spki: Uint8Array<ArrayBuffer>;
  extensions: ExtensionDer[];
  /** The template's signature AlgorithmIdentifier: its OID and parameters. */
  signatureOid: string;
  signatureParams: Node | undefined;
  isCa: boolean;
  pathLen: number | undefined;
  keyUsage: number[] | null;
}

const badTemplate = (msg: string) => new ApiError(502, `external policy service: the certificate template ${msg}`);

const OID_SKI = "2.5.29.14";
const OID_AKI = "2.5.29.35";
/** Extensions Lanyard writes itself (docs/pki-external-policy.md "The template"): dropped from the template. */
const REPLACED = new Set<string>([OID_AKI, OID.authorityInfoAccess, OID.crlDistributionPoints, OID.freshestCrl]);

/** Parses the PEM template; every failure is the service's (502), with what was wrong. */
export function readTemplate(pem: string): Template {
  let der: Uint8Array<ArrayBuffer>;
  try {
    const blocks = decodePemBlocks(pem);
    if (blocks.length !== 1 || blocks[0]?.label !== "CERTIFICATE") throw new X509Error("must be exactly one PEM CERTIFICATE block");
    der = blocks[0].der;
  } catch (e) {
    throw badTemplate(`is not usable: ${e instanceof Error ? e.message : "invalid PEM"}`);
  }
  try {
    const info = parseCertificate(der);
    const [tbs, sigAlg] = children(expectTag(parse(der), TAG.SEQUENCE, "certificate"));
    const [sigOid, sigParams] = children(expectTag(sigAlg, TAG.SEQUENCE, "signature algorithm"));
    const extsNode = children(expectTag(tbs, TAG.SEQUENCE, "TBSCertificate")).find((n) => n.tag === 0xa3);
    const extensions: ExtensionDer[] = [];
    const seen = new Set<string>();
    if (extsNode) {
      for (const ext of children(expectTag(children(extsNode)[0], TAG.SEQUENCE, "extensions"))) {
        const parts = children(expectTag(ext, TAG.SEQUENCE, "extension"));
        const id = decodeOid(expectTag(parts[0], TAG.OID, "extension id").content);
        const critical = parts[1]?.tag === TAG.BOOLEAN && (parts[1].content[0] ?? 0) !== 0;
        const value = expectTag(parts[parts.length - 1], TAG.OCTET_STRING, "extension value").content;
        // RFC 5280 §4.2: a certificate must not include more than one instance of an extension.
        if (seen.has(id)) throw new X509Error(`has the extension ${id} twice`);
        seen.add(id);
        extensions.push({ oid: id, critical, value: value.slice() });
      }
    }
    return {
      subject: info.subject,
      notBefore: info.notBefore,
      notAfter: info.notAfter,
      spki: info.spki,
      extensions,
      signatureOid: decodeOid(expectTag(sigOid, TAG.OID, "signature algorithm").content),
      signatureParams: sigParams,
      isCa: info.isCa,
      pathLen: info.pathLen,
      keyUsage: info.keyUsage,
    };
  } catch (e) {
    if (e instanceof X509Error || e instanceof DerError) throw badTemplate(`could not be parsed: ${e.message}`);
    throw e;
  }
}

const KU_CERT_SIGN = 5;

/**
 * What the endpoint may produce: issue and sign make leaves (a CA template there is refused; the
 * sign-intermediate endpoint exists for CAs), sign-intermediate makes CA certificates only.
 */
export function checkTemplateKind(t: Template, mode: IssuanceMode): void {
  const signsCerts = t.keyUsage?.includes(KU_CERT_SIGN) === true;
  if (mode !== "ica" && (t.isCa || signsCerts)) {
    throw badTemplate("describes a CA certificate; external-policy/issue and external-policy/sign issue leaf certificates only (use external-policy/sign-intermediate)");
  }
  if (mode === "ica" && !t.isCa) {
    throw badTemplate("is not a CA certificate (basic constraints CA:true), which external-policy/sign-intermediate requires");
  }
}

export interface ExtensionInputs {
  mode: IssuanceMode;
  /** SKI of the requester's key (RFC 5280 §4.2.1.2 method 1). */
  ski: Uint8Array;
  /** Whether the template carried another public key than the requester's. */
  keyReplaced: boolean;
  issuerSki: Uint8Array;
  aia: AiaUrls;
}

/**
 * The extensions of the certificate to sign: the template's, minus the replaced ones, then the
 * AKI and the URL extensions. A template SKI describing another key is recomputed; a CA template
 * without an SKI gets one (as Go's certificate builder does for CAs, RFC 5280 §4.2.1.2 "MUST").
 */
export function templateExtensions(t: Template, x: ExtensionInputs): ExtensionDer[] {
  const out: ExtensionDer[] = [];
  let hasSki = false;
  for (const e of t.extensions) {
    if (REPLACED.has(e.oid)) continue;
    if (e.oid === OID_SKI) {
      hasSki = true;
      out.push(x.keyReplaced ? skiExtension(x.ski) : e);
      continue;
    }
    out.push(e);
  }
  if (!hasSki && x.mode === "ica") out.push(skiExtension(x.ski));
  out.push(akiExtension(x.issuerSki));
  const urls = [
    aiaExtension(x.aia.issuingCertificates, x.aia.ocspServers),
    distributionPointsExtension(x.aia.crlDistributionPoints, "crl"),
    distributionPointsExtension(x.aia.deltaCrlDistributionPoints, "delta"),
  ];
  for (const u of urls) if (u) out.push(u);
  return out;
}

const RSA_HASH: Record<string, number> = {
  "1.2.840.113549.1.1.11": 256,
  "1.2.840.113549.1.1.12": 384,
  "1.2.840.113549.1.1.13": 512,
};
const ECDSA_HASH: Record<string, string> = {
  "1.2.840.10045.4.3.2": "SHA-256",
  "1.2.840.10045.4.3.3": "SHA-384",
  "1.2.840.10045.4.3.4": "SHA-512",
};
const DIGEST_BITS: Record<string, number> = {
  "2.16.840.1.101.3.4.2.1": 256,
  "2.16.840.1.101.3.4.2.2": 384,
  "2.16.840.1.101.3.4.2.3": 512,
};
const RSA_PSS = "1.2.840.113549.1.1.10";

/** The hash of RSASSA-PSS-params (RFC 4055 §3.1): [0] hashAlgorithm, SHA-1 when absent. */
function pssHashBits(params: Node | undefined): number | undefined {
  if (!params || params.tag !== TAG.SEQUENCE) return undefined;
  const hashField = children(params).find((n) => n.tag === 0xa0);
  if (!hashField) return undefined;
  const alg = children(hashField)[0];
  const id = alg ? children(alg)[0] : undefined;
  return id && id.tag === TAG.OID ? DIGEST_BITS[decodeOid(id.content)] : undefined;
}

export interface SignatureChoice {
  signatureBits: number;
  usePss: boolean;
  /** ECDSA hash to use instead of the curve's default. */
  ecdsaHash?: string;
}

/**
 * Keeps the template's signature algorithm when the issuer's key can produce it (Vault's CIEPS
 * docs: "a compatible signature algorithm is kept"); otherwise the issuer's default (SHA-256 for
 * RSA, the curve's hash for ECDSA).
 */
export function signatureChoice(t: Template, issuerKeyType: KeyType): SignatureChoice {
  if (issuerKeyType === "rsa") {
    const bits = RSA_HASH[t.signatureOid];
    if (bits) return { signatureBits: bits, usePss: false };
    if (t.signatureOid === RSA_PSS) {
      const pss = pssHashBits(t.signatureParams);
      if (pss) return { signatureBits: pss, usePss: true };
    }
    return { signatureBits: 0, usePss: false };
  }
  if (issuerKeyType === "ec") {
    const hash = ECDSA_HASH[t.signatureOid];
    return hash ? { signatureBits: 0, usePss: false, ecdsaHash: hash } : { signatureBits: 0, usePss: false };
  }
  return { signatureBits: 0, usePss: false };
}

const iso = (ms: number) => new Date(ms).toISOString().replace(".000Z", "Z");

/**
 * The template's validity against the signing issuer: its leaf_not_after_behavior for leaves
 * (Vault API /pki/issuer/:issuer_ref), truncation for intermediates (as sign-intermediate does here).
 */
export function templateValidity(t: Template, issuerNotAfter: number, behavior: string, now: number): { notBefore: Date; notAfter: Date; warnings: string[] } {
  const notBefore = t.notBefore.getTime();
  let notAfter = t.notAfter.getTime();
  const warnings: string[] = [];
  if (notBefore >= notAfter) throw badTemplate(`has a notBefore (${iso(notBefore)}) that is not before its notAfter (${iso(notAfter)})`);
  if (notAfter <= now) throw badTemplate(`has already expired (notAfter ${iso(notAfter)})`);
  if (notAfter > issuerNotAfter) {
    if (behavior === "err") {
      throw new ApiError(
        400,
        `cannot satisfy request, as the template's notAfter of ${iso(notAfter)} is beyond the expiration of the CA certificate at ${iso(issuerNotAfter)}`,
      );
    }
    if (behavior === "truncate") {
      if (issuerNotAfter <= now) throw new ApiError(400, `cannot satisfy request, as NotAfter date ${iso(issuerNotAfter)} is in the past`);
      notAfter = issuerNotAfter;
      warnings.push(`the template's notAfter was truncated to the issuer's expiration at ${iso(issuerNotAfter)}`);
    }
  }
  if (notBefore >= notAfter) throw new ApiError(400, `cannot satisfy request, as the template's notBefore ${iso(notBefore)} is not before the issuer's expiration`);
  return { notBefore: new Date(notBefore), notAfter: new Date(notAfter), warnings };
}
