/**
 * Claim checks of a JWT login, after its signature is verified (Vault API: /auth/jwt/role/:name and /auth/jwt/login).
 * Pure functions over the decoded claims, so every rule is unit-tested without a Worker
 * (test/unit/auth-jwt.test.ts). Messages are Vault's, word for word:
 *
 * - Registered claims and times follow hashicorp/cap `jwt.Validator.Validate`, which Vault's
 *   path_login.go calls; its errors reach the client as `error validating token: <cap error>`.
 *   The leeways do what cap does, which is not what their names suggest: `expiration_leeway` and
 *   `not_before_leeway` only invent a missing `exp` / `nbf`; the time comparisons themselves use
 *   `clock_skew_leeway` alone (0 = 60 s, −1 = none).
 * - `bound_claims`, `claim_mappings`, the user and groups claims follow vault-plugin-auth-jwt's
 *   claims.go and path_login.go `createIdentity`. A claim key starting with "/" is a JSON pointer
 *   (RFC 6901) into nested claims (Vault uses mitchellh/pointerstructure), so a Kubernetes token's
 *   `/kubernetes.io/namespace` can be bound.
 *
 * Nothing here ever puts the token or a claim value into an error message except where Vault
 * does (the value of a malformed bound claim on a role write, which is the operator's own input).
 */
import { badRequest, type ApiError } from "../../../core/errors";
import { globMatch } from "../../../core/glob";

export type Claims = Record<string, unknown>;

/** A cap validation failure: rendered as `error validating token: <message>` (400). */
export const tokenInvalid = (message: string): ApiError => badRequest(`error validating token: ${message}`);

/** The role's leeways as stored, in seconds: 0 means the default, a negative value means none. */
export interface Leeways {
  clockSkew: number;
  expiration: number;
  notBefore: number;
}

/** cap's defaults: jwt.DefaultLeeway (1 minute) for clock skew, DefaultLeewaySeconds (150). */
export const DEFAULT_CLOCK_SKEW_SECONDS = 60;
export const DEFAULT_EXP_NBF_LEEWAY_SECONDS = 150;

const effectiveLeeway = (stored: number, dflt: number): number => (stored < 0 ? 0 : stored === 0 ? dflt : stored);

/**
 * RFC 7519 §2 NumericDate: a JSON number of seconds. go-jose truncates fractions, so do we.
 * A time claim that is present but not a number fails, as go-jose's unmarshalling does.
 */
function numericDate(claims: Claims, name: "exp" | "nbf" | "iat"): number | null {
  const v = claims[name];
  if (v === undefined || v === null) return null;
  if (typeof v !== "number" || !Number.isFinite(v)) throw tokenInvalid(`invalid ${name} claim: expected a number of seconds`);
  return Math.trunc(v);
}

/** The `aud` claim as a list (RFC 7519 §4.1.3: a string or an array of strings). */
export function audiences(claims: Claims): string[] {
  const aud = claims.aud;
  if (aud === undefined || aud === null) return [];
  if (typeof aud === "string") return [aud];
  if (Array.isArray(aud) && aud.every((a): a is string => typeof a === "string")) return aud;
  throw tokenInvalid("invalid audience (aud) claim: expected a string or a list of strings");
}

export interface Expected {
  /** The config's bound_issuer; "" checks nothing. */
  issuer: string;
  /** The role's bound_subject; "" checks nothing. */
  subject: string;
  /** The role's bound_audiences; empty checks nothing here (see unboundAudience). */
  audiences: readonly string[];
  leeways: Leeways;
}

/**
 * cap's Validate after the signature and algorithm checks, in its order: a time claim must exist;
 * missing exp/nbf are derived with their leeways; then iss, sub, aud; then nbf, exp, iat against
 * now ± clock skew. `nowMs` is injected for tests.
 */
