/**
 * NIST P-224 (secp224r1) ECDSA in software. WebCrypto — and so workerd — implements only P-256,
 * P-384 and P-521, while the engine must accept `ec` keys of 224 bits (Vault API /pki/roles/:name, key_bits). This
 * is the only module that imports @noble/curves / @noble/hashes; x509.ts reaches it through its
 * Signer abstraction, so the rest of the engine never sees which implementation signs.
 *
 * Keys travel in the same containers as WebCrypto's: PKCS#8 (RFC 5208) around an ECPrivateKey
 * (RFC 5915) with the public point, and SubjectPublicKeyInfo with id-ecPublicKey and the
 * secp224r1 named curve (RFC 5480 §2.1.1). Signatures follow FIPS 186-4 §6.4 with the hash
 * truncated to the order's 224 bits; RFC 6979 deterministic nonces hedged with fresh randomness.
 */
import { ecdsa, weierstrass } from "@noble/curves/abstract/weierstrass.js";
import { sha1 } from "@noble/hashes/legacy.js";
import { sha224, sha256, sha384, sha512 } from "@noble/hashes/sha2.js";
import { DerError, TAG, bitString, children, ctxCons, decodeOid, expectTag, int, octets, oid, parse, seq } from "./der";

const EC_PUBLIC_KEY = "1.2.840.10045.2.1";
const SECP224R1 = "1.3.132.0.33";
const SCALAR_BYTES = 28;

/**
 * Domain parameters of secp224r1: SEC 2 v2 §2.6.1, identical to FIPS 186-4 Appendix D.1.2.2
 * "Curve P-224" (checked against `openssl ecparam -name secp224r1 -param_enc explicit -text`).
 */
const P224_CURVE = {
  p: BigInt("0xffffffffffffffffffffffffffffffff000000000000000000000001"),
  n: BigInt("0xffffffffffffffffffffffffffff16a2e0b8f03e13dd29455c5c2a3d"),
  h: BigInt(1),
  a: BigInt("0xfffffffffffffffffffffffffffffffefffffffffffffffffffffffe"),
  b: BigInt("0xb4050a850c04b3abf54132565044b0b7d7bfd8ba270b39432355ffb4"),
  Gx: BigInt("0xb70e0cbd6bb4bf7f321390b94a03c1d356c21122343280d6115c1d21"),
  Gy: BigInt("0xbd376388b5f723fb4c22dfe6cd4375a05a07476444d5819985007e34"),
};

// The hash given here drives RFC 6979's HMAC-DRBG; message digests are computed by the caller
// (prehash: false) so certificates can name any of the SHA-2 family.
const curve = ecdsa(weierstrass(P224_CURVE), sha256);

const HASHES: Record<string, (data: Uint8Array) => Uint8Array> = {
  "SHA-1": (d) => sha1(d),
  "SHA-224": (d) => sha224(d),
  "SHA-256": (d) => sha256(d),
  "SHA-384": (d) => sha384(d),
  "SHA-512": (d) => sha512(d),
};

function digest(hash: string, data: Uint8Array): Uint8Array {
  const fn = HASHES[hash];
  if (!fn) throw new DerError(`unsupported hash ${hash || "(none)"} for EC P-224`);
  return fn(data);
}

/**
 * A P-224 private key. It has the shape of a WebCrypto CryptoKey (type, algorithm, usages) so it
 * fits the engine's Signer, but crypto.subtle cannot use it: sign through x509.ts `signBytes`.
 * The scalar is in a private field, so it never shows in JSON or logs.
 */
export class P224PrivateKey {
  readonly type = "private";
  readonly extractable = false;
  readonly algorithm = { name: "ECDSA", namedCurve: "P-224" };
  readonly usages = ["sign"];
  readonly #scalar: Uint8Array;

  constructor(scalar: Uint8Array) {
    if (!curve.utils.isValidSecretKey(scalar)) throw new DerError("EC P-224 private key is out of range");
    this.#scalar = scalar;
  }

