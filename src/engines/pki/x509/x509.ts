/**
 * The one module that imports @peculiar/x509 (docs/architecture.md): key generation and import through
 * WebCrypto, certificate and CSR signing, and parsing of certificates. Everything it returns is
 * plain data (DER bytes, strings, numbers), so the engine never sees library types and the hot
 * path can be tuned or swapped here alone. The hot paths no longer reach the library: leaves are
 * encoded here by hand, CSRs are read by pkcs10.ts (re-exported below) and signatures checked by
 * signature.ts; the library remains for RSA-PSS signing, intermediate CSRs and parseCertificate.
 */
import * as x509 from "@peculiar/x509";
import { hexToBytes } from "../../../core/encoding";
import {
  CURVE_OID,
  OID,
  pkcs8Algorithm,
  publicKeyFacts,
  type ExtensionDer,
  type KeyType,
  type PublicKeyFacts,
} from "./asn1";
import { TAG, bitString, bool, children, concat, ctxCons, expectTag, int, nullValue, octets, oid, parse, readNode, seq, set, time, uintBytes } from "./der";
import { generateP224KeyPair, importP224PrivateKey, isP224Key, p224PublicKeyOf, verifyP224 } from "./p224";
import { X509Error } from "./errors";
import { verifySignature } from "./signature";

// Use the runtime's WebCrypto, set once at startup.
x509.cryptoProvider.set(crypto);

export { X509Error };
export { parseCsr, type CsrInfo } from "./pkcs10";

const CURVE_NAME: Record<number, string> = { 256: "P-256", 384: "P-384", 521: "P-521" };

export interface KeyPairDer {
  pkcs8: Uint8Array<ArrayBuffer>;
  spki: Uint8Array<ArrayBuffer>;
}

/**
 * Generates a key pair. WebCrypto (and so workerd) has no P-224, so that curve is generated in
 * software (p224.ts).
 */