export function validateRegistered(claims: Claims, expected: Expected, nowMs: number): void {
  const iat = numericDate(claims, "iat");
  let nbf = numericDate(claims, "nbf");
  let exp = numericDate(claims, "exp");
  if (iat === null && nbf === null && exp === null) {
    throw tokenInvalid("no issued at (iat), not before (nbf), or expiration time (exp) claims in token");
  }
  if (exp === null) {
    // The latest of iat and nbf, plus expiration_leeway (one of them exists: checked above).
    const latestStart = Math.max(iat ?? Number.NEGATIVE_INFINITY, nbf ?? Number.NEGATIVE_INFINITY);
    exp = latestStart + effectiveLeeway(expected.leeways.expiration, DEFAULT_EXP_NBF_LEEWAY_SECONDS);
  }
  if (nbf === null) nbf = iat !== null ? iat : exp - effectiveLeeway(expected.leeways.notBefore, DEFAULT_EXP_NBF_LEEWAY_SECONDS);
  const skewMs = effectiveLeeway(expected.leeways.clockSkew, DEFAULT_CLOCK_SKEW_SECONDS) * 1000;

  if (expected.issuer !== "" && claims.iss !== expected.issuer) throw tokenInvalid("invalid issuer (iss) claim");
  if (expected.subject !== "" && claims.sub !== expected.subject) throw tokenInvalid("invalid subject (sub) claim");
  const aud = audiences(claims);
  if (expected.audiences.length > 0 && !expected.audiences.some((a) => aud.includes(a))) {
    throw tokenInvalid("invalid audience (aud) claim: audience claim does not match any expected audience");
  }

  if (nowMs + skewMs < nbf * 1000) throw tokenInvalid("invalid not before (nbf) claim: token not yet valid");
  if (nowMs - skewMs > exp * 1000) throw tokenInvalid("invalid expiration time (exp) claim: token is expired");
  if (iat !== null && nowMs + skewMs < iat * 1000) throw tokenInvalid("invalid issued at (iat) claim: token issued in the future");
}

/**
 * path_login.go: a role without bound_audiences refuses a token that names an audience, so a
 * token minted for another service cannot be replayed here. Vault applies this only when `aud`
 * is a JSON array (a Go type assertion); Lanyard applies it to a string `aud` as well, which is
 * stricter and closes the same replay for issuers that send a single audience.
 */
export function checkUnboundAudience(claims: Claims, boundAudiences: readonly string[]): void {
  if (boundAudiences.length === 0 && audiences(claims).length > 0) {
    throw badRequest("audience claim found in JWT but no audiences bound to the role");
  }
}

/**
 * RFC 6901 JSON pointer lookup ("/a/b/0", "~1" = "/", "~0" = "~"); undefined when any step is
 * missing, as pointerstructure's error makes getClaim answer nil.
 */
export function jsonPointer(root: unknown, pointer: string): unknown {
  if (pointer === "") return root;
  let cur: unknown = root;
  for (const raw of pointer.slice(1).split("/")) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (Array.isArray(cur)) {
      if (!/^(0|[1-9]\d*)$/.test(key)) return undefined;
      cur = cur[Number(key)];
    } else if (typeof cur === "object" && cur !== null && Object.hasOwn(cur, key)) {
      cur = (cur as Record<string, unknown>)[key];
    } else {
      return undefined;
    }
    if (cur === undefined) return undefined;
  }
  return cur;
}

/** claims.go getClaim: a key starting with "/" is a JSON pointer, anything else a top-level name. */
export function getClaim(claims: Claims, key: string): unknown {
  if (key.startsWith("/")) return jsonPointer(claims, key);
  return Object.hasOwn(claims, key) ? claims[key] : undefined;
}

/** The user claim's value: the token's display name and alias (createIdentity). */
export function userClaimValue(claims: Claims, userClaim: string, jsonPointerKey: boolean): string {
  const v = jsonPointerKey ? getClaim(claims, userClaim) : Object.hasOwn(claims, userClaim) ? claims[userClaim] : undefined;
  if (v === undefined || v === null) throw badRequest(`claim "${userClaim}" not found in token`);
  if (typeof v !== "string") throw badRequest(`claim "${userClaim}" could not be converted to string`);
  return v;
}

