/**
 * OCSP (RFC 6960) as pure functions: parse an OCSPRequest, compute the CertID hashes of an
 * issuer, and build the (signed) OCSPResponse. No storage and no HTTP here: the route
 * (src/engines/pki/routes/ocsp.ts) reads the mount's state and decides who signs what
 * (docs/pki-ocsp.md).
 *
 * Everything is hand-encoded with src/engines/pki/x509/der.ts: a response is a handful of TLVs around one
 * signature, and the generic ASN.1 schema encoder would cost more than the signature itself.
 * The module-level caches hold only values derived from immutable inputs: CertID
 * hashes keyed by the bytes they are computed from.
 */
import { BoundedCache } from "../../../core/bounded-cache";
import { base64ToBytes } from "../../../core/encoding";
import { TAG, children, concat, ctxCons, decodeOid, expectTag, oid, octets, parse, seq, tlv, type Node } from "./der";
import { bytesColonHex } from "./pem";

/** OCSPResponseStatus (RFC 6960 §4.2.1). */
export const OcspStatus = {
  successful: 0,
  malformedRequest: 1,
  internalError: 2,
  tryLater: 3,
  sigRequired: 5,
  unauthorized: 6,
} as const;
export type OcspStatusCode = (typeof OcspStatus)[keyof typeof OcspStatus];

/** RFC 6960 §4.1.1 and §4.4.1, RFC 8954. */
const OID_NONCE = "1.3.6.1.5.5.7.48.1.2";
/** id-pkix-ocsp-basic (RFC 6960 §4.2.1). */
const OID_BASIC = "1.3.6.1.5.5.7.48.1.1";
const TAG_ENUMERATED = 0x0a;

export type OcspHash = "SHA-1" | "SHA-256" | "SHA-384" | "SHA-512";

/** Hash algorithms a CertID may use, with their output sizes (RFC 6960 §4.1.1 allows any). */
const HASHES: Record<string, { name: OcspHash; size: number }> = {
  "1.3.14.3.2.26": { name: "SHA-1", size: 20 },
  "2.16.840.1.101.3.4.2.1": { name: "SHA-256", size: 32 },
  "2.16.840.1.101.3.4.2.2": { name: "SHA-384", size: 48 },
  "2.16.840.1.101.3.4.2.3": { name: "SHA-512", size: 64 },
};

/** The request limit: under 2048 bytes (upstream's maximumRequestSize, OpenBao path_ocsp.go). */
export const MAX_OCSP_REQUEST_BYTES = 2048;

/** Why a request could not be understood: always answered with malformedRequest. */
export class OcspRequestError extends Error {}

/** One CertID of the request (RFC 6960 §4.1.1). */
export interface OcspCertId {
  hash: OcspHash;
  issuerNameHash: Uint8Array<ArrayBuffer>;
  issuerKeyHash: Uint8Array<ArrayBuffer>;
  /** The serial as colon lowercase hex of its minimal big-endian bytes, as Vault writes serial_number. */
  serial: string;
  /** The CertID exactly as the client sent it: the response repeats it (§4.2.1 SingleResponse). */
  der: Uint8Array<ArrayBuffer>;
}

export interface OcspRequest {
  certIds: OcspCertId[];
  /** The whole nonce Extension as sent (RFC 8954 §2.1), echoed in the response; null when absent. */
  nonce: Uint8Array<ArrayBuffer> | null;
}

function fail(what: string): never {
  throw new OcspRequestError(what);
}

/** Reads a DER value with the parser's errors turned into OcspRequestError. */
function parseDer(der: Uint8Array<ArrayBuffer>): Node {
  try {
    return parse(der);
  } catch (e) {
    throw new OcspRequestError(e instanceof Error ? e.message : "undecodable DER");
  }
}

function kids(node: Node): Node[] {
  try {
    return children(node);
  } catch (e) {
    throw new OcspRequestError(e instanceof Error ? e.message : "undecodable DER");
  }
}

