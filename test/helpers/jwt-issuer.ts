/**
 * A test JWT issuer: key pairs, signed JWTs and the JWKS document that publishes the public keys,
 * for the JWT auth method's tests (unit, Workers-pool integration and e2e). WebCrypto and jose
 * only, so it runs in Node and in workerd alike. It can also mint the tokens an attacker would:
 * `alg: none`, HS256 keyed with the public key, a signature from a key the issuer never published.
 */
import { CompactSign, exportJWK, exportSPKI, generateKeyPair, type CryptoKey, type JWK } from "jose";

export type TestAlg = "RS256" | "RS384" | "RS512" | "PS256" | "ES256" | "ES384" | "ES512" | "EdDSA";

export interface TestKey {
  alg: TestAlg;
  kid: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  /** The public JWK as a JWKS publishes it: kid, alg and use set. */
  jwk: JWK;
  /** The public key as SPKI PEM (for jwt_validation_pubkeys). */
  pem: string;
}

let counter = 0;

/** A fresh key pair for `alg`; the kid is unique within the run unless given. */
export async function generateKey(alg: TestAlg, kid?: string): Promise<TestKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const id = kid ?? `${alg.toLowerCase()}-${++counter}-${Math.random().toString(36).slice(2, 8)}`;
  const jwk: JWK = { ...(await exportJWK(publicKey)), kid: id, alg, use: "sig" };
  return { alg, kid: id, privateKey, publicKey, jwk, pem: await exportSPKI(publicKey) };
}

/** A JWKS document (RFC 7517 §5) publishing the keys' public halves. */
export function jwksOf(...keys: TestKey[]): { keys: JWK[] } {
  return { keys: keys.map((k) => ({ ...k.jwk })) };
}

/** Seconds since the epoch, as JWT time claims are. */
export const nowSeconds = (): number => Math.floor(Date.now() / 1000);

export interface SignOptions {
  /**
   * Extra or overriding protected-header members; `kid: undefined` drops the kid, and another
   * key's kid makes a token that claims a published key but is signed by this one.
   */
  header?: Record<string, unknown>;
}

/** A compact JWS over the claims, signed with the key's algorithm, kid in the header. */
export async function signJwt(key: TestKey, claims: Record<string, unknown>, opts: SignOptions = {}): Promise<string> {
  const header: Record<string, unknown> = { alg: key.alg, typ: "JWT", kid: key.kid, ...opts.header };
  for (const [k, v] of Object.entries(header)) if (v === undefined) delete header[k];
  const payload = new TextEncoder().encode(JSON.stringify(claims));
  return new CompactSign(payload).setProtectedHeader({ ...header, alg: String(header.alg) }).sign(key.privateKey);
}

function b64url(text: string | Uint8Array): string {
  const bytes = typeof text === "string" ? new TextEncoder().encode(text) : text;
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** An Unsecured JWS (RFC 7519 §6): `alg: none`, empty signature. */
export function unsecuredJwt(claims: Record<string, unknown>, header: Record<string, unknown> = {}): string {
  return `${b64url(JSON.stringify({ alg: "none", typ: "JWT", ...header }))}.${b64url(JSON.stringify(claims))}.`;
}

/** HS256 keyed with `secret` (the algorithm-confusion attack uses the issuer's public key PEM). */
export async function hmacJwt(secret: string, claims: Record<string, unknown>, header: Record<string, unknown> = {}): Promise<string> {
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const input = `${b64url(JSON.stringify({ alg: "HS256", typ: "JWT", ...header }))}.${b64url(JSON.stringify(claims))}`;
  const sig = new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(input)));
  return `${input}.${b64url(sig)}`;
}

/** Claims of a token valid now for an hour: iat, nbf, exp plus the given ones. */
export function freshClaims(claims: Record<string, unknown>, lifetimeSeconds = 3600): Record<string, unknown> {
  const now = nowSeconds();
  return { iat: now, nbf: now, exp: now + lifetimeSeconds, ...claims };
}

/** What GitHub Actions puts in its OIDC token (docs.github.com, "About security hardening with OpenID Connect"). */
export function githubActionsClaims(opts: { org: string; repo: string; ref: string; actor: string; audience?: string }): Record<string, unknown> {
  const repository = `${opts.org}/${opts.repo}`;
  return freshClaims(
    {
      iss: "https://token.actions.githubusercontent.com",
      aud: opts.audience ?? `https://github.com/${opts.org}`,
      sub: `repo:${repository}:ref:${opts.ref}`,
      jti: crypto.randomUUID(),
      ref: opts.ref,
      ref_type: "branch",
      repository,
      repository_owner: opts.org,
      repository_id: "123456789",
      actor: opts.actor,
      actor_id: "424242",
      workflow: "deploy",
      event_name: "push",
      run_id: "9999",
      sha: "0123456789abcdef0123456789abcdef01234567",
      environment: "production",
      job_workflow_ref: `${repository}/.github/workflows/deploy.yml@${opts.ref}`,
    },
    300,
  );
}

/** A projected Kubernetes service-account token's claims (bound token, KEP-1205). */
export function kubernetesClaims(opts: { namespace: string; serviceAccount: string; audience?: string; issuer?: string }): Record<string, unknown> {
  return freshClaims(
    {
      iss: opts.issuer ?? "https://kubernetes.default.svc.cluster.local",
      aud: [opts.audience ?? "lanyard"],
      sub: `system:serviceaccount:${opts.namespace}:${opts.serviceAccount}`,
      "kubernetes.io": {
        namespace: opts.namespace,
        pod: { name: `${opts.serviceAccount}-7d9f8b6c5-x2x9z`, uid: crypto.randomUUID() },
        serviceaccount: { name: opts.serviceAccount, uid: crypto.randomUUID() },
      },
    },
    3600,
  );
}
