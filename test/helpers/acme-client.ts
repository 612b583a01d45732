/**
 * A small ACME (RFC 8555) client for integration tests, on WebCrypto only: account keys
 * (ES256, ES384, RS256, EdDSA), flattened JWS with `jwk` or `kid`, nonces, External Account
 * Binding (HS256) and key-change's inner JWS. Every request goes through the Worker's fetch
 * (SELF), as a real client's would. Also: an independent check that a certificate is signed by
 * a CA, with @peculiar/asn1-x509 (not the library Lanyard signs with).
 */
import { SELF } from "cloudflare:test";
import { AsnConvert } from "@peculiar/asn1-schema";
import { Certificate } from "@peculiar/asn1-x509";

export type Alg = "ES256" | "ES384" | "RS256" | "EdDSA";

export interface AccountKey {
  alg: Alg;
  privateKey: CryptoKey;
  /** The public JWK (only the members RFC 7638 uses). */
  jwk: Record<string, string>;
}

export interface AcmeResponse {
  status: number;
  headers: Headers;
  text: string;
  // Parsed JSON of any shape: tests assert it field by field.
  body: any;
}

const enc = new TextEncoder();

export function b64url(data: Uint8Array | string): string {
  const bytes = typeof data === "string" ? enc.encode(data) : data;
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function fromB64url(s: string): Uint8Array<ArrayBuffer> {
  const bin = atob(s.replace(/-/g, "+").replace(/_/g, "/"));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

type GenParams = Parameters<SubtleCrypto["generateKey"]>[0];
type SignParams = Parameters<SubtleCrypto["sign"]>[0];

const PARAMS: Record<Alg, { gen: GenParams; sign: SignParams }> = {
  ES256: { gen: { name: "ECDSA", namedCurve: "P-256" }, sign: { name: "ECDSA", hash: "SHA-256" } },
  ES384: { gen: { name: "ECDSA", namedCurve: "P-384" }, sign: { name: "ECDSA", hash: "SHA-384" } },
  RS256: { gen: { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" }, sign: { name: "RSASSA-PKCS1-v1_5" } },
  EdDSA: { gen: { name: "Ed25519" }, sign: { name: "Ed25519" } },
};

export async function newKey(alg: Alg = "ES256"): Promise<AccountKey> {
  const pair = (await crypto.subtle.generateKey(PARAMS[alg].gen, true, ["sign", "verify"])) as CryptoKeyPair;
  const full = (await crypto.subtle.exportKey("jwk", pair.publicKey)) as JsonWebKey;
  const jwk: Record<string, string> = {};
  for (const k of ["kty", "crv", "x", "y", "n", "e"] as const) if (typeof full[k] === "string") jwk[k] = full[k];
  return { alg, privateKey: pair.privateKey, jwk };
}

/** A key pair's public key as a JWK (for revoking with a certificate's own key). */
export async function keyFromPair(pair: CryptoKeyPair, alg: Alg): Promise<AccountKey> {
  const full = (await crypto.subtle.exportKey("jwk", pair.publicKey)) as JsonWebKey;
  const jwk: Record<string, string> = {};
  for (const k of ["kty", "crv", "x", "y", "n", "e"] as const) if (typeof full[k] === "string") jwk[k] = full[k];
  return { alg, privateKey: pair.privateKey, jwk };
}

export async function thumbprint(jwk: Record<string, string>): Promise<string> {
  const members = jwk.kty === "RSA" ? ["e", "kty", "n"] : jwk.kty === "EC" ? ["crv", "kty", "x", "y"] : ["crv", "kty", "x"];
  const canonical = `{${members.map((m) => `${JSON.stringify(m)}:${JSON.stringify(jwk[m])}`).join(",")}}`;
  return b64url(new Uint8Array(await crypto.subtle.digest("SHA-256", enc.encode(canonical))));
}

export interface JwsHeader {
  alg?: string;
  nonce?: string;
  url: string;
  jwk?: Record<string, string>;
  kid?: string;
  [k: string]: unknown;
}

/** A flattened JWS; `payload` "" is POST-as-GET. */
export async function signJws(key: AccountKey, header: JwsHeader, payload: unknown | ""): Promise<Record<string, string>> {
  const protectedB64 = b64url(JSON.stringify({ alg: key.alg, ...header }));
  const payloadB64 = payload === "" ? "" : b64url(JSON.stringify(payload));
  const sig = await crypto.subtle.sign(PARAMS[key.alg].sign, key.privateKey, enc.encode(`${protectedB64}.${payloadB64}`));
  return { protected: protectedB64, payload: payloadB64, signature: b64url(new Uint8Array(sig)) };
}

/** The External Account Binding JWS (RFC 8555 §7.3.4), MACed with the EAB key. */
export async function eabJws(eabId: string, eabKeyB64url: string, url: string, accountJwk: Record<string, string>): Promise<Record<string, string>> {
  const protectedB64 = b64url(JSON.stringify({ alg: "HS256", kid: eabId, url }));
  const payloadB64 = b64url(JSON.stringify(accountJwk));
  const mac = await crypto.subtle.importKey("raw", fromB64url(eabKeyB64url), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const sig = await crypto.subtle.sign("HMAC", mac, enc.encode(`${protectedB64}.${payloadB64}`));
  return { protected: protectedB64, payload: payloadB64, signature: b64url(new Uint8Array(sig)) };
}

export async function send(method: string, url: string, body?: string): Promise<AcmeResponse> {
  const res = await SELF.fetch(url, { method, headers: body !== undefined ? { "content-type": "application/jose+json" } : {}, body });
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = text;
  }
  return { status: res.status, headers: res.headers, text, body: parsed };
}

/** One client: a directory, an account key and (after newAccount) its kid. */
export class AcmeClient {
  kid: string | null = null;
  dir: Record<string, string> = {};

  constructor(
    readonly dirUrl: string,
    public key: AccountKey,
  ) {}

  static async open(dirUrl: string, alg: Alg = "ES256"): Promise<AcmeClient> {
    const c = new AcmeClient(dirUrl, await newKey(alg));
    const r = await send("GET", dirUrl);
    if (r.status !== 200) throw new Error(`directory ${dirUrl}: ${r.status} ${r.text}`);
    c.dir = r.body;
    return c;
  }

  async nonce(): Promise<string> {
    const r = await send("GET", this.dir.newNonce ?? "");
    const n = r.headers.get("replay-nonce");
    if (!n) throw new Error(`new-nonce: ${r.status} ${r.text}`);
    return n;
  }

  /** A signed POST; `kid` unless `useJwk` (new-account) or the client has none. */
  async post(url: string, payload: unknown | "", opts: { useJwk?: boolean; nonce?: string; key?: AccountKey; header?: Partial<JwsHeader> } = {}): Promise<AcmeResponse> {
    const key = opts.key ?? this.key;
    const who = opts.useJwk || !this.kid ? { jwk: key.jwk } : { kid: this.kid };
    const jws = await signJws(key, { nonce: opts.nonce ?? (await this.nonce()), url, ...who, ...opts.header }, payload);
    return send("POST", url, JSON.stringify(jws));
  }

  async newAccount(payload: Record<string, unknown> = { termsOfServiceAgreed: true }): Promise<AcmeResponse> {
    const r = await this.post(this.dir.newAccount ?? "", payload, { useJwk: true });
    if (r.status === 201 || r.status === 200) this.kid = r.headers.get("location");
    return r;
  }

  async keyAuthorization(token: string): Promise<string> {
    return `${token}.${await thumbprint(this.key.jwk)}`;
  }
}

/** The bytes of the first TLV inside a DER SEQUENCE (a certificate's TBSCertificate). */
function firstChild(der: Uint8Array): Uint8Array {
  const lengthAt = (at: number): { len: number; header: number } => {
    const b = der[at + 1] ?? 0;
    if (b < 0x80) return { len: b, header: 2 };
    let len = 0;
    for (let i = 0; i < (b & 0x7f); i++) len = (len << 8) | (der[at + 2 + i] ?? 0);
    return { len, header: 2 + (b & 0x7f) };
  };
  const outer = lengthAt(0);
  const inner = lengthAt(outer.header);
  return der.slice(outer.header, outer.header + inner.header + inner.len);
}

/** ECDSA-Sig-Value (DER) → the fixed-size r‖s WebCrypto verifies. */
function ecdsaRaw(sig: Uint8Array, size: number): Uint8Array<ArrayBuffer> {
  const ints: Uint8Array[] = [];
  let at = 2;
  if ((sig[1] ?? 0) & 0x80) at += (sig[1] ?? 0) & 0x7f;
  for (let k = 0; k < 2; k++) {
    const len = sig[at + 1] ?? 0;
    ints.push(sig.slice(at + 2, at + 2 + len));
    at += 2 + len;
  }
  const out = new Uint8Array(size * 2);
  ints.forEach((v, i) => {
    const trimmed = v.slice(Math.max(0, v.length - size));
    out.set(trimmed, (i + 1) * size - trimmed.length);
  });
  return out;
}

const pemDer = (pem: string): Uint8Array<ArrayBuffer> => fromB64url(pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "").replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, ""));

/** PEM blocks of a chain, in order. */
export const pemBlocks = (chain: string): string[] => chain.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];

/**
 * Whether `leafPem` is signed by the P-256 ECDSA key of `caPem` and names it as issuer, parsed
 * with @peculiar/asn1-x509 and checked with WebCrypto.
 */
export async function signedByEcCa(leafPem: string, caPem: string): Promise<boolean> {
  const leafDer = pemDer(leafPem);
  const leaf = AsnConvert.parse(leafDer, Certificate);
  const ca = AsnConvert.parse(pemDer(caPem), Certificate);
  const sameName = b64url(new Uint8Array(AsnConvert.serialize(leaf.tbsCertificate.issuer))) === b64url(new Uint8Array(AsnConvert.serialize(ca.tbsCertificate.subject)));
  const spki = AsnConvert.serialize(ca.tbsCertificate.subjectPublicKeyInfo);
  const key = await crypto.subtle.importKey("spki", spki, { name: "ECDSA", namedCurve: "P-256" }, false, ["verify"]);
  const sig = ecdsaRaw(new Uint8Array(leaf.signatureValue), 32);
  const ok = await crypto.subtle.verify({ name: "ECDSA", hash: "SHA-256" }, key, sig, firstChild(leafDer));
  return sameName && ok;
}
