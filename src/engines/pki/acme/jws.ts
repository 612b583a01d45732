/**
 * ACME request authentication (RFC 8555 §6.2–6.4): the flattened JSON JWS every POST carries,
 * its protected header (`alg`, `nonce`, `url`, exactly one of `jwk` / `kid`), signature checks
 * for RS256, ES256, ES384 and EdDSA (Ed25519) through `jose`, the account key's RFC 7638
 * thumbprint, the External Account Binding's HMAC JWS (§7.3.4) and key-change's inner JWS
 * (§7.3.5). Pure: nothing here reads storage; every failure is an AcmeError.
 */
import { calculateJwkThumbprint, flattenedVerify, importJWK, type FlattenedJWSInput, type JWK } from "jose";
import { base64UrlToBytes } from "../../../core/encoding";
import { parseJsonLimited } from "../../../core/json";
import { AcmeError, acmeError } from "./problem";

/** Account key algorithms (RFC 8555 §6.2: no "none", no MAC); Vault accepts the same. */
export const ACCOUNT_ALGS = ["RS256", "ES256", "ES384", "EdDSA", "Ed25519"] as const;
const EAB_ALGS = ["HS256", "HS384", "HS512"];

export interface ProtectedHeader {
  alg: string;
  nonce: string | null;
  url: string;
  jwk: JWK | null;
  kid: string | null;
}

