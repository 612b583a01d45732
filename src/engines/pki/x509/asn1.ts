/**
 * The X.509 structures the engine writes and reads itself (RFC 5280): distinguished names,
 * general names and the certificate extensions of its profile (RFC 5280 §4.2), plus the
 * private-key containers it hands out (PKCS#1, SEC1, PKCS#8) and public-key facts (type, size,
 * Subject Key Identifier).
 */
import {
  DerError,
  TAG,
  bitString,
  bool,
  children,
  concat,
  ctxCons,
  ctxPrim,
  decodeOid,
  expectTag,
  ia5,
  int,
  nullValue,
  octets,
  oid,
  parse,
  seq,
  set,
  tlv,
  utf8,
  type Node,
} from "./der";

export const OID = {
  commonName: "2.5.4.3",
  serialNumber: "2.5.4.5",
  country: "2.5.4.6",
  locality: "2.5.4.7",
  province: "2.5.4.8",
  streetAddress: "2.5.4.9",
  organization: "2.5.4.10",
  organizationalUnit: "2.5.4.11",
  postalCode: "2.5.4.17",
  userId: "0.9.2342.19200300.100.1.1",
  rsaEncryption: "1.2.840.113549.1.1.1",
  ecPublicKey: "1.2.840.10045.2.1",
  ed25519: "1.3.101.112",
  p224: "1.3.132.0.33",
  p256: "1.2.840.10045.3.1.7",
  p384: "1.3.132.0.34",
  p521: "1.3.132.0.35",
  subjectAltName: "2.5.29.17",
  basicConstraints: "2.5.29.19",
  keyUsage: "2.5.29.15",
  extKeyUsage: "2.5.29.37",
  nameConstraints: "2.5.29.30",
  crlDistributionPoints: "2.5.29.31",
  certificatePolicies: "2.5.29.32",
  freshestCrl: "2.5.29.46",
  authorityInfoAccess: "1.3.6.1.5.5.7.1.1",
  caIssuers: "1.3.6.1.5.5.7.48.2",
  ocsp: "1.3.6.1.5.5.7.48.1",
  cps: "1.3.6.1.5.5.7.2.1",
  userNotice: "1.3.6.1.5.5.7.2.2",
} as const;

// ---------------------------------------------------------------------------------------------
// Names (RFC 5280 §4.1.2.4)

export interface SubjectSpec {
  commonName?: string;
  country?: string[];
  province?: string[];
  locality?: string[];
  streetAddress?: string[];
  postalCode?: string[];
  organization?: string[];
  organizationalUnit?: string[];
  serialNumber?: string;
  userIds?: string[];
}