/** normalizeList: a scalar claim is a one-element list; objects (and null) are not lists. */
function normalizeList(v: unknown): unknown[] | null {
  if (Array.isArray(v)) return v;
  if (typeof v === "string" || typeof v === "number" || typeof v === "boolean") return [v];
  return null;
}

/**
 * The groups claim's values (createIdentity / fetchGroups). Lanyard has no identity groups, so
 * they are only checked, as Vault checks them before issuing a token.
 */
export function groupNames(claims: Claims, groupsClaim: string): string[] {
  if (groupsClaim === "") return [];
  const raw = getClaim(claims, groupsClaim);
  if (raw === undefined || raw === null) throw badRequest(`failed to fetch groups: "${groupsClaim}" claim not found in token`);
  const list = normalizeList(raw);
  if (list === null) throw badRequest(`"${groupsClaim}" claim could not be converted to string list`);
  const out: string[] = [];
  for (const g of list) {
    if (typeof g !== "string") throw badRequest(`value in groups claim could not be parsed as string`);
    if (g !== "") out.push(g);
  }
  return out;
}

/**
 * claim_mappings → token metadata (claims.go extractMetadata): a missing claim is skipped;
 * strings, booleans and numbers become their text; anything else fails.
 */
export function claimMetadata(claims: Claims, mappings: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [source, target] of Object.entries(mappings)) {
    const v = getClaim(claims, source);
    if (v === undefined || v === null) continue;
    if (typeof v === "string") out[target] = v;
    else if (typeof v === "boolean" || typeof v === "number") out[target] = String(v);
    else throw badRequest(`error converting claim '${source}' to string`);
  }
  return out;
}

export type BoundClaimsType = "string" | "glob";

/**
 * claims.go validateBoundClaims: every bound claim must be present and one of its values must
 * equal (same JSON type and value: the number 123 is not the string "123") or, with glob, match
 * one of the claim's values. A glob matches the whole value (src/core/glob.ts, go-glob
 * semantics): `repo:org/*` matches `repo:org/app:ref:refs/heads/main`, `org/app` does not match
 * `org/app-evil`.
 */
export function validateBoundClaims(type: BoundClaimsType, bound: Record<string, unknown>, claims: Claims): void {
  const fail = (m: string) => badRequest(`error validating claims: ${m}`);
  for (const [key, expected] of Object.entries(bound)) {
    const actual = getClaim(claims, key);
    if (actual === undefined || actual === null) throw fail(`claim "${key}" is missing`);
    const actVals = normalizeList(actual);
    if (actVals === null) throw fail("received claim is not a string or list");
    const expVals = normalizeList(expected);
    if (expVals === null) throw fail("bound claim is not a string or list");
    const found = expVals.some((e) =>
      actVals.some((a) => {
        if (type === "glob") {
          if (typeof e !== "string") throw fail("received claim is not a glob string");
          return typeof a === "string" && globMatch(e, a);
        }
        return a === e;
      }),
    );
    if (!found) throw fail(`claim "${key}" does not match any associated bound claim values`);
  }
}

/** path_role.go: with bound_claims_type glob, every bound value must be a string (or a list of them). */
export function checkBoundClaimsForWrite(type: BoundClaimsType, bound: Record<string, unknown>): void {
  for (const values of Object.values(bound)) {
    const list = normalizeList(values);
    if (list === null) throw badRequest(`claim is not a string or list: ${JSON.stringify(values)}`);
    for (const v of list) {
      if (type === "glob" && typeof v !== "string") throw badRequest(`claim is not a string: ${JSON.stringify(v)}`);
      if (typeof v === "object" && v !== null) throw badRequest(`claim is not a string or list: ${JSON.stringify(values)}`);
    }
  }
}

/** path_role.go: "role" is the metadata key Vault sets itself; two claims may not share a target. */
export function checkClaimMappings(mappings: Record<string, string>): void {
  const seen = new Set<string>();
  for (const target of Object.values(mappings)) {
    if (target === "role") throw badRequest(`metadata key "role" is reserved and may not be a mapping destination`);
    if (seen.has(target)) throw badRequest(`multiple keys are mapped to metadata key "${target}"`);
    seen.add(target);
  }
}