  /** Signs `data` hashed with `hash`; returns r‖s (56 bytes), as WebCrypto's ECDSA does. */
  sign(hash: string, data: Uint8Array): Uint8Array<ArrayBuffer> {
    const sig = curve.sign(digest(hash, data), this.#scalar, { prehash: false, lowS: false, extraEntropy: true, format: "compact" });
    return Uint8Array.from(sig);
  }

  /** The uncompressed public point (SEC 1 §2.3.3). */
  publicPoint(): Uint8Array {
    return curve.getPublicKey(this.#scalar, false);
  }

  toJSON(): string {
    return "[EC P-224 private key]";
  }
}

export function isP224Key(key: unknown): key is P224PrivateKey {
  return key instanceof P224PrivateKey;
}

/** SubjectPublicKeyInfo for a P-224 point (RFC 5480 §2.1.1, §2.2). */
function spkiOf(point: Uint8Array): Uint8Array<ArrayBuffer> {
  return seq(seq(oid(EC_PUBLIC_KEY), oid(SECP224R1)), bitString(point));
}

/** The private scalar of a PKCS#8 P-224 key, left-padded to 28 bytes (RFC 5915 §3). */
function scalarOf(pkcs8: Uint8Array<ArrayBuffer>): Uint8Array {
  const [, algId, inner] = children(expectTag(parse(pkcs8), TAG.SEQUENCE, "private key"));
  const [algOid, param] = children(expectTag(algId, TAG.SEQUENCE, "private key algorithm"));
  if (decodeOid(expectTag(algOid, TAG.OID, "algorithm").content) !== EC_PUBLIC_KEY || !param || param.tag !== TAG.OID || decodeOid(param.content) !== SECP224R1) {
    throw new DerError("not an EC P-224 private key");
  }
  const ecKey = expectTag(parse(expectTag(inner, TAG.OCTET_STRING, "private key").content), TAG.SEQUENCE, "EC private key");
  const raw = expectTag(children(ecKey)[1], TAG.OCTET_STRING, "EC private key").content;
  if (raw.length > SCALAR_BYTES) throw new DerError("EC P-224 private key is too long");
  const scalar = new Uint8Array(SCALAR_BYTES);
  scalar.set(raw, SCALAR_BYTES - raw.length);
  return scalar;
}

/** Imports a PKCS#8 P-224 key for signing. */
export function importP224PrivateKey(pkcs8: Uint8Array<ArrayBuffer>): P224PrivateKey {
  return new P224PrivateKey(scalarOf(pkcs8));
}

/** The SubjectPublicKeyInfo of a PKCS#8 P-224 key. */
export function p224PublicKeyOf(pkcs8: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> {
  return spkiOf(importP224PrivateKey(pkcs8).publicPoint());
}

/** A fresh key pair as PKCS#8 (with the public point, like WebCrypto's export) and SPKI. */
export function generateP224KeyPair(): { pkcs8: Uint8Array<ArrayBuffer>; spki: Uint8Array<ArrayBuffer> } {
  const { secretKey } = curve.keygen();
  const point = curve.getPublicKey(secretKey, false);
  // RFC 5915 §3: version 1, the scalar, and the public key in [1]; the curve is named in the
  // PKCS#8 AlgorithmIdentifier, so [0] parameters are left out.
  const ecPrivateKey = seq(int(1), octets(secretKey), ctxCons(1, bitString(point)));
  const pkcs8 = seq(int(0), seq(oid(EC_PUBLIC_KEY), oid(SECP224R1)), octets(ecPrivateKey));
  return { pkcs8, spki: spkiOf(point) };
}

/**
 * Verifies an ECDSA signature (DER Ecdsa-Sig-Value, RFC 3279 §2.2.3, or raw r‖s) over `data`
 * by the P-224 key in `spki`. Any malformed input answers false. High-S signatures are valid
 * ECDSA (OpenSSL makes them), so they are accepted.
 */
export function verifyP224(spki: Uint8Array<ArrayBuffer>, hash: string, data: Uint8Array, signature: Uint8Array, format: "der" | "compact"): boolean {
  try {
    const [, bits] = children(expectTag(parse(spki), TAG.SEQUENCE, "public key"));
    const point = expectTag(bits, TAG.BIT_STRING, "public key").content.subarray(1);
    return curve.verify(signature, digest(hash, data), point, { prehash: false, lowS: false, format });
  } catch {
    return false;
  }
}