const PRINTABLE = /^[A-Za-z0-9 '()+,\-./:=?]*$/;
// One encoder and decoder for the module: constructing them per string showed in profiles.
const ENC = new TextEncoder();
const DEC = new TextDecoder();

/** PrintableString when the value allows it, else UTF8String (as Go's encoder chooses). */
function directoryString(v: string): Uint8Array<ArrayBuffer> {
  return PRINTABLE.test(v) ? tlv(TAG.PRINTABLE_STRING, ENC.encode(v)) : utf8(v);
}

function rdn(type: string, value: string): Uint8Array<ArrayBuffer> {
  return set(seq(oid(type), directoryString(value)));
}

// Helpers of hot paths are module-level functions, not closures: the bundler's keepNames wraps
// every named closure in a call each time it is created, which showed in profiles.
function rdnsOf(out: Uint8Array[], type: string, values: string[] | undefined): void {
  for (const v of values ?? []) out.push(rdn(type, v));
}

/**
 * Encodes a subject in the order Go's pkix.Name uses (C, ST, L, street, postal code, O, OU, CN,
 * serialNumber), then the UID attributes, so certificates look like upstream's.
 */
export function encodeName(s: SubjectSpec): Uint8Array<ArrayBuffer> {
  const rdns: Uint8Array[] = [];
  rdnsOf(rdns, OID.country, s.country);
  rdnsOf(rdns, OID.province, s.province);
  rdnsOf(rdns, OID.locality, s.locality);
  rdnsOf(rdns, OID.streetAddress, s.streetAddress);
  rdnsOf(rdns, OID.postalCode, s.postalCode);
  rdnsOf(rdns, OID.organization, s.organization);
  rdnsOf(rdns, OID.organizationalUnit, s.organizationalUnit);
  if (s.commonName) rdns.push(rdn(OID.commonName, s.commonName));
  if (s.serialNumber) rdns.push(rdn(OID.serialNumber, s.serialNumber));
  for (const u of s.userIds ?? []) rdns.push(set(seq(oid(OID.userId), utf8(u))));
  return seq(...rdns);
}

/** The attributes of a DER Name as (oid, string value) pairs, in order. */
export function nameAttributes(der: Uint8Array<ArrayBuffer>): { type: string; value: string }[] {
  const out: { type: string; value: string }[] = [];
  for (const r of children(expectTag(parse(der), TAG.SEQUENCE, "name"))) {
    for (const atv of children(r)) {
      const [t, v] = children(atv);
      if (!t || !v) throw new DerError("malformed name attribute");
      out.push({ type: decodeOid(t.content), value: DEC.decode(v.content) });
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// General names (RFC 5280 §4.2.1.6)

export interface OtherSan {
  oid: string;
  value: string;
}

export interface SanSpec {
  dns: string[];
  email: string[];
  ip: Uint8Array[];
  uri: string[];
  otherNames: OtherSan[];
}

export function emptySans(): SanSpec {
  return { dns: [], email: [], ip: [], uri: [], otherNames: [] };
}

function generalNames(s: SanSpec): Uint8Array[] {
  const names: Uint8Array[] = [];
  // otherName [0] { type-id OID, value [0] EXPLICIT UTF8String } (the only type upstream supports).
  for (const o of s.otherNames) names.push(ctxCons(0, concat([oid(o.oid), ctxCons(0, utf8(o.value))])));
  for (const e of s.email) names.push(ctxPrim(1, ENC.encode(e)));
  for (const d of s.dns) names.push(ctxPrim(2, ENC.encode(d)));
  for (const u of s.uri) names.push(ctxPrim(6, ENC.encode(u)));
  for (const ip of s.ip) names.push(ctxPrim(7, ip));
  return names;
}

export function sanIsEmpty(s: SanSpec): boolean {
  return s.dns.length + s.email.length + s.ip.length + s.uri.length + s.otherNames.length === 0;
}

/** Parses a GeneralNames SEQUENCE (the SAN extension value). Unsupported kinds are skipped. */
export function parseGeneralNames(value: Uint8Array<ArrayBuffer>): SanSpec {
  const out = emptySans();
  const dec = DEC;
  for (const gn of children(expectTag(parse(value), TAG.SEQUENCE, "general names"))) {
    switch (gn.tag) {
      case 0x81:
        out.email.push(dec.decode(gn.content));
        break;
      case 0x82:
        out.dns.push(dec.decode(gn.content));
        break;
      case 0x86:
        out.uri.push(dec.decode(gn.content));
        break;
      case 0x87:
        out.ip.push(gn.content.slice());
        break;
      case 0xa0: {
        const [typeId, wrapped] = children(gn);
        if (!typeId || !wrapped) break;
        const inner = children(wrapped)[0];
        if (inner && inner.tag === TAG.UTF8_STRING) out.otherNames.push({ oid: decodeOid(typeId.content), value: dec.decode(inner.content) });
        break;
      }
      default:
        break;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Extensions (RFC 5280 §4.2). Each builder returns the extnValue content (the DER inside the
// OCTET STRING); x509.ts wraps them.

export interface ExtensionDer {
  oid: string;
  critical: boolean;
  value: Uint8Array<ArrayBuffer>;
}

/** RFC 5280 §4.2.1.6: critical when the subject is empty. */
export function sanExtension(s: SanSpec, subjectEmpty: boolean): ExtensionDer {
  return { oid: OID.subjectAltName, critical: subjectEmpty, value: seq(...generalNames(s)) };
}

/** RFC 5280 §4.2.1.9; marked critical as Go does. */
export function basicConstraintsExtension(ca: boolean, pathLen?: number): ExtensionDer {
  const items: Uint8Array[] = [];
  if (ca) items.push(bool(true));
  if (ca && pathLen !== undefined && pathLen >= 0) items.push(int(pathLen));
  return { oid: OID.basicConstraints, critical: true, value: seq(...items) };
}

export const KEY_USAGE_BITS: Record<string, number> = {
  digitalsignature: 0,
  contentcommitment: 1,
  keyencipherment: 2,
  dataencipherment: 3,
  keyagreement: 4,
  certsign: 5,
  crlsign: 6,
  encipheronly: 7,
  decipheronly: 8,
};

/** RFC 5280 §4.2.1.3 (critical). `bits` are positions 0..8; returns null when empty. */
export function keyUsageExtension(bits: number[]): ExtensionDer | null {
  if (bits.length === 0) return null;
  const max = Math.max(...bits);
  const bytes = new Uint8Array(max >= 8 ? 2 : 1);
  for (const b of bits) bytes[b >> 3] = (bytes[b >> 3] ?? 0) | (0x80 >> (b & 7));
  // DER: the unused trailing bits of the last byte are counted and must be zero.
  const last = bytes[bytes.length - 1] ?? 0;
  let unused = 0;
  while (unused < 7 && !(last & (1 << unused))) unused++;
  return { oid: OID.keyUsage, critical: true, value: tlv(TAG.BIT_STRING, concat([Uint8Array.of(unused), bytes])) };
}

export function extKeyUsageExtension(oids: string[]): ExtensionDer | null {
  if (oids.length === 0) return null;
  return { oid: OID.extKeyUsage, critical: false, value: seq(...oids.map(oid)) };
}

export function skiExtension(ski: Uint8Array): ExtensionDer {
  return { oid: "2.5.29.14", critical: false, value: octets(ski) };
}

export function akiExtension(keyId: Uint8Array): ExtensionDer {
  return { oid: "2.5.29.35", critical: false, value: seq(ctxPrim(0, keyId)) };
}

/** RFC 5280 §4.2.2.1: caIssuers and OCSP access descriptions. */
export function aiaExtension(caIssuers: string[], ocsp: string[]): ExtensionDer | null {
  const items = [
    ...ocsp.map((u) => seq(oid(OID.ocsp), ctxPrim(6, ENC.encode(u)))),
    ...caIssuers.map((u) => seq(oid(OID.caIssuers), ctxPrim(6, ENC.encode(u)))),
  ];
  return items.length === 0 ? null : { oid: OID.authorityInfoAccess, critical: false, value: seq(...items) };
}

/** RFC 5280 §4.2.1.13 (and §4.2.1.15 FreshestCRL, same syntax): one fullName per URL. */
export function distributionPointsExtension(urls: string[], which: "crl" | "delta"): ExtensionDer | null {
  if (urls.length === 0) return null;
  const points = urls.map((u) => seq(ctxCons(0, ctxCons(0, ctxPrim(6, ENC.encode(u))))));
  return { oid: which === "crl" ? OID.crlDistributionPoints : OID.freshestCrl, critical: false, value: seq(...points) };
}

/** RFC 5280 §4.2.1.10: permitted dNSName subtrees (critical). */
export function nameConstraintsExtension(domains: string[]): ExtensionDer | null {
  if (domains.length === 0) return null;
  const subtrees = domains.map((d) => seq(ctxPrim(2, ENC.encode(d))));
  return { oid: OID.nameConstraints, critical: true, value: seq(ctxCons(0, concat(subtrees))) };
}

export interface PolicyIdentifier {
  oid: string;
  cps?: string;
  notice?: string;
}

/** RFC 5280 §4.2.1.4 with optional CPS URI and user-notice explicitText qualifiers. */
export function certificatePoliciesExtension(policies: PolicyIdentifier[]): ExtensionDer | null {
  if (policies.length === 0) return null;
  const infos = policies.map((p) => {
    const qualifiers: Uint8Array[] = [];
    if (p.cps) qualifiers.push(seq(oid(OID.cps), ia5(p.cps)));
    if (p.notice) qualifiers.push(seq(oid(OID.userNotice), seq(utf8(p.notice))));
    return qualifiers.length ? seq(oid(p.oid), seq(...qualifiers)) : seq(oid(p.oid));
  });
  return { oid: OID.certificatePolicies, critical: false, value: seq(...infos) };
}

// ---------------------------------------------------------------------------------------------
// Public keys

export type KeyType = "rsa" | "ec" | "ed25519";

export interface PublicKeyFacts {
  type: KeyType;
  /** RSA modulus size, EC curve size, 0 for Ed25519. */
  bits: number;
  /** SHA-1 over the subjectPublicKey bits (RFC 5280 §4.2.1.2 method 1). */
  ski: Uint8Array<ArrayBuffer>;
}

/** The bit length of a non-negative INTEGER's content (an RSA modulus: its key size). */
function integerBits(content: Uint8Array): number {
  let start = 0;
  while (start < content.length && content[start] === 0) start++;
  if (start === content.length) return 0;
  const top = content[start] ?? 0;
  return (content.length - start - 1) * 8 + (32 - Math.clz32(top));
}

const CURVE_BITS: Record<string, number> = { [OID.p224]: 224, [OID.p256]: 256, [OID.p384]: 384, [OID.p521]: 521 };
export const CURVE_OID: Record<number, string> = { 224: OID.p224, 256: OID.p256, 384: OID.p384, 521: OID.p521 };

function spkiParts(spki: Uint8Array<ArrayBuffer>): { alg: string; param: Node | undefined; key: Uint8Array<ArrayBuffer> } {
  const [algId, bits] = children(expectTag(parse(spki), TAG.SEQUENCE, "public key"));
  const [algOid, param] = children(expectTag(algId, TAG.SEQUENCE, "public key algorithm"));
  const bs = expectTag(bits, TAG.BIT_STRING, "public key");
  return { alg: decodeOid(expectTag(algOid, TAG.OID, "algorithm").content), param, key: bs.content.subarray(1) };
}

/**
 * Facts by SPKI array: a sign reads its CSR's key twice (parsing the CSR, then the SKI of the
 * certificate) through the same array. Keyed by the array object, which no caller writes to
 * after it is made; a WeakMap lets an entry go with its array.
 */
const factsBySpki = new WeakMap<Uint8Array, PublicKeyFacts>();

export async function publicKeyFacts(spki: Uint8Array<ArrayBuffer>): Promise<PublicKeyFacts> {
  const hit = factsBySpki.get(spki);
  if (hit) return hit;
  const facts = await readPublicKeyFacts(spki);
  factsBySpki.set(spki, facts);
  return facts;
}

async function readPublicKeyFacts(spki: Uint8Array<ArrayBuffer>): Promise<PublicKeyFacts> {
  const { alg, param, key } = spkiParts(spki);
  const ski = new Uint8Array(await crypto.subtle.digest("SHA-1", key));
  if (alg === OID.rsaEncryption) {
    const [n] = children(expectTag(parse(key), TAG.SEQUENCE, "RSA public key"));
    return { type: "rsa", bits: integerBits(expectTag(n, TAG.INTEGER, "RSA modulus").content), ski };
  }
  if (alg === OID.ecPublicKey) {
    const curve = param && param.tag === TAG.OID ? decodeOid(param.content) : "";
    const bits = CURVE_BITS[curve];
    if (!bits) throw new DerError(`unsupported elliptic curve ${curve || "(none)"}`);
    return { type: "ec", bits, ski };
  }
  if (alg === OID.ed25519) return { type: "ed25519", bits: 0, ski };
  throw new DerError(`unsupported public key algorithm ${alg}`);
}

// ---------------------------------------------------------------------------------------------
// Private key containers

/** PKCS#8 PrivateKeyInfo → the algorithm-specific key (RSAPrivateKey or ECPrivateKey). */
function pkcs8Inner(pkcs8: Uint8Array<ArrayBuffer>): { alg: string; param: Node | undefined; key: Uint8Array<ArrayBuffer> } {
  const [, algId, key] = children(expectTag(parse(pkcs8), TAG.SEQUENCE, "private key"));
  const [algOid, param] = children(expectTag(algId, TAG.SEQUENCE, "private key algorithm"));
  return {
    alg: decodeOid(expectTag(algOid, TAG.OID, "algorithm").content),
    param,
    key: expectTag(key, TAG.OCTET_STRING, "private key").content,
  };
}

/**
 * The "traditional" encoding upstream returns: RSA → PKCS#1, EC → SEC1 with the named curve in
 * its parameters (OpenSSL needs it), Ed25519 → PKCS#8 unchanged (RFC 8017, RFC 5915, RFC 5958).
 */
export function traditionalPrivateKey(pkcs8: Uint8Array<ArrayBuffer>): { label: string; der: Uint8Array<ArrayBuffer> } {
  const { alg, param, key } = pkcs8Inner(pkcs8);
  if (alg === OID.rsaEncryption) return { label: "RSA PRIVATE KEY", der: key };
  if (alg === OID.ecPublicKey) {
    const curve = param ? param.raw : new Uint8Array(0);
    const parts = children(expectTag(parse(key), TAG.SEQUENCE, "EC private key"));
    const version = parts[0];
    const priv = parts[1];
    const pub = parts.find((p) => p.tag === 0xa1);
    if (!version || !priv) throw new DerError("malformed EC private key");
    const items: Uint8Array[] = [version.raw, priv.raw, ctxCons(0, curve)];
    if (pub) items.push(pub.raw);
    return { label: "EC PRIVATE KEY", der: seq(...items) };
  }
  return { label: "PRIVATE KEY", der: pkcs8 };
}

/** Wraps a PKCS#1 or SEC1 key in PKCS#8 so WebCrypto can import it. */
export function toPkcs8(label: string, der: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> {
  if (label === "PRIVATE KEY") return der;
  if (label === "RSA PRIVATE KEY") return seq(int(0), seq(oid(OID.rsaEncryption), nullValue()), octets(der));
  if (label === "EC PRIVATE KEY") {
    const parts = children(expectTag(parse(der), TAG.SEQUENCE, "EC private key"));
    const params = parts.find((p) => p.tag === 0xa0);
    const curve = params ? children(params)[0] : undefined;
    if (!curve || curve.tag !== TAG.OID) throw new DerError("EC private key without a named curve");
    return seq(int(0), seq(oid(OID.ecPublicKey), curve.raw), octets(der));
  }
  throw new DerError(`unsupported private key type "${label}"`);
}

/**
 * Type and size of a PKCS#8 key read from its DER alone (RSA modulus bits from the RSAPrivateKey
 * of RFC 8017 §A.1.2, the curve for EC, 0 for Ed25519): sizes are checked before WebCrypto sees
 * the key (keytypes.ts unsupportedKeySize).
 */
export function privateKeyFacts(pkcs8: Uint8Array<ArrayBuffer>): { type: KeyType; bits: number } {
  const { type, curveBits } = pkcs8Algorithm(pkcs8);
  if (type !== "rsa") return { type, bits: curveBits };
  const [, modulus] = children(expectTag(parse(pkcs8Inner(pkcs8).key), TAG.SEQUENCE, "RSA private key"));
  return { type, bits: integerBits(expectTag(modulus, TAG.INTEGER, "RSA modulus").content) };
}

/** Key type and curve of a PKCS#8 key, read from its algorithm identifier. */
export function pkcs8Algorithm(pkcs8: Uint8Array<ArrayBuffer>): { type: KeyType; curveBits: number } {
  const { alg, param } = pkcs8Inner(pkcs8);
  if (alg === OID.rsaEncryption) return { type: "rsa", curveBits: 0 };
  if (alg === OID.ed25519) return { type: "ed25519", curveBits: 0 };
  if (alg === OID.ecPublicKey) {
    const bits = param && param.tag === TAG.OID ? CURVE_BITS[decodeOid(param.content)] : undefined;
    if (!bits) throw new DerError("unsupported elliptic curve in private key");
    return { type: "ec", curveBits: bits };
  }
  throw new DerError(`unsupported private key algorithm ${alg}`);
}

export { bitString };
