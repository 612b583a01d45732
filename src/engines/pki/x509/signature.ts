/**
 * Verification of the signature on a signed X.509 structure (a Certificate, a PKCS#10
 * CertificationRequest, a CertificateList: each SEQUENCE { tbs, AlgorithmIdentifier, BIT
 * STRING }) straight through WebCrypto, without the generic ASN.1 schema machinery. EC P-224,
 * which WebCrypto lacks, goes to p224.ts.
 *
 * Invariants: never throws; anything malformed, unsupported or mismatched (an RSA key under an
 * ECDSA algorithm, a PSS MGF1 hash other than the message hash, which WebCrypto cannot express)
 * answers false. The algorithms are those @peculiar/x509 verified before (RFC 3279 §2.2, RFC
 * 4055 §3 and §5, RFC 5758 §3.2, RFC 8410 §3): RSA PKCS#1 v1.5 and RSA-PSS, ECDSA, Ed25519,
 * each with SHA-1 or SHA-2 (SHA-224 only on P-224, the one implementation that has it).
 */
import { TAG, children, decodeOid, expectTag, parse, type Node } from "./der";
import type { PublicKeyFacts } from "./asn1";
import { verifyP224 } from "./p224";

const HASH_BY_OID: Record<string, string> = {
  "1.3.14.3.2.26": "SHA-1",
  "2.16.840.1.101.3.4.2.4": "SHA-224",
  "2.16.840.1.101.3.4.2.1": "SHA-256",
  "2.16.840.1.101.3.4.2.2": "SHA-384",
  "2.16.840.1.101.3.4.2.3": "SHA-512",
};

type Scheme = "ECDSA" | "RSASSA-PKCS1-v1_5" | "RSA-PSS" | "Ed25519";

