/**
 * The JWT method's role: its stored model, the rules every write keeps and its read view
 * (Vault API: /auth/jwt/role/:name; vault-plugin-auth-jwt path_role.go pathRoleCreateUpdate). Vault's
 * quirks are kept on purpose, because clients rely on them:
 * - `role_type` is "oidc" whenever a write omits it, updates included, and an oidc role needs
 *   `allowed_redirect_uris`; only `jwt` roles may log in through `login` (./routes.ts).
 * - `bound_claims_type` goes back to "string" whenever a write omits it.
 * - The three leeways are stored as sent (0 when never sent) and mean their defaults at login
 *   (./claims.ts).
 * - A jwt role needs at least one bound constraint (audiences, subject, claims or token CIDRs), so
 *   a role cannot accept every token its issuer ever signs for anyone.
 * Everything else changes only when sent. What is stored but cannot act here (an oidc role, the
 * browser flow's fields on a jwt role, groups_claim without identity groups) is named in a
 * warning (roleWarnings; docs/security.md "Fields Lanyard does not act on").
 */
import { parseDurationSeconds } from "../../../core/duration";
import { badRequest, fieldError } from "../../../core/errors";
import { parseJsonLimited } from "../../../core/json";
import type { Req } from "../../../core/route";
import { tokenParamsFrom, tokenParamsOf, tokenParamsView, type TokenParams } from "../token-params";
import { checkBoundClaimsForWrite, checkClaimMappings, type BoundClaimsType } from "./claims";

export interface JwtRole {
  roleType: "jwt" | "oidc";
  boundAudiences: string[];
  boundSubject: string;
  boundClaimsType: BoundClaimsType;
  boundClaims: Record<string, unknown>;
  claimMappings: Record<string, string>;
  userClaim: string;
  userClaimJsonPointer: boolean;
  groupsClaim: string;
  allowedRedirectUris: string[];
  oidcScopes: string[];
  /** Seconds as stored: 0 = the default at login, negative = none. */
  clockSkewLeeway: number;
  expirationLeeway: number;
  notBeforeLeeway: number;
  verboseOidcLogging: boolean;
  maxAge: number;
  token: TokenParams;
}

/** The role fields a write may send, after coercion (the route declares them). */
export interface RoleWriteFields {
  role_type?: string;
  bound_audiences?: string[];
  bound_subject?: string;
  bound_claims_type?: string;
  bound_claims?: unknown;
  claim_mappings?: unknown;
  user_claim?: string;
  user_claim_json_pointer?: boolean;
  groups_claim?: string;
  allowed_redirect_uris?: string[];
  oidc_scopes?: string[];
  clock_skew_leeway?: unknown;
  expiration_leeway?: unknown;
  not_before_leeway?: unknown;
  verbose_oidc_logging?: boolean;
  max_age?: number;
}

/** Vault's role names are lower-cased (path_role.go); the route's pattern already limits the characters. */
export function roleNameOf(raw: string | undefined): string {
  const name = (raw ?? "").trim().toLowerCase();
  if (name === "") throw badRequest("missing role");
  return name;
}

/**
 * A TypeSignedDurationSecond: integer seconds or a Go duration, either possibly negative
 * ("-1" disables a leeway).
 */