export async function generateKeyPair(type: KeyType, bits: number): Promise<KeyPairDer> {
  if (type === "ec" && bits === 224) return generateP224KeyPair();
  let alg: SubtleCryptoGenerateKeyAlgorithm;
  if (type === "rsa") {
    alg = { name: "RSASSA-PKCS1-v1_5", modulusLength: bits, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" };
  } else if (type === "ec") {
    const namedCurve = CURVE_NAME[bits];
    if (!namedCurve) throw new X509Error(`unsupported bit length for EC key: ${bits}`);
    alg = { name: "ECDSA", namedCurve };
  } else {
    alg = { name: "Ed25519" };
  }
  const pair = (await crypto.subtle.generateKey(alg, true, ["sign", "verify"])) as CryptoKeyPair;
  const pkcs8 = new Uint8Array((await crypto.subtle.exportKey("pkcs8", pair.privateKey)) as ArrayBuffer);
  const spki = (type === "ec" ? ecSpkiFromPkcs8(pkcs8) : null) ?? new Uint8Array((await crypto.subtle.exportKey("spki", pair.publicKey)) as ArrayBuffer);
  return { pkcs8, spki };
}

/**
 * The SubjectPublicKeyInfo of an EC key read from its PKCS#8 export, which carries the public
 * point (RFC 5915 §3 `[1] publicKey`): RFC 5480 §2 SEQUENCE { SEQUENCE { id-ecPublicKey, named
 * curve }, BIT STRING }, the bytes WebCrypto's spki export gives, one export fewer per issue.
 * Null when the point is absent.
 */
function ecSpkiFromPkcs8(pkcs8: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> | null {
  const [, algId, inner] = children(expectTag(parse(pkcs8), TAG.SEQUENCE, "private key"));
  const ecKey = parse(expectTag(inner, TAG.OCTET_STRING, "private key").content);
  const pub = children(expectTag(ecKey, TAG.SEQUENCE, "EC private key")).find((n) => n.tag === 0xa1);
  const point = pub ? children(pub)[0] : undefined;
  if (!algId || !point || point.tag !== TAG.BIT_STRING) return null;
  return seq(algId.raw, point.raw);
}

/**
 * How a CA key signs: the key plus the parameters the generator needs. `key` is a WebCrypto key,
 * or for EC P-224 a software key of the same shape that crypto.subtle cannot use: sign through
 * `signBytes`, never crypto.subtle.sign directly.
 */
export interface Signer {
  key: CryptoKey;
  algorithm: SubtleCryptoSignAlgorithm & { hash?: string; saltLength?: number };
  facts: PublicKeyFacts;
}

/** The hash upstream pairs with each key: SHA-256/384/512 for RSA, the curve's for ECDSA. */
export function signatureHash(facts: PublicKeyFacts, signatureBits: number): string {
  if (facts.type === "rsa") return `SHA-${signatureBits || 256}`;
  if (facts.type === "ec") return facts.bits >= 521 ? "SHA-512" : facts.bits >= 384 ? "SHA-384" : "SHA-256";
  return "";
}

/** Upstream's name for a signature algorithm (issuer revocation_signature_algorithm). */
export function signatureAlgorithmName(facts: PublicKeyFacts, signatureBits: number, usePss: boolean): string {
  const bits = signatureHash(facts, signatureBits).replace("SHA-", "");
  if (facts.type === "rsa") return usePss ? `SHA${bits}WithRSAPSS` : `SHA${bits}WithRSA`;
  if (facts.type === "ec") return `ECDSAWithSHA${bits}`;
  return "Ed25519";
}

/**
 * Imports a stored PKCS#8 key for signing. WebCrypto binds the hash (and PKCS#1 v1.5 vs PSS) to
 * an RSA key, so the key is imported per signature choice.
 */
export async function importSigner(pkcs8: Uint8Array<ArrayBuffer>, spki: Uint8Array<ArrayBuffer>, signatureBits = 0, usePss = false): Promise<Signer> {
  const facts = await publicKeyFacts(spki);
  const { curveBits } = pkcs8Algorithm(pkcs8);
  if (facts.type === "rsa") {
    const hash = signatureHash(facts, signatureBits);
    const name = usePss ? "RSA-PSS" : "RSASSA-PKCS1-v1_5";
    const key = await crypto.subtle.importKey("pkcs8", pkcs8, { name, hash }, false, ["sign"]);
    // RFC 4055 §3.1: the salt is as long as the hash output.
    const algorithm = usePss ? { name, hash, saltLength: Number(hash.slice(4)) / 8 } : { name, hash };
    return { key, algorithm, facts };
  }
  if (facts.type === "ec") {
    const algorithm = { name: "ECDSA", hash: signatureHash(facts, 0) };
    if (curveBits === 224) return { key: importP224PrivateKey(pkcs8), algorithm, facts };
    const namedCurve = CURVE_NAME[curveBits];
    if (!namedCurve) throw new X509Error(`unsupported elliptic curve P-${curveBits}`);
    const key = await crypto.subtle.importKey("pkcs8", pkcs8, { name: "ECDSA", namedCurve }, false, ["sign"]);
    return { key, algorithm, facts };
  }
  const key = await crypto.subtle.importKey("pkcs8", pkcs8, { name: "Ed25519" }, false, ["sign"]);
  return { key, algorithm: { name: "Ed25519" }, facts };
}

/**
 * Signs `data` with a Signer; the result is in WebCrypto's format (raw r‖s for ECDSA), whichever
 * implementation holds the key.
 */
export async function signBytes(signer: Signer, data: Uint8Array<ArrayBuffer>): Promise<Uint8Array<ArrayBuffer>> {
  if (isP224Key(signer.key)) return signer.key.sign(signer.algorithm.hash ?? "", data);
  return new Uint8Array(await crypto.subtle.sign(signer.algorithm, signer.key, data));
}

/** Checks that a PKCS#8 private key and an SPKI public key are one pair, by a test signature. */
export async function keyMatchesPublicKey(pkcs8: Uint8Array<ArrayBuffer>, spki: Uint8Array<ArrayBuffer>): Promise<boolean> {
  const signer = await importSigner(pkcs8, spki);
  const data = Uint8Array.from(new TextEncoder().encode("lanyard key check"));
  const sig = await signBytes(signer, data);
  if (isP224Key(signer.key)) return verifyP224(spki, signer.algorithm.hash ?? "", data, sig, "compact");
  const verifyAlg = signer.facts.type === "rsa" ? { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" } : signer.facts.type === "ec" ? { name: "ECDSA", namedCurve: CURVE_NAME[signer.facts.bits] ?? "" } : { name: "Ed25519" };
  const pub = await crypto.subtle.importKey("spki", spki, verifyAlg, false, ["verify"]);
  return crypto.subtle.verify(signer.algorithm, pub, sig, data);
}

/** Derives the SPKI of a PKCS#8 key (WebCrypto exports the public half through JWK). */
export async function publicKeyOf(pkcs8: Uint8Array<ArrayBuffer>): Promise<Uint8Array<ArrayBuffer>> {
  const { type, curveBits } = pkcs8Algorithm(pkcs8);
  if (type === "ec" && curveBits === 224) return p224PublicKeyOf(pkcs8);
  const alg =
    type === "rsa"
      ? { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }
      : type === "ec"
        ? { name: "ECDSA", namedCurve: CURVE_NAME[curveBits] ?? "" }
        : { name: "Ed25519" };
  if (type === "ec" && !CURVE_NAME[curveBits]) throw new X509Error(`unsupported elliptic curve P-${curveBits}`);
  const priv = await crypto.subtle.importKey("pkcs8", pkcs8, alg, true, ["sign"]);
  const jwk = (await crypto.subtle.exportKey("jwk", priv)) as JsonWebKey;
  delete jwk.d;
  delete jwk.p;
  delete jwk.q;
  delete jwk.dp;
  delete jwk.dq;
  delete jwk.qi;
  jwk.key_ops = ["verify"];
  const pub = await crypto.subtle.importKey("jwk", jwk, alg, true, ["verify"]);
  return new Uint8Array((await crypto.subtle.exportKey("spki", pub)) as ArrayBuffer);
}

export interface CertificateParams {
  serialHex: string;
  subject: Uint8Array<ArrayBuffer>;
  issuer: Uint8Array<ArrayBuffer>;
  notBefore: Date;
  notAfter: Date;
  spki: Uint8Array<ArrayBuffer>;
  extensions: ExtensionDer[];
  signer: Signer;
}

const toExtension = (e: ExtensionDer) => new x509.Extension(e.oid, e.critical, e.value);

const SIG_OIDS: Record<string, string> = {
  "ECDSA/SHA-256": "1.2.840.10045.4.3.2",
  "ECDSA/SHA-384": "1.2.840.10045.4.3.3",
  "ECDSA/SHA-512": "1.2.840.10045.4.3.4",
  "RSASSA-PKCS1-v1_5/SHA-256": "1.2.840.113549.1.1.11",
  "RSASSA-PKCS1-v1_5/SHA-384": "1.2.840.113549.1.1.12",
  "RSASSA-PKCS1-v1_5/SHA-512": "1.2.840.113549.1.1.13",
  "Ed25519/": "1.3.101.112",
};

/**
 * The signature AlgorithmIdentifier for the fast path, or null for RSA-PSS (whose parameters
 * the library encodes). RFC 5758 §3.2: ECDSA identifiers have no parameters; RFC 4055 §5:
 * PKCS#1 v1.5 identifiers carry NULL; RFC 8410 §3: Ed25519 has no parameters.
 */
function signatureAlgorithmDer(signer: Signer): Uint8Array<ArrayBuffer> | null {
  const id = SIG_OIDS[`${signer.algorithm.name}/${signer.algorithm.hash ?? ""}`];
  if (!id) return null;
  return signer.algorithm.name === "RSASSA-PKCS1-v1_5" ? seq(oid(id), nullValue()) : seq(oid(id));
}

/** WebCrypto's raw r‖s ECDSA signature → the DER Ecdsa-Sig-Value of RFC 3279 §2.2.3. */
function ecdsaSigDer(raw: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> {
  const half = raw.length / 2;
  return seq(uintBytes(raw.subarray(0, half)), uintBytes(raw.subarray(half)));
}

function extensionDer(e: ExtensionDer): Uint8Array<ArrayBuffer> {
  return e.critical ? seq(oid(e.oid), bool(true), octets(e.value)) : seq(oid(e.oid), octets(e.value));
}

/**
 * Builds and signs a certificate; returns its DER. The TBSCertificate (RFC 5280 §4.1) is
 * encoded here directly: profiling showed the generic ASN.1 schema encoder costing more than
 * key generation and signing together. RSA-PSS goes through the library.
 */
export async function signCertificate(p: CertificateParams, encoder: "direct" | "library" = "direct"): Promise<Uint8Array<ArrayBuffer>> {
  const alg = signatureAlgorithmDer(p.signer);
  // `encoder: "library"` exists for the benchmark's comparison (npm run bench).
  if (!alg || (encoder === "library" && !isP224Key(p.signer.key))) return signCertificateWithLibrary(p);
  const serialBytes = hexToBytes(p.serialHex);
  const tbs = seq(
    ctxCons(0, int(2)), // version v3
    uintBytes(serialBytes),
    alg,
    p.issuer,
    seq(time(p.notBefore), time(p.notAfter)),
    p.subject,
    p.spki,
    ...(p.extensions.length > 0 ? [ctxCons(3, seq(...p.extensions.map(extensionDer)))] : []),
  );
  const sig = await signBytes(p.signer, tbs);
  return seq(tbs, alg, bitString(p.signer.algorithm.name === "ECDSA" ? ecdsaSigDer(sig) : sig));
}

const HASH_OIDS: Record<string, string> = { "SHA-256": "2.16.840.1.101.3.4.2.1", "SHA-384": "2.16.840.1.101.3.4.2.2", "SHA-512": "2.16.840.1.101.3.4.2.3" };

/**
 * The signature AlgorithmIdentifier of any signer, RSA-PSS included: RFC 4055 §3.1
 * RSASSA-PSS-params (EXPLICIT tags) with MGF1 over the same hash and a salt as long as it.
 */
function anySignatureAlgorithmDer(signer: Signer): Uint8Array<ArrayBuffer> {
  const plain = signatureAlgorithmDer(signer);
  if (plain) return plain;
  const hashOid = HASH_OIDS[signer.algorithm.hash ?? ""];
  if (signer.algorithm.name !== "RSA-PSS" || !hashOid) throw new X509Error(`unsupported signature algorithm ${signer.algorithm.name}`);
  const hashAlg = seq(oid(hashOid), nullValue());
  return seq(
    oid("1.2.840.113549.1.1.10"),
    seq(ctxCons(0, hashAlg), ctxCons(1, seq(oid("1.2.840.113549.1.1.8"), hashAlg)), ctxCons(2, int(signer.algorithm.saltLength ?? 32))),
  );
}

/**
 * Signs a TBSCertificate the caller assembles around the signer's AlgorithmIdentifier (which
 * RFC 5280 §4.1.2.3 requires inside the TBS as well as outside): used to re-sign an existing
 * certificate's TBS (sign-self-issued). Returns the Certificate DER.
 */
export async function signTbsCertificate(buildTbs: (algorithm: Uint8Array<ArrayBuffer>) => Uint8Array<ArrayBuffer>, signer: Signer): Promise<Uint8Array<ArrayBuffer>> {
  const alg = anySignatureAlgorithmDer(signer);
  const tbs = buildTbs(alg);
  const sig = await signBytes(signer, tbs);
  return seq(tbs, alg, bitString(signer.algorithm.name === "ECDSA" ? ecdsaSigDer(sig) : sig));
}

async function signCertificateWithLibrary(p: CertificateParams): Promise<Uint8Array<ArrayBuffer>> {
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: p.serialHex,
    subject: new x509.Name(p.subject),
    issuer: new x509.Name(p.issuer),
    notBefore: p.notBefore,
    notAfter: p.notAfter,
    publicKey: p.spki,
    signingKey: p.signer.key,
    signingAlgorithm: p.signer.algorithm,
    extensions: p.extensions.map(toExtension),
  });
  return new Uint8Array(cert.rawData);
}

/** Builds and signs a PKCS#10 request for an intermediate CA key. */
export async function signCsr(
  subject: Uint8Array<ArrayBuffer>,
  extensions: ExtensionDer[],
  pkcs8: Uint8Array<ArrayBuffer>,
  spki: Uint8Array<ArrayBuffer>,
  signatureBits = 0,
  usePss = false,
): Promise<Uint8Array<ArrayBuffer>> {
  const signer = await importSigner(pkcs8, spki, signatureBits, usePss);
  if (isP224Key(signer.key)) return signCsrDirect(subject, extensions, spki, signer);
  const publicKey = await crypto.subtle.importKey(
    "spki",
    spki,
    signer.facts.type === "ec" ? { name: "ECDSA", namedCurve: CURVE_NAME[signer.facts.bits] ?? "" } : signer.algorithm,
    true,
    ["verify"],
  );
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: new x509.Name(subject),
    extensions: extensions.map(toExtension),
    signingAlgorithm: signer.algorithm,
    keys: { privateKey: signer.key, publicKey },
  });
  return new Uint8Array(csr.rawData);
}

