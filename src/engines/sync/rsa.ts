/**
 * RSA private keys of repository-host apps (Vault API: /v1/sys/sync/github-apps, GitHub REST API, Actions secrets): the host
 * issues PKCS#1 PEM (`BEGIN RSA PRIVATE KEY`); PKCS#8 (`BEGIN PRIVATE KEY`) is accepted too.
 * WebCrypto imports only PKCS#8, so PKCS#1 DER is wrapped in a PrivateKeyInfo (RFC 5208) here
 * with a few lines of DER instead of a library. The fingerprint is the one the host displays:
 * "SHA256:" + Base64(SHA-256(DER SubjectPublicKeyInfo)), i.e.
 * `openssl rsa -in key.pem -pubout -outform DER | openssl sha256 -binary | openssl base64`.
 * Error messages never contain key material.
 */
import { base64UrlToBytes, bytesToBase64, concatBytes, derTlv, pemArmor, pemBodyBytes, sha256, toPem, type PemBlock } from "../../core/encoding";

export class KeyError extends Error {}

const RSA_IMPORT = { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" } as const;

// INTEGER 0, then AlgorithmIdentifier { rsaEncryption (1.2.840.113549.1.1.1), NULL }.
const VERSION_0 = Uint8Array.of(0x02, 0x01, 0x00);
const RSA_ALGORITHM = Uint8Array.of(0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00);

/** PrivateKeyInfo ::= SEQUENCE { version, privateKeyAlgorithm, privateKey OCTET STRING }. */
export function wrapPkcs1(pkcs1: Uint8Array): Uint8Array<ArrayBuffer> {
  return derTlv(0x30, concatBytes([VERSION_0, RSA_ALGORITHM, derTlv(0x04, pkcs1)]));
}

/** The single PEM block of a text; refuses several blocks, headers and bad base64. */
export function parsePem(text: string): PemBlock {
  const blocks = pemArmor(text);
  if (blocks.length === 0) throw new KeyError("not a PEM-encoded key");
  if (blocks.length > 1) throw new KeyError("expected exactly one PEM block");
  const { label = "", body = "" } = blocks[0] ?? {};
  if (body.includes(":")) throw new KeyError("encrypted or annotated PEM keys are not supported");
  const der = pemBodyBytes(body);
  // A body of padding alone decodes to nothing: not a key either.
  if (der === null || der.length === 0) throw new KeyError("the PEM body is not valid base64");
  return { label, der };
}

export interface RsaKeyInfo {
  /** Normalised PKCS#8 PEM (what is sealed at rest). */
  pkcs8Pem: string;
  /** "SHA256:<base64>" of the public key, as the host displays it. */
  fingerprint: string;
  modulusBits: number;
}

/** Parses an RSA private key in PKCS#1 or PKCS#8 PEM; computes the host's fingerprint. */
export async function parseRsaPrivateKey(pem: string): Promise<RsaKeyInfo> {
  const { label, der } = parsePem(pem);
  let pkcs8: Uint8Array<ArrayBuffer>;
  if (label === "RSA PRIVATE KEY") pkcs8 = wrapPkcs1(der);
  else if (label === "PRIVATE KEY") pkcs8 = der;
  else if (label === "ENCRYPTED PRIVATE KEY") throw new KeyError("encrypted private keys are not supported; export the key without a passphrase");
  else throw new KeyError(`expected an RSA private key (BEGIN RSA PRIVATE KEY or BEGIN PRIVATE KEY), got "${label}"`);
  let key: CryptoKey;
  try {
    key = await crypto.subtle.importKey("pkcs8", pkcs8, RSA_IMPORT, true, ["sign"]);
  } catch {
    throw new KeyError("the key could not be parsed as an RSA private key");
  }
  const jwk = (await crypto.subtle.exportKey("jwk", key)) as JsonWebKey;
  if (!jwk.n || !jwk.e) throw new KeyError("the key could not be parsed as an RSA private key");
  const pub = await crypto.subtle.importKey("jwk", { kty: "RSA", n: jwk.n, e: jwk.e, ext: true }, RSA_IMPORT, true, ["verify"]);
  const spki = new Uint8Array((await crypto.subtle.exportKey("spki", pub)) as ArrayBuffer);
  const digest = await sha256(spki);
  const modulusBits = base64UrlToBytes(jwk.n).length * 8;
  return { pkcs8Pem: `${toPem("PRIVATE KEY", pkcs8)}\n`, fingerprint: `SHA256:${bytesToBase64(digest)}`, modulusBits };
}