export function signedDuration(field: string, v: unknown): number {
  try {
    if (typeof v === "number") {
      if (!Number.isSafeInteger(v)) throw new Error(`cannot parse '${v}' as a duration`);
      return v;
    }
    if (typeof v === "string") {
      const t = v.trim();
      if (t.startsWith("-")) return -parseDurationSeconds(t.slice(1));
      return parseDurationSeconds(t);
    }
    throw new Error(`cannot parse ${typeof v} as a duration`);
  } catch (e) {
    throw fieldError(field, e instanceof Error ? e.message : String(e));
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** A map field (Vault's TypeMap): a JSON object, or a string holding one (older clients send that). */
export function mapField(field: string, v: unknown): Record<string, unknown> {
  if (typeof v === "string") {
    if (v.trim() === "") return {};
    const parsed = parseJsonLimited(v, 16);
    if (parsed.ok && isObject(parsed.value)) return parsed.value;
    throw fieldError(field, "expected a JSON object");
  }
  if (isObject(v)) return v;
  throw fieldError(field, "expected a JSON object");
}

/** Vault's TypeKVPairs for claim_mappings: values must be strings (numbers and booleans become text). */
export function stringMapField(field: string, v: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(mapField(field, v))) {
    if (typeof x === "string") out[k] = x;
    else if (typeof x === "number" || typeof x === "boolean") out[k] = String(x);
    else throw fieldError(field, `value of "${k}" is not a string`);
  }
  return out;
}

/** Applies a write to the stored role (null on create) and checks the result. Pushes warnings to req. */
export function applyRoleWrite(req: Req, f: RoleWriteFields, prev: JwtRole | null): JwtRole {
  const has = (k: keyof RoleWriteFields & string) => req.has(k);
  const roleTypeRaw = (f.role_type ?? "").trim().toLowerCase();
  const roleType = roleTypeRaw === "" ? "oidc" : roleTypeRaw;
  if (roleType !== "jwt" && roleType !== "oidc") throw badRequest(`invalid 'role_type': ${roleTypeRaw}`);

  const r: JwtRole = {
    roleType,
    boundAudiences: prev?.boundAudiences ?? [],
    boundSubject: prev?.boundSubject ?? "",
    boundClaimsType: "string",
    boundClaims: prev?.boundClaims ?? {},
    claimMappings: prev?.claimMappings ?? {},
    userClaim: prev?.userClaim ?? "",
    userClaimJsonPointer: prev?.userClaimJsonPointer ?? false,
    groupsClaim: prev?.groupsClaim ?? "",
    allowedRedirectUris: prev?.allowedRedirectUris ?? [],
    oidcScopes: prev?.oidcScopes ?? [],
    clockSkewLeeway: prev?.clockSkewLeeway ?? 0,
    expirationLeeway: prev?.expirationLeeway ?? 0,
    notBeforeLeeway: prev?.notBeforeLeeway ?? 0,
    verboseOidcLogging: prev?.verboseOidcLogging ?? false,
    maxAge: prev?.maxAge ?? 0,
    token: tokenParamsFrom(req, prev?.token ?? null),
  };
  if (has("bound_audiences")) r.boundAudiences = f.bound_audiences ?? [];
  if (has("bound_subject")) r.boundSubject = f.bound_subject ?? "";
  if (has("verbose_oidc_logging")) r.verboseOidcLogging = f.verbose_oidc_logging === true;
  if (has("max_age")) r.maxAge = f.max_age ?? 0;

  const claimsType = (f.bound_claims_type ?? "").trim() === "" ? "string" : (f.bound_claims_type ?? "").trim();
  if (claimsType !== "string" && claimsType !== "glob") throw badRequest(`invalid 'bound_claims_type': ${claimsType}`);
  r.boundClaimsType = claimsType;
  if (has("bound_claims")) r.boundClaims = mapField("bound_claims", f.bound_claims);
  checkBoundClaimsForWrite(r.boundClaimsType, r.boundClaims);

  if (has("claim_mappings")) {
    const mappings = stringMapField("claim_mappings", f.claim_mappings);
    checkClaimMappings(mappings);
    r.claimMappings = mappings;
  }

  if (has("user_claim")) r.userClaim = (f.user_claim ?? "").trim();
  if (r.userClaim === "") throw badRequest("a user claim must be defined on the role");
  if (has("user_claim_json_pointer")) r.userClaimJsonPointer = f.user_claim_json_pointer === true;
  if (has("groups_claim")) r.groupsClaim = (f.groups_claim ?? "").trim();
  if (has("oidc_scopes")) r.oidcScopes = f.oidc_scopes ?? [];
  if (has("allowed_redirect_uris")) r.allowedRedirectUris = f.allowed_redirect_uris ?? [];
  if (has("clock_skew_leeway")) r.clockSkewLeeway = signedDuration("clock_skew_leeway", f.clock_skew_leeway);
  if (has("expiration_leeway")) r.expirationLeeway = signedDuration("expiration_leeway", f.expiration_leeway);
  if (has("not_before_leeway")) r.notBeforeLeeway = signedDuration("not_before_leeway", f.not_before_leeway);

  if (r.roleType === "oidc" && r.allowedRedirectUris.length === 0) {
    throw badRequest("'allowed_redirect_uris' must be set if 'role_type' is 'oidc' or unspecified.");
  }
  if (r.roleType === "jwt") {
    const bound =
      r.boundAudiences.length > 0 || r.token.boundCidrs.length > 0 || r.boundSubject !== "" || Object.keys(r.boundClaims).length > 0;
    if (!bound) throw badRequest("must have at least one bound constraint when creating/updating a role");
  }
  if (r.token.maxTtl > 0 && r.token.ttl > r.token.maxTtl) throw badRequest("ttl should not be greater than max ttl");
  req.warnings.push(...roleWarnings(r));
  if (r.verboseOidcLogging) {
    req.warnings.push(
      "verbose_oidc_logging has been enabled for this role. This setting should only be used for debugging purposes. Lanyard never logs tokens or claims, so it has no effect here.",
    );
  }
  return r;
}

const BROWSER_ONLY = "used only by the browser OIDC flow, which Lanyard does not serve; stored so the role reads back";

/** A warning naming each setting of the role that cannot act here (none for a plain jwt role). */
export function roleWarnings(r: JwtRole): string[] {
  const out: string[] = [];
  if (r.roleType === "oidc") {
    out.push('role_type: an "oidc" role cannot log in here: the browser OIDC flow (oidc/auth_url, oidc/callback) is not served, and `login` takes "jwt" roles only');
  } else {
    if (r.allowedRedirectUris.length > 0) out.push(`allowed_redirect_uris: ${BROWSER_ONLY}`);
    if (r.oidcScopes.length > 0) out.push(`oidc_scopes: ${BROWSER_ONLY}`);
    if (r.maxAge > 0) out.push(`max_age: ${BROWSER_ONLY}`);
  }
  if (r.groupsClaim !== "") {
    out.push("groups_claim: Lanyard has no identity groups: a login needs the claim (a list of strings), but group membership grants no policies");
  }
  return out;
}

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);
const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) ? v : 0);