/** Signature algorithm OIDs → scheme and hash. RSA-PSS takes its hash from the parameters. */
const SIGNATURE_ALGORITHMS: Record<string, { scheme: Scheme; hash: string }> = {
  "1.2.840.10045.4.1": { scheme: "ECDSA", hash: "SHA-1" },
  "1.2.840.10045.4.3.1": { scheme: "ECDSA", hash: "SHA-224" },
  "1.2.840.10045.4.3.2": { scheme: "ECDSA", hash: "SHA-256" },
  "1.2.840.10045.4.3.3": { scheme: "ECDSA", hash: "SHA-384" },
  "1.2.840.10045.4.3.4": { scheme: "ECDSA", hash: "SHA-512" },
  "1.2.840.113549.1.1.5": { scheme: "RSASSA-PKCS1-v1_5", hash: "SHA-1" },
  "1.2.840.113549.1.1.14": { scheme: "RSASSA-PKCS1-v1_5", hash: "SHA-224" },
  "1.2.840.113549.1.1.11": { scheme: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
  "1.2.840.113549.1.1.12": { scheme: "RSASSA-PKCS1-v1_5", hash: "SHA-384" },
  "1.2.840.113549.1.1.13": { scheme: "RSASSA-PKCS1-v1_5", hash: "SHA-512" },
  "1.2.840.113549.1.1.10": { scheme: "RSA-PSS", hash: "" },
  "1.3.101.112": { scheme: "Ed25519", hash: "" },
};

const MGF1 = "1.2.840.113549.1.1.8";
const CURVES: Record<number, { name: string; size: number }> = { 256: { name: "P-256", size: 32 }, 384: { name: "P-384", size: 48 }, 521: { name: "P-521", size: 66 } };

/** The hash of a DER AlgorithmIdentifier of a hash function, or "" when unknown. */
function hashOf(algId: Node | undefined): string {
  if (!algId || algId.tag !== TAG.SEQUENCE) return "";
  const id = children(algId)[0];
  return id && id.tag === TAG.OID ? (HASH_BY_OID[decodeOid(id.content)] ?? "") : "";
}

/**
 * RFC 4055 §3.1 RSASSA-PSS-params: [0] hash (default SHA-1), [1] MGF1 over a hash (default
 * SHA-1), [2] salt length (default 20), [3] trailer field (must be 1). Null when WebCrypto
 * cannot verify it (another mask function, an MGF1 hash unlike the message hash).
 */
function pssParams(params: Node | undefined): { hash: string; saltLength: number } | null {
  let hash = "SHA-1";
  let mgfHash = "SHA-1";
  let saltLength = 20;
  if (params) {
    for (const field of children(expectTag(params, TAG.SEQUENCE, "RSASSA-PSS parameters"))) {
      const inner = children(field)[0];
      if (field.tag === 0xa0) hash = hashOf(inner);
      else if (field.tag === 0xa1) {
        const [mgfOid, mgfParam] = inner && inner.tag === TAG.SEQUENCE ? children(inner) : [];
        if (!mgfOid || mgfOid.tag !== TAG.OID || decodeOid(mgfOid.content) !== MGF1) return null;
        mgfHash = hashOf(mgfParam);
      } else if (field.tag === 0xa2) {
        const n = expectTag(inner, TAG.INTEGER, "salt length").content;
        if (n.length > 2 || ((n[0] ?? 0) & 0x80) !== 0) return null;
        saltLength = n.reduce((v, b) => v * 256 + b, 0);
      } else if (field.tag === 0xa3) {
        const t = expectTag(inner, TAG.INTEGER, "trailer field").content;
        if (t.length !== 1 || t[0] !== 1) return null;
      } else return null;
    }
  }
  if (hash === "" || hash !== mgfHash) return null;
  return { hash, saltLength };
}

/** DER Ecdsa-Sig-Value (RFC 3279 §2.2.3) → WebCrypto's r‖s, each left-padded to `size`. */
function ecdsaRaw(der: Uint8Array<ArrayBuffer>, size: number): Uint8Array<ArrayBuffer> | null {
  const parts = children(expectTag(parse(der), TAG.SEQUENCE, "ECDSA signature"));
  if (parts.length !== 2) return null;
  const out = new Uint8Array(size * 2);
  for (let i = 0; i < 2; i++) {
    let v = expectTag(parts[i], TAG.INTEGER, "ECDSA signature").content;
    if (v.length === 0 || ((v[0] ?? 0) & 0x80) !== 0) return null;
    while (v.length > 1 && v[0] === 0) v = v.subarray(1);
    if (v.length > size) return null;
    out.set(v, i * size + size - v.length);
  }
  return out;
}

/**
 * Whether `signature` (the BIT STRING's content, unused-bits octet included) is a valid
 * signature over `tbs` under `algorithm` (the AlgorithmIdentifier node) by the key in `spki`,
 * whose facts the caller has read (publicKeyFacts). Never throws.
 */
export async function verifySignature(
  tbs: Uint8Array<ArrayBuffer>,
  algorithm: Node,
  signature: Uint8Array<ArrayBuffer>,
  spki: Uint8Array<ArrayBuffer>,
  facts: PublicKeyFacts,
): Promise<boolean> {
  try {
    const [algOid, params] = children(expectTag(algorithm, TAG.SEQUENCE, "signature algorithm"));
    const alg = SIGNATURE_ALGORITHMS[decodeOid(expectTag(algOid, TAG.OID, "signature algorithm").content)];
    if (!alg || signature[0] !== 0) return false;
    const sig = signature.subarray(1);
    if (alg.scheme === "ECDSA") {
      if (facts.type !== "ec") return false;
      if (facts.bits === 224) return verifyP224(spki, alg.hash, tbs, sig, "der");
      const curve = CURVES[facts.bits];
      if (!curve || alg.hash === "SHA-224") return false;
      const raw = ecdsaRaw(sig, curve.size);
      if (!raw) return false;
      const key = await crypto.subtle.importKey("spki", spki, { name: "ECDSA", namedCurve: curve.name }, false, ["verify"]);
      return await crypto.subtle.verify({ name: "ECDSA", hash: alg.hash }, key, raw, tbs);
    }
    if (alg.scheme === "Ed25519") {
      if (facts.type !== "ed25519") return false;
      const key = await crypto.subtle.importKey("spki", spki, { name: "Ed25519" }, false, ["verify"]);
      return await crypto.subtle.verify({ name: "Ed25519" }, key, sig, tbs);
    }
    if (facts.type !== "rsa") return false;
    if (alg.scheme === "RSA-PSS") {
      const pss = pssParams(params);
      if (!pss || pss.hash === "SHA-224") return false;
      const key = await crypto.subtle.importKey("spki", spki, { name: "RSA-PSS", hash: pss.hash }, false, ["verify"]);
      return await crypto.subtle.verify({ name: "RSA-PSS", saltLength: pss.saltLength }, key, sig, tbs);
    }
    if (alg.hash === "SHA-224") return false;
    const key = await crypto.subtle.importKey("spki", spki, { name: "RSASSA-PKCS1-v1_5", hash: alg.hash }, false, ["verify"]);
    return await crypto.subtle.verify({ name: "RSASSA-PKCS1-v1_5" }, key, sig, tbs);
  } catch {
    return false;
  }
}