/**
 * A PKCS#10 request encoded here (RFC 2986 §4): used for signers the library cannot drive
 * (EC P-224). Extensions travel in one extensionRequest attribute (RFC 2985 §5.4.2).
 */
async function signCsrDirect(subject: Uint8Array<ArrayBuffer>, extensions: ExtensionDer[], spki: Uint8Array<ArrayBuffer>, signer: Signer): Promise<Uint8Array<ArrayBuffer>> {
  const attributes = extensions.length > 0 ? [seq(oid("1.2.840.113549.1.9.14"), set(seq(...extensions.map(extensionDer))))] : [];
  const info = seq(int(0), subject, spki, ctxCons(0, concat(attributes)));
  const alg = anySignatureAlgorithmDer(signer);
  const sig = await signBytes(signer, info);
  return seq(info, alg, bitString(signer.algorithm.name === "ECDSA" ? ecdsaSigDer(sig) : sig));
}

export interface CertInfo {
  der: Uint8Array<ArrayBuffer>;
  serialHex: string;
  subject: Uint8Array<ArrayBuffer>;
  issuer: Uint8Array<ArrayBuffer>;
  spki: Uint8Array<ArrayBuffer>;
  notBefore: Date;
  notAfter: Date;
  isCa: boolean;
  pathLen: number | undefined;
  /** Key usage bit positions (RFC 5280 §4.2.1.3), or null without the extension. */
  keyUsage: number[] | null;
  signatureAlgorithm: string;
}

