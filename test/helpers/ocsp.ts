/**
 * An OCSP client for tests, built on @peculiar/asn1-ocsp (independent of the service's
 * hand-written encoder in src/engines/pki/x509/ocsp.ts): builds OCSPRequests (RFC 6960 §4.1) for a
 * certificate and its issuer, and parses and verifies OCSPResponses (§4.2).
 */
import {
  BasicOCSPResponse,
  CertID,
  OCSPRequest,
  OCSPResponse,
  Request as OcspSingleRequest,
  TBSRequest,
  id_pkix_ocsp_basic,
  id_pkix_ocsp_nonce,
} from "@peculiar/asn1-ocsp";
import { AsnConvert, OctetString } from "@peculiar/asn1-schema";
import { AlgorithmIdentifier, Certificate, Extension } from "@peculiar/asn1-x509";
import { x509 } from "./pki";

const HASH_OIDS = { "SHA-1": "1.3.14.3.2.26", "SHA-256": "2.16.840.1.101.3.4.2.1" } as const;
export type CertIdHash = keyof typeof HASH_OIDS;

function pemDer(pem: string): ArrayBuffer {
  return new x509.X509Certificate(pem).rawData;
}

/** A CertID for `serial` (INTEGER content bytes) under the issuer certificate `issuerPem`. */
export async function certId(issuerPem: string, serial: ArrayBuffer, hash: CertIdHash = "SHA-1"): Promise<CertID> {
  const issuer = AsnConvert.parse(pemDer(issuerPem), Certificate);
  const name = AsnConvert.serialize(issuer.tbsCertificate.subject);
  const key = issuer.tbsCertificate.subjectPublicKeyInfo.subjectPublicKey;
  return new CertID({
    hashAlgorithm: new AlgorithmIdentifier({ algorithm: HASH_OIDS[hash], parameters: null }),
    issuerNameHash: new OctetString(await crypto.subtle.digest(hash, name)),
    issuerKeyHash: new OctetString(await crypto.subtle.digest(hash, key)),
    serialNumber: serial,
  });
}

/** The serial INTEGER content of a certificate. */
export function serialOf(certPem: string): ArrayBuffer {
  return AsnConvert.parse(pemDer(certPem), Certificate).tbsCertificate.serialNumber;
}

export function nonceExtension(nonce: Uint8Array): Extension {
  return new Extension({ extnID: id_pkix_ocsp_nonce, critical: false, extnValue: new OctetString(AsnConvert.serialize(new OctetString(nonce))) });
}

/** DER OCSPRequest for the given CertIDs, with an optional nonce and extra request extensions. */
export function buildRequest(ids: CertID[], opts: { nonce?: Uint8Array; extensions?: Extension[] } = {}): Uint8Array<ArrayBuffer> {
  const exts = [...(opts.nonce ? [nonceExtension(opts.nonce)] : []), ...(opts.extensions ?? [])];
  const tbs = new TBSRequest({ requestList: ids.map((reqCert) => new OcspSingleRequest({ reqCert })), ...(exts.length ? { requestExtensions: exts } : {}) });
  return new Uint8Array(AsnConvert.serialize(new OCSPRequest({ tbsRequest: tbs })));
}

/** Request for one certificate issued by `issuerPem`. */
export async function requestFor(issuerPem: string, leafPem: string, opts: { hash?: CertIdHash; nonce?: Uint8Array } = {}): Promise<Uint8Array<ArrayBuffer>> {
  return buildRequest([await certId(issuerPem, serialOf(leafPem), opts.hash)], { nonce: opts.nonce });
}

export function toBase64(der: Uint8Array): string {
  let s = "";
  for (const b of der) s += String.fromCharCode(b);
  return btoa(s);
}

/** The raw TLVs inside a DER SEQUENCE (lengths up to 4 octets), for signature checks on exact bytes. */
function sequenceChildren(der: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  const header = (buf: Uint8Array, off: number) => {
    const first = buf[off + 1] ?? 0;
    if (first < 0x80) return { hl: 2, len: first };
    const n = first & 0x7f;
    let len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + (buf[off + 2 + i] ?? 0);
    return { hl: 2 + n, len };
  };
  const outer = header(der, 0);
  let off = outer.hl;
  while (off < outer.hl + outer.len) {
    const h = header(der, off);
    out.push(der.subarray(off, off + h.hl + h.len));
    off += h.hl + h.len;
  }
  return out;
}

export interface ParsedOcsp {
  /** OCSPResponseStatus (0 successful, 1 malformedRequest, 2 internalError, 6 unauthorized). */
  status: number;
  basic: BasicOCSPResponse | null;
  /** The exact signed bytes (tbsResponseData) and the signature. */
  tbsRaw: Uint8Array | null;
}

export function parseResponse(der: Uint8Array): ParsedOcsp {
  const res = AsnConvert.parse(der, OCSPResponse);
  if (!res.responseBytes) return { status: res.responseStatus, basic: null, tbsRaw: null };
  if (res.responseBytes.responseType !== id_pkix_ocsp_basic) throw new Error(`unexpected response type ${res.responseBytes.responseType}`);
  const inner = new Uint8Array(res.responseBytes.response.buffer);
  const basic = AsnConvert.parse(inner, BasicOCSPResponse);
  return { status: res.responseStatus, basic, tbsRaw: sequenceChildren(inner)[0] ?? null };
}

type ImportAlg = Parameters<SubtleCrypto["importKey"]>[2];
type SignAlg = Parameters<SubtleCrypto["verify"]>[0];

const SIG_ALGS: Record<string, { params: ImportAlg; sign: SignAlg; curve?: string }> = {
  "1.2.840.10045.4.3.2": { params: { name: "ECDSA", namedCurve: "P-256" }, sign: { name: "ECDSA", hash: "SHA-256" }, curve: "P-256" },
  "1.2.840.10045.4.3.3": { params: { name: "ECDSA", namedCurve: "P-384" }, sign: { name: "ECDSA", hash: "SHA-384" }, curve: "P-384" },
  "1.2.840.113549.1.1.11": { params: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, sign: { name: "RSASSA-PKCS1-v1_5" } },
  "1.2.840.113549.1.1.12": { params: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-384" }, sign: { name: "RSASSA-PKCS1-v1_5" } },
  "1.3.101.112": { params: { name: "Ed25519" }, sign: { name: "Ed25519" } },
};

/** Verifies the response signature with the public key of `signerPem`; throws on a mismatch. */
export async function verifySignature(parsed: ParsedOcsp, signerPem: string): Promise<string> {
  if (!parsed.basic || !parsed.tbsRaw) throw new Error("no BasicOCSPResponse");
  const oid = parsed.basic.signatureAlgorithm.algorithm;
  const alg = SIG_ALGS[oid];
  if (!alg) throw new Error(`unexpected signature algorithm ${oid}`);
  const cert = new x509.X509Certificate(signerPem);
  const key = await crypto.subtle.importKey("spki", cert.publicKey.rawData, alg.params, false, ["verify"]);
  let sig = new Uint8Array(parsed.basic.signature);
  if (alg.curve) sig = new Uint8Array(new x509.AsnEcSignatureFormatter().toWebSignature({ name: "ECDSA", namedCurve: alg.curve } as Parameters<x509.AsnEcSignatureFormatter["toWebSignature"]>[0], sig) ?? new ArrayBuffer(0));
  if (!(await crypto.subtle.verify(alg.sign, key, sig, parsed.tbsRaw))) throw new Error("OCSP response signature does not verify");
  return oid;
}

export { AsnConvert, Extension, OctetString };