function want(node: Node | undefined, tag: number, what: string): Node {
  if (!node || node.tag !== tag) fail(`malformed ${what}`);
  return node;
}

/** "00:ab:…" from an INTEGER's content: leading zero bytes dropped, as stored serials are. */
export function serialFromInteger(content: Uint8Array): string {
  let start = 0;
  while (start < content.length - 1 && content[start] === 0) start++;
  return bytesColonHex(content.subarray(start));
}

function parseCertId(node: Node): OcspCertId {
  const [alg, nameHash, keyHash, serial, extra] = kids(want(node, TAG.SEQUENCE, "CertID"));
  if (extra) fail("malformed CertID: unexpected trailing field");
  const [algOid, params, algExtra] = kids(want(alg, TAG.SEQUENCE, "CertID hashAlgorithm"));
  // AlgorithmIdentifier parameters for the SHA family are absent or NULL (RFC 5754 §2).
  if (algExtra || (params && (params.tag !== TAG.NULL || params.content.length !== 0))) fail("malformed CertID hashAlgorithm parameters");
  const oidText = decodeOid(want(algOid, TAG.OID, "CertID hashAlgorithm").content);
  const hash = HASHES[oidText];
  if (!hash) fail(`unsupported CertID hash algorithm ${oidText}`);
  const n = want(nameHash, TAG.OCTET_STRING, "CertID issuerNameHash").content;
  const k = want(keyHash, TAG.OCTET_STRING, "CertID issuerKeyHash").content;
  if (n.length !== hash.size || k.length !== hash.size) fail(`CertID hashes are not ${hash.name} values`);
  const s = want(serial, TAG.INTEGER, "CertID serialNumber").content;
  if (s.length === 0 || s.length > 32) fail("malformed CertID serialNumber");
  return { hash: hash.name, issuerNameHash: n, issuerKeyHash: k, serial: serialFromInteger(s), der: node.raw };
}

/**
 * The extensions we understand in a request: the nonce. Anything else is ignored unless it is
 * marked critical, which RFC 6960 §4.4 says must not be ignored when not understood.
 */
function parseExtensions(node: Node, where: string): Uint8Array<ArrayBuffer> | null {
  let nonce: Uint8Array<ArrayBuffer> | null = null;
  const [list, extra] = kids(node);
  if (extra) fail(`malformed ${where} extensions`);
  for (const ext of kids(want(list, TAG.SEQUENCE, `${where} extensions`))) {
    const parts = kids(want(ext, TAG.SEQUENCE, `${where} extension`));
    const id = decodeOid(want(parts[0], TAG.OID, `${where} extension id`).content);
    let critical = false;
    let i = 1;
    if (parts[i]?.tag === TAG.BOOLEAN) {
      critical = (parts[i]?.content[0] ?? 0) !== 0;
      i++;
    }
    const value = want(parts[i], TAG.OCTET_STRING, `${where} extension value`);
    if (parts.length !== i + 1) fail(`malformed ${where} extension`);
    if (id === OID_NONCE && where === "request") {
      // RFC 8954 §2.1: the value is an OCTET STRING of 1 to 32 octets.
      const inner = parseDer(value.content);
      if (inner.tag !== TAG.OCTET_STRING || inner.content.length < 1 || inner.content.length > 32) fail("malformed nonce: an OCTET STRING of 1 to 32 octets is required");
      if (nonce) fail("duplicate nonce extension");
      nonce = ext.raw;
    } else if (critical) {
      fail(`unsupported critical ${where} extension ${id}`);
    }
  }
  return nonce;
}