function bitsOf(bitStringContent: Uint8Array): number[] {
  const out: number[] = [];
  for (let i = 1; i < bitStringContent.length; i++) {
    for (let b = 0; b < 8; b++) if ((bitStringContent[i] ?? 0) & (0x80 >> b)) out.push((i - 1) * 8 + b);
  }
  return out;
}

function algorithmName(alg: { name: string; hash?: { name: string } }, pss: boolean): string {
  const hash = alg.hash?.name.replace("SHA-", "") ?? "";
  if (alg.name === "ECDSA") return `ECDSAWithSHA${hash}`;
  if (alg.name === "RSASSA-PKCS1-v1_5") return `SHA${hash}WithRSA`;
  if (alg.name === "RSA-PSS" || pss) return `SHA${hash}WithRSAPSS`;
  if (alg.name === "Ed25519" || alg.name === "EdDSA") return "Ed25519";
  return "";
}

/**
 * Refuses bytes after the outer SEQUENCE: the library's parser stops at its end and ignores the
 * rest, so a request could smuggle data past every check. A first TLV that does not even parse
 * is left to the library, whose message says more.
 */
function refuseTrailingData(der: Uint8Array<ArrayBuffer>, what: string): void {
  let end: number;
  try {
    end = readNode(der).next;
  } catch {
    return;
  }
  if (end !== der.length) throw new X509Error(`trailing data after the ${what}`);
}

