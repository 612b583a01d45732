/**
 * The signature check of a JWT login (Vault API: /auth/jwt/login): a compact JWS (RFC 7515
 * §7.1) whose `alg` is one the config allows, verified with `jose` against the configured keys
 * (./keys.ts). Claim checks are ./claims.ts; this module only answers "which claims did a key we
 * trust sign?".
 *
 * Algorithm rules (RFC 8725 §3.1, §3.2): the algorithm is checked against the allowed list
 * *before* any key is touched, so `alg: none`, HMAC (`HS256` with a public key as the secret) or
 * any other algorithm outside `jwt_supported_algs` (empty = Vault's list: RS256/384/512,
 * ES256/384/512, PS256/384/512, EdDSA) is refused whatever the key set holds. A key is used only
 * for the algorithm family it belongs to (RSA for RS and PS, the matching curve for ES, Ed25519 for
 * EdDSA), and a JWK's own `alg`/`use`/`key_ops` restrict it further. jose refuses unknown
 * `crit` headers (RFC 7515 §4.1.11). JWE tokens (five parts) are not JWTs this method accepts.
 *
 * Errors carry cap's texts under Vault's prefix: `error validating token: error verifying token
 * signature: …` (go-oidc's `failed to verify id token signature` for remote key sets, cap's
 * `no known key successfully validated the token signature` for PEM keys) and `error validating
 * token: invalid algorithm (alg) header parameter: …`. The token is never part of a message.
 */
import { compactVerify, type CryptoKey } from "jose";
import { base64UrlToBytes } from "../../../core/encoding";
import { parseJsonLimited } from "../../../core/json";
import { tokenInvalid, type Claims } from "./claims";
import { importPem, importPublicJwk, jwkFits, KeySourceError, type PublicJwk, type RemoteKeyCache, type RemoteSource } from "./keys";

/** Every algorithm Vault's JWT method knows (cap's supported set); the default when the config lists none. */
export const SUPPORTED_ALGS: readonly string[] = ["RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512", "EdDSA"];

/** A JWT larger than this is refused before any parsing (GitHub's and Kubernetes' are ~1–2 KB). */
export const MAX_JWT_BYTES = 64 * 1024;

export interface JwsHeader {
  alg: string;
  kid?: string;
}

const sigError = (detail: string) => tokenInvalid(`error verifying token signature: ${detail}`);

/** The protected header of a compact JWS, without verifying anything yet. */
export function decodeHeader(token: string): JwsHeader {
  if (token.length > MAX_JWT_BYTES) throw sigError("malformed jwt: token too large");
  const parts = token.split(".");
  if (parts.length !== 3) throw sigError(`malformed jwt: expected 3 parts, got ${parts.length}`);
  let header: unknown;
  try {
    const parsed = parseJsonLimited(new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(base64UrlToBytes(parts[0] ?? "")), 8);
    header = parsed.ok ? parsed.value : null;
  } catch {
    header = null;
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) throw sigError("malformed jwt: the header is not a JSON object");
  const h = header as Record<string, unknown>;
  if (typeof h.alg !== "string") throw sigError("malformed jwt: the header has no alg");
  if (h.kid !== undefined && typeof h.kid !== "string") throw sigError("malformed jwt: kid is not a string");
  return { alg: h.alg, kid: h.kid };
}

/** The allowed algorithms: the config's list, or SUPPORTED_ALGS when it is empty. */
export function allowedAlgs(configured: readonly string[]): readonly string[] {
  return configured.length > 0 ? configured : SUPPORTED_ALGS;
}

/** Refuses `none`, symmetric and any algorithm not in the allowed list. */
export function checkAlgorithm(alg: string, allowed: readonly string[]): void {
  if (alg === "none" || !SUPPORTED_ALGS.includes(alg) || !allowed.includes(alg)) {
    throw tokenInvalid("invalid algorithm (alg) header parameter: token signed with unexpected algorithm");
  }
}

async function verifyWith(token: string, key: CryptoKey, alg: string): Promise<Uint8Array | null> {
  try {
    const { payload } = await compactVerify(token, key, { algorithms: [alg] });
    return payload;
  } catch {
    return null;
  }
}

/** The verified payload as a claims object (RFC 7519 §7.2 step 10). */
function claimsOf(payload: Uint8Array): Claims {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(payload);
  } catch {
    throw tokenInvalid("failed to unmarshal claims");
  }
  const parsed = parseJsonLimited(text, 32);
  if (!parsed.ok || typeof parsed.value !== "object" || parsed.value === null || Array.isArray(parsed.value)) {
    throw tokenInvalid("failed to unmarshal claims");
  }
  return parsed.value as Claims;
}

/** Tries every key of the set that fits the header; the first that verifies wins. */
async function tryJwks(token: string, header: JwsHeader, keys: readonly PublicJwk[]): Promise<Uint8Array | null> {
  for (const jwk of keys) {
    if (header.kid !== undefined && jwk.kid !== header.kid) continue;
    if (!jwkFits(jwk, header.alg)) continue;
    const key = await importPublicJwk(jwk, header.alg);
    if (!key) continue;
    const payload = await verifyWith(token, key, header.alg);
    if (payload) return payload;
  }
  return null;
}

export type KeySet = { kind: "remote"; source: RemoteSource; cache: RemoteKeyCache } | { kind: "pem"; pems: readonly string[] };

const fetchError = (e: unknown): never => {
  if (e instanceof KeySourceError) throw sigError(`fetching keys: ${e.message}`);
  throw e;
};

/**
 * Verifies the token's signature and returns its claims; throws Vault's 400 otherwise. With a
 * remote key set, an unknown `kid` refetches the set once (./keys.ts limits that to once a minute
 * per key-set URL, whatever the `kid`).
 */
export async function verifyJwt(env: Env, token: string, keySet: KeySet, configuredAlgs: readonly string[]): Promise<Claims> {
  const header = decodeHeader(token);
  checkAlgorithm(header.alg, allowedAlgs(configuredAlgs));

  if (keySet.kind === "pem") {
    for (const pem of keySet.pems) {
      const key = await importPem(pem, header.alg);
      if (!key) continue;
      const payload = await verifyWith(token, key, header.alg);
      if (payload) return claimsOf(payload);
    }
    throw sigError("no known key successfully validated the token signature");
  }

  const field = keySet.source.kind === "jwks" ? "jwks_url" : "jwks_uri";
  const view = await keySet.cache.current(env, keySet.source).catch(fetchError);
  const first = await tryJwks(token, header, view.keys);
  if (first) return claimsOf(first);
  // A kid the set has, whose key did not verify: a bad signature, not a rotation.
  if (header.kid !== undefined && view.keys.some((k) => k.kid === header.kid)) throw sigError("failed to verify id token signature");
  const fresh = await keySet.cache.refetchForUnknownKid(env, view, field).catch(fetchError);
  if (fresh) {
    const second = await tryJwks(token, header, fresh);
    if (second) return claimsOf(second);
  }
  throw sigError("failed to verify id token signature");
}