/** Parses a DER OCSPRequest (RFC 6960 §4.1.1). Throws OcspRequestError when it is not one. */
export function parseOcspRequest(der: Uint8Array<ArrayBuffer>): OcspRequest {
  if (der.length === 0) fail("empty request");
  if (der.length >= MAX_OCSP_REQUEST_BYTES) fail("request too large");
  const [tbs, signature, extra] = kids(want(parseDer(der), TAG.SEQUENCE, "OCSPRequest"));
  // optionalSignature [0] EXPLICIT: requests need not be signed and we do not require it.
  if (extra || (signature && signature.tag !== 0xa0)) fail("malformed OCSPRequest");
  const fields = kids(want(tbs, TAG.SEQUENCE, "TBSRequest"));
  let i = 0;
  const version = fields[i];
  if (version?.tag === 0xa0) {
    const [v] = kids(version);
    const value = want(v, TAG.INTEGER, "TBSRequest version").content;
    if (value.length !== 1 || value[0] !== 0) fail("unsupported OCSPRequest version");
    i++;
  }
  if (fields[i]?.tag === 0xa1) i++; // requestorName: informational only.
  const list = kids(want(fields[i], TAG.SEQUENCE, "requestList"));
  i++;
  if (list.length === 0) fail("the requestList is empty");
  let nonce: Uint8Array<ArrayBuffer> | null = null;
  const ext = fields[i];
  if (ext?.tag === 0xa2) {
    nonce = parseExtensions(ext, "request");
    i++;
  }
  if (fields.length !== i) fail("malformed TBSRequest");
  const certIds = list.map((r) => {
    const [certId, single, more] = kids(want(r, TAG.SEQUENCE, "Request"));
    if (more || (single && single.tag !== 0xa0)) fail("malformed Request");
    if (single) parseExtensions(single, "singleRequest");
    return parseCertId(want(certId, TAG.SEQUENCE, "CertID"));
  });
  return { certIds, nonce };
}

/**
 * Decodes the path form of a request (RFC 6960 Appendix A.1): standard base64 of the DER,
 * URL-escaped by the client. Spaces are read as "+", for clients that form-encode it.
 */
export function decodeGetRequest(remainder: string): Uint8Array<ArrayBuffer> {
  if (remainder.length === 0) fail("empty request");
  if (remainder.length >= MAX_OCSP_REQUEST_BYTES) fail("request too large");
  const b64 = remainder.replace(/ /g, "+");
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64) || b64.length % 4 === 1) fail("the request is not base64");
  try {
    return base64ToBytes(b64);
  } catch {
    fail("the request is not base64");
  }
}

// ---------------------------------------------------------------------------------------------
// CertID matching

export interface IssuerHashes {
  issuerNameHash: Uint8Array<ArrayBuffer>;
  issuerKeyHash: Uint8Array<ArrayBuffer>;
}

const hashCache = new BoundedCache<IssuerHashes>("pki.ocspIssuerHashes", 512);

/**
 * The CertID hashes of an issuer (RFC 6960 §4.1.1): of its subject Name DER and of the value of
 * its subjectPublicKey BIT STRING (without tag, length and unused-bits octet). Both inputs come
 * from the issuer row as base64; the result is cached per isolate keyed by exactly those bytes,
 * so an entry can never go stale. A failure is not cached: the next request computes again (and
 * fails the same way).
 */