/** Parses a DER certificate. Throws X509Error when it is not one. */
export function parseCertificate(der: Uint8Array<ArrayBuffer>): CertInfo {
  refuseTrailingData(der, "certificate");
  let cert: x509.X509Certificate;
  try {
    cert = new x509.X509Certificate(der);
  } catch (e) {
    throw new X509Error(`unable to parse certificate: ${e instanceof Error ? e.message : String(e)}`);
  }
  let isCa = false;
  let pathLen: number | undefined;
  let keyUsage: number[] | null = null;
  for (const ext of cert.extensions) {
    if (ext.type === OID.basicConstraints) {
      const bc = new x509.BasicConstraintsExtension(ext.rawData);
      isCa = bc.ca;
      pathLen = bc.pathLength;
    } else if (ext.type === OID.keyUsage) {
      keyUsage = bitsOf(expectTag(parse(new Uint8Array(ext.value)), TAG.BIT_STRING, "key usage").content);
    }
  }
  const alg = cert.signatureAlgorithm as { name: string; hash?: { name: string } };
  return {
    der: new Uint8Array(cert.rawData),
    serialHex: cert.serialNumber.toLowerCase(),
    subject: new Uint8Array(cert.subjectName.toArrayBuffer()),
    issuer: new Uint8Array(cert.issuerName.toArrayBuffer()),
    spki: new Uint8Array(cert.publicKey.rawData),
    notBefore: cert.notBefore,
    notAfter: cert.notAfter,
    isCa,
    pathLen,
    keyUsage,
    signatureAlgorithm: algorithmName(alg, false),
  };
}