/** The stored JSON document of a role. */
export function encodeRole(r: JwtRole): Record<string, unknown> {
  return { ...r };
}

/**
 * A role from its stored document, tolerant of missing keys. A document without a role type
 * reads as "jwt", as Vault reads roles stored before role_type existed.
 */
export function decodeRole(doc: Record<string, unknown>): JwtRole {
  const claims = isObject(doc.boundClaims) ? doc.boundClaims : {};
  const mappings: Record<string, string> = {};
  if (isObject(doc.claimMappings)) for (const [k, v] of Object.entries(doc.claimMappings)) if (typeof v === "string") mappings[k] = v;
  return {
    roleType: doc.roleType === "oidc" ? "oidc" : "jwt",
    boundAudiences: strings(doc.boundAudiences),
    boundSubject: typeof doc.boundSubject === "string" ? doc.boundSubject : "",
    boundClaimsType: doc.boundClaimsType === "glob" ? "glob" : "string",
    boundClaims: claims,
    claimMappings: mappings,
    userClaim: typeof doc.userClaim === "string" ? doc.userClaim : "",
    userClaimJsonPointer: doc.userClaimJsonPointer === true,
    groupsClaim: typeof doc.groupsClaim === "string" ? doc.groupsClaim : "",
    allowedRedirectUris: strings(doc.allowedRedirectUris),
    oidcScopes: strings(doc.oidcScopes),
    clockSkewLeeway: num(doc.clockSkewLeeway),
    expirationLeeway: num(doc.expirationLeeway),
    notBeforeLeeway: num(doc.notBeforeLeeway),
    verboseOidcLogging: doc.verboseOidcLogging === true,
    maxAge: num(doc.maxAge),
    token: tokenParamsOf(doc.token),
  };
}

/** Vault's role read (path_role.go pathRoleRead), token fields included. */
export function roleView(r: JwtRole): Record<string, unknown> {
  return {
    role_type: r.roleType,
    bound_audiences: r.boundAudiences,
    bound_subject: r.boundSubject,
    bound_claims_type: r.boundClaimsType,
    bound_claims: Object.keys(r.boundClaims).length > 0 ? r.boundClaims : null,
    claim_mappings: Object.keys(r.claimMappings).length > 0 ? r.claimMappings : null,
    user_claim: r.userClaim,
    user_claim_json_pointer: r.userClaimJsonPointer,
    groups_claim: r.groupsClaim,
    allowed_redirect_uris: r.allowedRedirectUris,
    oidc_scopes: r.oidcScopes,
    clock_skew_leeway: r.clockSkewLeeway,
    expiration_leeway: r.expirationLeeway,
    not_before_leeway: r.notBeforeLeeway,
    verbose_oidc_logging: r.verboseOidcLogging,
    max_age: r.maxAge,
    ...tokenParamsView(r.token),
  };
}
