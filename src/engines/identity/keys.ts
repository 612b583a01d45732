/**
 * Lanyard's plugin-identity issuer (Vault API: /identity/oidc/plugins/.well-known/*, Vault docs
 * "Plugin identity tokens"): ES256 signing keys (RFC 7518 §3.4, P-256 on WebCrypto), their
 * rotation, and the short-lived JWTs secrets sync presents to a cloud's token service instead of a
 * stored credential (RFC 7519; AWS STS AssumeRoleWithWebIdentity, the Microsoft identity
 * platform's client assertions, Google STS token exchange).
 *
 * Invariants (docs/security.md "The identity issuer's keys"):
 * - One key ring for the deployment: every namespace's key set publishes the same keys; the
 *   namespace is in each token's `iss` and `sub`.
 * - A key signs for ROTATION_PERIOD_MS, then is rotated: a new key signs, the old one stays in the
 *   key set until every token it signed has expired (MAX_TOKEN_TTL_S after rotation, plus
 *   CLOCK_SKEW_MS), then it is withdrawn and deleted. A token is only ever signed by a key that
 *   is in the key set (a key is published from its insert until after its last token expired).
 * - The private key leaves this module only sealed (./store.ts); the opened CryptoKey is cached
 *   by its sealed text, non-extractable.
 */
import { BoundedCache } from "../../core/bounded-cache";
import type { Db } from "../../core/db/client";
import type { SealKeys } from "../../core/db/seal";
import { bytesToBase64Url, randomHex } from "../../core/encoding";
import { deleteWithdrawn, insertKey, markRotated, openPrivateKey, signingKeys, type IssuerKey } from "./store";

export const ALGORITHM = "ES256";
/** How long a key signs (Vault's default key rotation_period, 24h). */
export const ROTATION_PERIOD_MS = 24 * 3600_000;
/** The longest identity token: `identity_token_ttl` is refused above it. */
export const MAX_TOKEN_TTL_S = 3600;
/** The default `identity_token_ttl`: minutes, enough for one exchange. */
export const DEFAULT_TOKEN_TTL_S = 300;
/** Verifiers' clocks may run behind ours by this much: a rotated key stays published that much longer. */
export const CLOCK_SKEW_MS = 5 * 60_000;

const EC = { name: "ECDSA", namedCurve: "P-256" } as const;

/**
 * Opened signing keys by kid and sealed text (a changed row has another text, so an entry can
 * never be stale); at most 8, the oldest evicted first.
 */
const opened = new BoundedCache<CryptoKey>("identity.signingKeys", 8);

async function newKey(db: Db, keys: SealKeys, now: number): Promise<void> {
  const pair = (await crypto.subtle.generateKey(EC, true, ["sign", "verify"])) as CryptoKeyPair;
  const kid = randomHex(16);
  const pub = (await crypto.subtle.exportKey("jwk", pair.publicKey)) as JsonWebKey;
  const priv = (await crypto.subtle.exportKey("jwk", pair.privateKey)) as JsonWebKey;
  const publicJwk = JSON.stringify({ kty: pub.kty, crv: pub.crv, x: pub.x, y: pub.y, kid, alg: ALGORITHM, use: "sig" });
  await insertKey(db, keys, { kid, algorithm: ALGORITHM, publicJwk, privateJwk: JSON.stringify(priv), createdAt: now });
}

/** The key that signs now (the newest signing key), made on first use. */
async function currentKey(db: Db, keys: SealKeys, now: number): Promise<IssuerKey> {
  const current = (await signingKeys(db))[0];
  if (current) return current;
  await newKey(db, keys, now);
  const made = (await signingKeys(db))[0];
  if (!made) throw new Error("identity issuer: no signing key after creating one");
  return made;
}

async function privateKeyOf(keys: SealKeys, k: IssuerKey): Promise<CryptoKey> {
  const id = `${k.kid}\u0000${k.sealedPrivateKey}`;
  const hit = opened.get(id);
  if (hit) return hit;
  const jwk = JSON.parse(await openPrivateKey(keys, k)) as JsonWebKey;
  const key = await crypto.subtle.importKey("jwk", jwk, EC, false, ["sign"]);
  opened.set(id, key);
  return key;
}

/**
 * One rotation step (the `identity-key-rotate` cron job, every minute): a signing key older than
 * ROTATION_PERIOD_MS is replaced by a new one and withdrawn after the longest token it may have
 * signed; extra signing keys (two isolates made a first key at once) are retired the same way;
 * withdrawn keys are deleted. Nothing happens before the first token made a key.
 */
export async function rotateIssuerKeys(db: Db, keys: SealKeys, now: number): Promise<{ rotated: boolean; deleted: number }> {
  const signing = await signingKeys(db);
  const withdrawAt = now + MAX_TOKEN_TTL_S * 1000 + CLOCK_SKEW_MS;
  const newest = signing[0];
  const due = newest !== undefined && now - newest.createdAt >= ROTATION_PERIOD_MS;
  if (due) await newKey(db, keys, now);
  for (const k of due ? signing : signing.slice(1)) await markRotated(db, k.kid, now, withdrawAt);
  return { rotated: due, deleted: await deleteWithdrawn(db, now) };
}

export interface IdentityTokenRequest {
  /** The `iss`: the namespace's issuer URL (./issuer.ts). */
  issuer: string;
  subject: string;
  audience: string;
  ttlSeconds: number;
  /** A private claim naming what the token is for (namespace, destination). */
  lanyard: Record<string, string>;
}

/** A signed identity token (compact JWS, RFC 7515 §7.1) with iss, sub, aud, iat, nbf, exp and jti. */
export async function signIdentityToken(db: Db, keys: SealKeys, r: IdentityTokenRequest, now = Date.now()): Promise<string> {
  const k = await currentKey(db, keys, now);
  const iat = Math.floor(now / 1000);
  const ttl = Math.min(Math.max(1, Math.floor(r.ttlSeconds)), MAX_TOKEN_TTL_S);
  const claims = { iss: r.issuer, sub: r.subject, aud: r.audience, iat, nbf: iat, exp: iat + ttl, jti: crypto.randomUUID(), lanyard: r.lanyard };
  const part = (o: unknown) => bytesToBase64Url(new TextEncoder().encode(JSON.stringify(o)));
  const input = `${part({ alg: ALGORITHM, typ: "JWT", kid: k.kid })}.${part(claims)}`;
  // WebCrypto's ECDSA signature is r || s, which is the JWS form (RFC 7518 §3.4).
  const sig = await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, await privateKeyOf(keys, k), new TextEncoder().encode(input));
  return `${input}.${bytesToBase64Url(new Uint8Array(sig))}`;
}