/**
 * Whether `childDer` (a Certificate, or any SEQUENCE { tbs, AlgorithmIdentifier, BIT STRING })
 * carries a valid signature by the key in `parentSpki`. Read with the DER reader and verified
 * through WebCrypto (signature.ts): revocation and CRL builds call this per certificate.
 */
export async function isSignedBy(childDer: Uint8Array<ArrayBuffer>, parentSpki: Uint8Array<ArrayBuffer>): Promise<boolean> {
  try {
    const [tbs, algorithm, signature, ...rest] = children(expectTag(parse(childDer), TAG.SEQUENCE, "signed data"));
    if (!tbs || tbs.tag !== TAG.SEQUENCE || !algorithm || rest.length > 0) return false;
    const bits = expectTag(signature, TAG.BIT_STRING, "signature").content;
    return await verifySignature(tbs.raw, algorithm, bits, parentSpki, await publicKeyFacts(parentSpki));
  } catch {
    return false;
  }
}

export { CURVE_OID };

/**
 * The fullName URIs of every CRL Distribution Point (RFC 5280 §4.2.1.13), in order; [] without
 * the extension or on a parse error: how a revocation finds the CRL shard of a certificate the
 * mount signed but did not store (docs/pki-revocation-crl.md "Sharded CRLs").
 */
export function crlDistributionPointUrls(der: Uint8Array<ArrayBuffer>): string[] {
  try {
    const ext = new x509.X509Certificate(der).getExtension(x509.CRLDistributionPointsExtension);
    const names = (ext?.distributionPoints ?? []).flatMap((dp) => dp.distributionPoint?.fullName ?? []);
    return names.flatMap((name) => (name.uniformResourceIdentifier ? [name.uniformResourceIdentifier] : []));
  } catch {
    return [];
  }
}