export async function issuerHashes(hash: OcspHash, subjectDerB64: string, spkiB64: string): Promise<IssuerHashes> {
  const cacheKey = `${hash}|${subjectDerB64}|${spkiB64}`;
  const hit = hashCache.get(cacheKey);
  if (hit) return hit;
  const [, bits] = children(expectTag(parse(base64ToBytes(spkiB64)), TAG.SEQUENCE, "public key"));
  const key = expectTag(bits, TAG.BIT_STRING, "public key").content.subarray(1);
  const [name, keyHash] = await Promise.all([crypto.subtle.digest(hash, base64ToBytes(subjectDerB64)), crypto.subtle.digest(hash, key)]);
  const computed = { issuerNameHash: new Uint8Array(name), issuerKeyHash: new Uint8Array(keyHash) };
  hashCache.set(cacheKey, computed);
  return computed;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function certIdMatches(id: OcspCertId, h: IssuerHashes): boolean {
  return sameBytes(id.issuerNameHash, h.issuerNameHash) && sameBytes(id.issuerKeyHash, h.issuerKeyHash);
}

// ---------------------------------------------------------------------------------------------
// Responses

/** CRLReason (RFC 5280 §5.3.1). */
export const CrlReason = { unspecified: 0 } as const;

export type CertStatus =
  | { kind: "good" }
  | { kind: "revoked"; revocationTime: Date; reason: number | null }
  | { kind: "unknown" };

export interface SingleAnswer {
  /** The request's CertID DER, repeated verbatim. */
  certId: Uint8Array<ArrayBuffer>;
  status: CertStatus;
}

export interface ResponseInput {
  /** The signer's subject Name DER: ResponderID byName (RFC 6960 §4.2.1). */
  responderName: Uint8Array<ArrayBuffer>;
  producedAt: Date;
  thisUpdate: Date;
  /** null: no nextUpdate, "newer information is always available" (§4.2.2.1). */
  nextUpdate: Date | null;
  answers: SingleAnswer[];
  /** The request's nonce Extension DER, echoed in responseExtensions (RFC 8954 §2.1). */
  nonce: Uint8Array<ArrayBuffer> | null;
}

/** GeneralizedTime in whole seconds, "YYYYMMDDHHMMSSZ" (RFC 5280 §4.1.2.5.2, which §4.2.2.1 follows). */
export function generalizedTime(d: Date): Uint8Array<ArrayBuffer> {
  const digits = d.toISOString().slice(0, 19).replace(/[-T:]/g, "");
  return tlv(TAG.GENERALIZED_TIME, new TextEncoder().encode(`${digits}Z`));
}

const enumerated = (n: number): Uint8Array<ArrayBuffer> => tlv(TAG_ENUMERATED, Uint8Array.of(n));

function certStatusDer(s: CertStatus): Uint8Array<ArrayBuffer> {
  // CertStatus (§4.2.1): good [0] IMPLICIT NULL, revoked [1] IMPLICIT RevokedInfo, unknown [2] IMPLICIT NULL.
  if (s.kind === "good") return Uint8Array.of(0x80, 0);
  if (s.kind === "unknown") return Uint8Array.of(0x82, 0);
  const reason = s.reason === null ? [] : [ctxCons(0, enumerated(s.reason))];
  return ctxCons(1, concat([generalizedTime(s.revocationTime), ...reason]));
}

/** The ResponseData that gets signed (RFC 6960 §4.2.1); version v1 is the DEFAULT, so omitted. */
export function responseData(r: ResponseInput): Uint8Array<ArrayBuffer> {
  const singles = r.answers.map((a) =>
    seq(a.certId, certStatusDer(a.status), generalizedTime(r.thisUpdate), ...(r.nextUpdate ? [ctxCons(0, generalizedTime(r.nextUpdate))] : [])),
  );
  return seq(
    ctxCons(1, r.responderName), // ResponderID byName [1] EXPLICIT Name
    generalizedTime(r.producedAt),
    seq(...singles),
    ...(r.nonce ? [ctxCons(1, seq(r.nonce))] : []),
  );
}

/**
 * Wraps a signed BasicOCSPResponse (SEQUENCE { tbsResponseData, signatureAlgorithm, signature })
 * into a successful OCSPResponse.
 */
export function successfulResponse(basic: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> {
  return seq(enumerated(OcspStatus.successful), ctxCons(0, seq(oid(OID_BASIC), octets(basic))));
}

/** An OCSPResponse without responseBytes, e.g. unauthorized = 30 03 0a 01 06 (§4.2.1). */
export function errorResponse(status: Exclude<OcspStatusCode, 0>): Uint8Array<ArrayBuffer> {
  return seq(enumerated(status));
}
