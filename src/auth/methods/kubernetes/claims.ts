/**
 * The service-account JWT of a Kubernetes login (Vault API: /auth/kubernetes/login;
 * vault-plugin-auth-kubernetes path_login.go parseAndValidateJWT): parsed without verification
 * unless `pem_keys` are configured (the TokenReview API is the real check), its claims checked
 * as hashicorp/cap's ValidateAllowMissingIatNbfExp does, and its service account matched against
 * the role's bound names and namespaces.
 *
 * Two claim layouts exist: the legacy secret-based token (`kubernetes.io/serviceaccount/...`
 * keys at the top level) and the projected token (`kubernetes.io: {namespace, serviceaccount:
 * {name, uid}, pod}`); the projected values win when both are present, as upstream's do.
 *
 * Failures answer as upstream does: a JWT that does not parse, uses an algorithm outside the
 * allowed list or fails its signature check → 403 `permission denied` (cap reports these as
 * "error verifying token signature", which the plugin maps to ErrPermissionDenied); a claim
 * check failing → 403 with cap's text. The JWT itself never appears in an error.
 */
import { compactVerify, importSPKI, importX509, type CryptoKey } from "jose";
import { base64UrlToBytes, pemArmor } from "../../../core/encoding";
import { ApiError, badRequest, permissionDenied } from "../../../core/errors";
import { globMatch } from "../../../core/glob";

/** Signing algorithms Kubernetes uses for service-account tokens (upstream allowedSigningAlgs). */
export const ALLOWED_ALGS = ["RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512"] as const;

/** cap/jwt defaults: clock skew 60 s on every time claim; 150 s for a missing exp or nbf. */
const CLOCK_SKEW_SECONDS = 60;
const DEFAULT_LEEWAY_SECONDS = 150;

/** The service account a token speaks for. */
export interface ServiceAccount {
  name: string;
  namespace: string;
  /** "" when the token carries none (login refuses it). */
  uid: string;
  /** Legacy tokens only; "" for projected ones. */
  secretName: string;
  /** The token's `aud` claim as a list (a single string becomes one entry). */
  audiences: string[];
}

interface ParsedJwt {
  header: Record<string, unknown>;
  payload: Record<string, unknown>;
}

const forbidden = (message: string): ApiError => new ApiError(403, message);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function jsonSegment(segment: string): Record<string, unknown> | null {
  if (!/^[A-Za-z0-9_-]+$/.test(segment)) return null;
  try {
    const parsed: unknown = JSON.parse(new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(base64UrlToBytes(segment)));
    return isObject(parsed) ? parsed : null;
  } catch {
    return null;
  }
}

/**
 * The header and claims of a compact JWS, unverified; null when it is not one (three base64url
 * parts, JSON objects, a non-empty signature) or its `alg` is not allowed.
 */
export function parseJwt(jwt: string): ParsedJwt | null {
  const parts = jwt.trim().split(".");
  if (parts.length !== 3) return null;
  const [h, p, s] = parts as [string, string, string];
  if (s === "" || !/^[A-Za-z0-9_-]+$/.test(s)) return null;
  const header = jsonSegment(h);
  const payload = jsonSegment(p);
  if (header === null || payload === null) return null;
  if (typeof header.alg !== "string" || !(ALLOWED_ALGS as readonly string[]).includes(header.alg)) return null;
  return { header, payload };
}

/** A JSON-shaped config check: is this a JWT at all (token_reviewer_jwt, upstream ParseUnverified)? */
export function looksLikeJwt(jwt: string): boolean {
  const parts = jwt.trim().split(".");
  return parts.length === 3 && jsonSegment(parts[0] ?? "") !== null && jsonSegment(parts[1] ?? "") !== null;
}

const str = (v: unknown): string => (typeof v === "string" ? v : "");

/** The service account of the claims, from the projected layout when present, else the legacy one. */
export function serviceAccountOf(payload: Record<string, unknown>): ServiceAccount {
  const aud = payload.aud;
  const audiences = typeof aud === "string" ? [aud] : Array.isArray(aud) ? aud.filter((a): a is string => typeof a === "string") : [];
  const legacy = {
    name: str(payload["kubernetes.io/serviceaccount/service-account.name"]),
    uid: str(payload["kubernetes.io/serviceaccount/service-account.uid"]),
    namespace: str(payload["kubernetes.io/serviceaccount/namespace"]),
    secretName: str(payload["kubernetes.io/serviceaccount/secret.name"]),
  };
  const projected = payload["kubernetes.io"];
  if (!isObject(projected)) return { ...legacy, audiences };
  // Upstream: the projected namespace wins whenever the kubernetes.io object exists; name and
  // uid only when its serviceaccount object exists.
  const sa = projected.serviceaccount;
  return {
    name: isObject(sa) ? str(sa.name) : legacy.name,
    uid: isObject(sa) ? str(sa.uid) : legacy.uid,
    namespace: str(projected.namespace),
    secretName: legacy.secretName,
    audiences,
  };
}

/** A NumericDate claim in seconds; 0 when absent (cap treats absent as zero). */
function numericDate(payload: Record<string, unknown>, claim: string): number {
  const v = payload[claim];
  if (v === undefined || v === null) return 0;
  if (typeof v !== "number" || !Number.isFinite(v)) throw forbidden(`invalid ${claim} claim: not a number`);
  return Math.floor(v);
}