export interface ParsedJws {
  flat: FlattenedJWSInput;
  header: ProtectedHeader;
  /** The raw protected header object (for checks the caller adds). */
  raw: Record<string, unknown>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function decodeJsonPart(part: string, what: string): unknown {
  let text: string;
  try {
    if (!/^[A-Za-z0-9_-]*$/.test(part)) throw new Error("not base64url");
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(base64UrlToBytes(part));
  } catch {
    throw acmeError("malformed", `${what} is not base64url-encoded UTF-8`);
  }
  const parsed = parseJsonLimited(text);
  if (!parsed.ok) throw acmeError("malformed", `${what} is not valid JSON`);
  return parsed.value;
}

/** A flattened JWS object from a JSON value (a request body, or key-change's payload). */
export function parseFlattened(value: unknown, what = "request body"): ParsedJws {
  if (!isObject(value)) throw acmeError("malformed", `${what}: expected a flattened JWS JSON object`);
  if ("signatures" in value) throw acmeError("malformed", `${what}: the general JWS serialization is not supported; use the flattened form`);
  if ("header" in value) throw acmeError("malformed", `${what}: the JWS unprotected header must not be used (RFC 8555 §6.2)`);
  for (const k of ["protected", "payload", "signature"] as const) {
    if (typeof value[k] !== "string") throw acmeError("malformed", `${what}: missing or invalid '${k}' member`);
  }
  const flat: FlattenedJWSInput = { protected: value.protected as string, payload: value.payload as string, signature: value.signature as string };
  const raw = decodeJsonPart(flat.protected ?? "", `${what}: 'protected'`);
  if (!isObject(raw)) throw acmeError("malformed", `${what}: 'protected' must be a JSON object`);
  const alg = raw.alg;
  if (typeof alg !== "string" || alg === "") throw acmeError("malformed", `${what}: 'protected' lacks 'alg'`);
  const url = raw.url;
  if (typeof url !== "string" || url === "") throw acmeError("malformed", `${what}: 'protected' lacks 'url'`);
  if (raw.nonce !== undefined && typeof raw.nonce !== "string") throw acmeError("malformed", `${what}: 'nonce' must be a string`);
  if (raw.jwk !== undefined && !isObject(raw.jwk)) throw acmeError("malformed", `${what}: 'jwk' must be a JSON object`);
  if (raw.kid !== undefined && typeof raw.kid !== "string") throw acmeError("malformed", `${what}: 'kid' must be a string`);
  return {
    flat,
    raw,
    header: {
      alg,
      url,
      nonce: typeof raw.nonce === "string" ? raw.nonce : null,
      jwk: isObject(raw.jwk) ? (raw.jwk as JWK) : null,
      kid: typeof raw.kid === "string" ? raw.kid : null,
    },
  };
}

/** The request body as a flattened JWS. */
export function parseJwsBody(body: Uint8Array): ParsedJws {
  const text = new TextDecoder().decode(body).trim();
  if (text === "") throw acmeError("malformed", "request body is empty: ACME requests are JWS-signed POSTs (RFC 8555 §6.2)");
  const parsed = parseJsonLimited(text);
  if (!parsed.ok) throw acmeError("malformed", "request body is not valid JSON");
  return parseFlattened(parsed.value);
}

/** The public members of a JWK (RFC 7638 thumbprints and stored keys never carry private ones). */
export function publicJwk(jwk: JWK): Record<string, unknown> {
  if (jwk.d !== undefined || jwk.p !== undefined || jwk.k !== undefined) throw acmeError("badPublicKey", "'jwk' must be a public key");
  switch (jwk.kty) {
    case "RSA":
      if (typeof jwk.n !== "string" || typeof jwk.e !== "string") throw acmeError("badPublicKey", "RSA 'jwk' lacks 'n' or 'e'");
      return { kty: "RSA", n: jwk.n, e: jwk.e };
    case "EC":
      if (typeof jwk.crv !== "string" || typeof jwk.x !== "string" || typeof jwk.y !== "string") throw acmeError("badPublicKey", "EC 'jwk' lacks 'crv', 'x' or 'y'");
      return { kty: "EC", crv: jwk.crv, x: jwk.x, y: jwk.y };
    case "OKP":
      if (jwk.crv !== "Ed25519" || typeof jwk.x !== "string") throw acmeError("badPublicKey", "OKP 'jwk' must be an Ed25519 key with 'x'");
      return { kty: "OKP", crv: jwk.crv, x: jwk.x };
    default:
      throw acmeError("badPublicKey", `unsupported 'jwk' key type ${JSON.stringify(jwk.kty ?? "")}`);
  }
}

/** RFC 7638 SHA-256 thumbprint, base64url. */
export async function thumbprint(jwk: Record<string, unknown>): Promise<string> {
  try {
    return await calculateJwkThumbprint(jwk as JWK, "sha256");
  } catch {
    throw acmeError("badPublicKey", "cannot compute the thumbprint of 'jwk'");
  }
}

function checkAlg(alg: string): void {
  if (!(ACCOUNT_ALGS as readonly string[]).includes(alg)) {
    throw acmeError("badSignatureAlgorithm", `unsupported JWS 'alg' ${JSON.stringify(alg)}; use one of ${ACCOUNT_ALGS.join(", ")}`);
  }
}

/** A public JWK usable with `alg`: the right key type, and RSA of at least 2048 bits. */
async function importAccountKey(jwk: Record<string, unknown>, alg: string): Promise<CryptoKey> {
  if (jwk.kty === "RSA" && typeof jwk.n === "string" && base64UrlToBytes(jwk.n).length < 256) throw acmeError("badPublicKey", "RSA account keys must have at least 2048 bits");
  let key: CryptoKey | Uint8Array;
  try {
    key = await importJWK(jwk as JWK, alg);
  } catch (e) {
    throw acmeError("badPublicKey", `'jwk' cannot be used with 'alg' ${alg}: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (key instanceof Uint8Array) throw acmeError("badPublicKey", "'jwk' must be a public key");
  return key;
}

/**
 * Verifies an account-key JWS and returns its payload bytes (empty for POST-as-GET). With a
 * stored account key (`kid`), an `alg` that key cannot use is a signature that does not verify.
 */
export async function verifyAccountJws(jws: ParsedJws, jwk: Record<string, unknown>, stored = false): Promise<Uint8Array> {
  checkAlg(jws.header.alg);
  let key: CryptoKey;
  try {
    key = await importAccountKey(jwk, jws.header.alg);
  } catch (e) {
    if (stored) throw acmeError("malformed", "JWS signature verification failed: 'alg' does not fit the account key");
    throw e;
  }
  try {
    const out = await flattenedVerify(jws.flat, key, { algorithms: [...ACCOUNT_ALGS] });
    return out.payload;
  } catch (e) {
    if (e instanceof AcmeError) throw e;
    throw acmeError("malformed", "JWS signature verification failed");
  }
}

/** The payload as a JSON object; null for POST-as-GET (an empty payload, RFC 8555 §6.3). */
export function payloadObject(payload: Uint8Array): Record<string, unknown> | null {
  if (payload.length === 0) return null;
  const parsed = parseJsonLimited(new TextDecoder().decode(payload));
  if (!parsed.ok || !isObject(parsed.value)) throw acmeError("malformed", "JWS payload must be a JSON object");
  return parsed.value;
}

/**
 * The External Account Binding (RFC 8555 §7.3.4): a JWS MACed with the EAB key whose protected
 * header names the key (`kid`) and the newAccount URL, and whose payload is the account's JWK.
 * `keyFor` returns the HMAC key of an EAB id, or null when there is none.
 */
export async function verifyEab(value: unknown, url: string, accountJwk: Record<string, unknown>, keyFor: (kid: string) => Promise<Uint8Array | null>): Promise<string> {
  const eab = parseFlattened(value, "externalAccountBinding");
  const { alg, kid, nonce, url: eabUrl } = eab.header;
  if (!EAB_ALGS.includes(alg)) throw acmeError("badSignatureAlgorithm", `externalAccountBinding: 'alg' must be one of ${EAB_ALGS.join(", ")}`);
  if (kid === null || kid === "") throw acmeError("malformed", "externalAccountBinding: 'protected' lacks 'kid'");
  if (nonce !== null) throw acmeError("malformed", "externalAccountBinding: 'nonce' must not be present");
  if (eabUrl !== url) throw acmeError("unauthorized", `externalAccountBinding: invalid value for 'url': got '${eabUrl}' expected '${url}'`);
  const key = await keyFor(kid);
  if (!key) throw acmeError("unauthorized", "externalAccountBinding: unknown or already used EAB key id");
  let payload: Uint8Array;
  try {
    payload = (await flattenedVerify(eab.flat, key, { algorithms: [alg] })).payload;
  } catch {
    throw acmeError("unauthorized", "externalAccountBinding: the MAC does not verify with the EAB key");
  }
  const bound = payloadObject(payload);
  if (!bound) throw acmeError("malformed", "externalAccountBinding: the payload must be the account's JWK");
  if ((await thumbprint(publicJwk(bound as JWK))) !== (await thumbprint(accountJwk))) {
    throw acmeError("unauthorized", "externalAccountBinding: the payload is not the account key of the outer JWS");
  }
  return kid;
}

/**
 * key-change's inner JWS (RFC 8555 §7.3.5): signed by the new key, carried in `jwk`, with the
 * outer request's `url`, no `nonce`, and a payload naming the account and its current key.
 * Returns the new key (public members) and the payload's `account` and `oldKey`.
 */
export async function verifyKeyChange(value: unknown, outerUrl: string): Promise<{ jwk: Record<string, unknown>; account: string; oldKey: Record<string, unknown> }> {
  const inner = parseFlattened(value, "key-change inner JWS");
  const { jwk, kid, nonce, url } = inner.header;
  if (!jwk || kid !== null) throw acmeError("malformed", "key-change inner JWS: must carry 'jwk' and not 'kid'");
  if (nonce !== null) throw acmeError("malformed", "key-change inner JWS: 'nonce' must not be present");
  if (url !== outerUrl) throw acmeError("malformed", "key-change inner JWS: 'url' differs from the outer JWS's");
  const pub = publicJwk(jwk);
  const body = payloadObject(await verifyAccountJws(inner, pub));
  if (!body || typeof body.account !== "string" || !isObject(body.oldKey)) {
    throw acmeError("malformed", "key-change inner JWS: the payload needs 'account' and 'oldKey'");
  }
  return { jwk: pub, account: body.account, oldKey: publicJwk(body.oldKey as JWK) };
}