/**
 * cap/jwt's time checks with ValidateAllowMissingIatNbfExp: skipped when exp, nbf and iat are all
 * absent; a missing exp is the later of iat/nbf + 150 s, a missing nbf is iat (or exp − 150 s);
 * 60 s of clock skew on each comparison.
 */
function checkTimes(payload: Record<string, unknown>, nowSeconds: number): void {
  const iat = numericDate(payload, "iat");
  let exp = numericDate(payload, "exp");
  let nbf = numericDate(payload, "nbf");
  if (iat === 0 && exp === 0 && nbf === 0) return;
  if (exp === 0) exp = Math.max(iat, nbf) + DEFAULT_LEEWAY_SECONDS;
  if (nbf === 0) nbf = iat !== 0 ? iat : exp - DEFAULT_LEEWAY_SECONDS;
  if (nowSeconds + CLOCK_SKEW_SECONDS < nbf) throw forbidden("invalid not before (nbf) claim: token not yet valid");
  if (nowSeconds - CLOCK_SKEW_SECONDS > exp) throw forbidden("invalid expiration time (exp) claim: token is expired");
  if (nowSeconds + CLOCK_SKEW_SECONDS < iat) throw forbidden("invalid issued at (iat) claim: token issued in the future");
}

/** The key to verify with, or null when the key does not fit the algorithm. */
async function importFor(pem: string, alg: string): Promise<CryptoKey | null> {
  const label = pemArmor(pem)[0]?.label ?? "";
  try {
    return label === "CERTIFICATE" ? await importX509(pem.trim(), alg) : await importSPKI(pem.trim(), alg);
  } catch {
    return null;
  }
}

/**
 * Validates `pem_keys` when the config is written (upstream parsePublicKeyPEM): each entry must be
 * a PEM public key or certificate holding an RSA or ECDSA key. Returns them trimmed.
 */
export async function parsePemKeys(list: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const raw of list) {
    const pem = raw.trim();
    if (pem === "") continue;
    const label = pemArmor(pem)[0]?.label;
    let ok = false;
    if (label === "PUBLIC KEY" || label === "CERTIFICATE") {
      for (const alg of ["RS256", "ES256", "ES384", "ES512"]) {
        if ((await importFor(pem, alg)) !== null) {
          ok = true;
          break;
        }
      }
    }
    if (!ok) throw badRequest("data does not contain any valid RSA or ECDSA public keys");
    out.push(pem);
  }
  return out;
}

/** Whether one of the keys verifies the JWS with the algorithm its header names. */
async function signatureVerifies(jwt: string, alg: string, pemKeys: readonly string[]): Promise<boolean> {
  for (const pem of pemKeys) {
    const key = await importFor(pem, alg);
    if (key === null) continue;
    try {
      await compactVerify(jwt.trim(), key, { algorithms: [alg] });
      return true;
    } catch {
      // Try the next key, as cap's StaticKeySet does.
    }
  }
  return false;
}

export interface JwtChecks {
  /** Public keys (PEM) to verify the signature with; empty: the signature is not checked here. */
  pemKeys: readonly string[];
  /** The issuer the token must carry; "" skips the check. */
  issuer: string;
  /** The role's audience; "" skips the check. */
  audience: string;
  nowSeconds: number;
}

/**
 * Parses and checks the service-account JWT (see the module comment) and returns its service
 * account. Issuer: upstream checks it only when disable_iss_validation is false *and* an issuer
 * is configured (its default "kubernetes/serviceaccount" is assigned but never compared), so the
 * caller passes "" otherwise.
 */
export async function validateServiceAccountJwt(jwt: string, checks: JwtChecks): Promise<ServiceAccount> {
  const parsed = parseJwt(jwt);
  if (parsed === null) throw permissionDenied();
  const alg = parsed.header.alg as string;
  if (checks.pemKeys.length > 0 && !(await signatureVerifies(jwt, alg, checks.pemKeys))) throw permissionDenied();
  const sa = serviceAccountOf(parsed.payload);
  if (checks.issuer !== "" && str(parsed.payload.iss) !== checks.issuer) throw forbidden("invalid issuer (iss) claim");
  if (checks.audience !== "" && !sa.audiences.includes(checks.audience)) {
    throw forbidden("invalid audience (aud) claim: audience claim does not match any expected audience");
  }
  checkTimes(parsed.payload, checks.nowSeconds);
  return sa;
}

export interface Bindings {
  names: readonly string[];
  namespaces: readonly string[];
}

/**
 * The role's bindings (upstream parseAndValidateJWT): the name must match a bound name (`*`
 * alone allows all; otherwise go-glob patterns, as strutil.StrListContainsGlob), then the
 * namespace a bound namespace (same rules). Coded 403s, unwrapped on the login path.
 */
export function checkBindings(sa: ServiceAccount, role: Bindings): void {
  const allowed = (list: readonly string[], value: string) => list[0] === "*" || list.some((p) => globMatch(p, value));
  if (!allowed(role.names, sa.name)) throw forbidden("service account name not authorized");
  if (!allowed(role.namespaces, sa.namespace)) throw forbidden("namespace not authorized");
}
