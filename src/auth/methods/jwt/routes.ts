/**
 * The JWT method's endpoints, relative to the auth mount (Vault API: /auth/jwt): `config`
 * (read, write), LIST `role`, `role/:name` (read, write, delete) and the public `login`. Routes
 * coerce, load and shape; the rules are in ./config.ts, ./role.ts, ./verify.ts and ./claims.ts.
 *
 * Login (path_login.go pathLogin), in Vault's order: configuration, role (`role` or the config's
 * `default_role`), role type, token present, client address inside `token_bound_cidrs` (403),
 * signature and algorithm, registered claims and times, the unbound-audience rule, user claim,
 * claim mappings, groups claim, bound claims; then a token through the framework's loginReply
 * with display name = the user claim's value and metadata {role, …claim_mappings}. The JWT
 * itself is never stored, logged or echoed: every error is a fixed text or names a claim.
 */
import { authMountId, roleListRoute } from "../method-routes";
import { badRequest, notFound, permissionDenied } from "../../../core/errors";
import { defineFields } from "../../../core/fields";
import { MAX_URL_BYTES } from "../../../core/limits";
import { route, type Req } from "../../../core/route";
import { addressAllowed, loginReply } from "../login";
import { deleteRole, getMethodConfig, getRole, putMethodConfig, putRole } from "../method-store";
import { tokenParamFields } from "../token-params";
import { checkUnboundAudience, claimMetadata, groupNames, userClaimValue, validateBoundClaims, validateRegistered } from "./claims";
import { configFields, configFromWrite, configView, decodeConfig, keySetOf, SEALED_CONFIG_KEYS } from "./config";
import { keyCache } from "./keys";
import { applyRoleWrite, decodeRole, encodeRole, roleNameOf, roleView } from "./role";
import { verifyJwt } from "./verify";

const mountIdOf = authMountId;

const roleFields = defineFields({
  ...tokenParamFields,
  name: { type: "string", description: "Name of the role (stored lower-case).", required: true },
  role_type: { type: "string", description: "jwt or oidc; oidc whenever a write omits it (Vault)." },
  bound_audiences: { type: "comma-string-slice", description: "aud values the token must carry one of." },
  user_claim: { type: "string", description: "Claim whose value names the user (display name)." },
  user_claim_json_pointer: { type: "bool", description: "user_claim is a JSON pointer." },
  bound_subject: { type: "string", description: "The sub claim tokens must carry." },
  bound_claims: { type: "any", description: "Claims (JSON pointers allowed) and the values they must match." },
  bound_claims_type: { type: "string", description: "string (exact match, default) or glob (whole-value * globs)." },
  claim_mappings: { type: "any", description: "Claims copied into token metadata: {claim: metadata key}." },
  groups_claim: { type: "string", description: "Claim holding the user's groups (checked; Lanyard has no identity groups)." },
  oidc_scopes: { type: "comma-string-slice", description: "OIDC scopes (browser flow)." },
  allowed_redirect_uris: { type: "comma-string-slice", maxBytes: MAX_URL_BYTES, description: "Redirect URIs (browser flow; required for oidc roles)." },
  clock_skew_leeway: { type: "any", description: "Skew allowed on exp/nbf/iat (0: 60s, -1: none)." },
  expiration_leeway: { type: "any", description: "Lifetime given a token without exp (0: 150s, -1: none)." },
  not_before_leeway: { type: "any", description: "Validity before exp given a token without nbf and iat (0: 150s, -1: none)." },
  verbose_oidc_logging: { type: "bool", description: "Accepted for compatibility; tokens and claims are never logged." },
  max_age: { type: "duration", description: "OIDC max_age (browser flow)." },
});

const loginFields = defineFields({
  role: { type: "string", description: "Role to log in with (default: the config's default_role)." },
  jwt: { type: "string", description: "The signed JWT." },
  distributed_claim_access_token: { type: "string", description: "Not supported (Azure distributed claims): a non-empty value is answered with a warning naming it." },
});

async function loadConfig(req: Req) {
  const stored = await getMethodConfig(req.db, req.env, mountIdOf(req), SEALED_CONFIG_KEYS);
  return stored ? decodeConfig(stored) : null;
}

async function login(req: Req<typeof loginFields>) {
  const config = await loadConfig(req);
  if (!config) throw badRequest("could not load configuration");
  const asked = (req.fields.role ?? "").trim();
  const roleName = asked !== "" ? asked.toLowerCase() : config.default_role;
  if (roleName === "") throw badRequest("missing role");
  const stored = await getRole(req.db, mountIdOf(req), roleName);
  if (!stored) throw badRequest(`role "${asked !== "" ? asked : roleName}" could not be found`);
  const role = decodeRole(stored.config);
  if (role.roleType === "oidc") throw badRequest("role with oidc role_type is not allowed");
  const token = (req.fields.jwt ?? "").trim();
  if (token === "") throw badRequest("missing token");
  // Azure's distributed group claims need a Graph call Lanyard does not make: say so rather than
  // log in as if the groups had been read.
  if ((req.fields.distributed_claim_access_token ?? "") !== "") {
    req.warnings.push("distributed_claim_access_token: distributed claims are not fetched; the token's own groups claim is used");
  }
  if (!addressAllowed(req, role.token.boundCidrs)) throw permissionDenied();

  const claims = await verifyJwt(req.env, token, keySetOf(config, keyCache), config.jwt_supported_algs);
  validateRegistered(
    claims,
    {
      issuer: config.bound_issuer,
      subject: role.boundSubject,
      audiences: role.boundAudiences,
      leeways: { clockSkew: role.clockSkewLeeway, expiration: role.expirationLeeway, notBefore: role.notBeforeLeeway },
    },
    Date.now(),
  );
  checkUnboundAudience(claims, role.boundAudiences);
  const user = userClaimValue(claims, role.userClaim, role.userClaimJsonPointer);
  const mapped = claimMetadata(claims, role.claimMappings);
  groupNames(claims, role.groupsClaim);
  validateBoundClaims(role.boundClaimsType, role.boundClaims, claims);
  return loginReply(req, { roleName, params: role.token, displayName: user, metadata: { role: roleName, ...mapped } });
}

export const jwtRoutes = [
  route({
    pattern: "login",
    fields: loginFields,
    public: ["create", "update"],
    handlers: { create: login, update: login },
  }),
  route({
    pattern: "config",
    fields: configFields,
    handlers: {
      async read(req) {
        const config = await loadConfig(req);
        if (!config) throw notFound();
        return { data: configView(config) };
      },
      async update(req) {
        const next = await configFromWrite(req, await loadConfig(req), keyCache);
        await putMethodConfig(req.db, req.env, mountIdOf(req), { ...next }, SEALED_CONFIG_KEYS);
        return null;
      },
    },
  }),
  roleListRoute(),
  route({
    pattern: "role/:name",
    fields: roleFields,
    exists: async (req) => (await getRole(req.db, mountIdOf(req), roleNameOf(req.params.name))) !== null,
    handlers: {
      async read(req) {
        const stored = await getRole(req.db, mountIdOf(req), roleNameOf(req.fields.name));
        if (!stored) throw notFound();
        return { data: roleView(decodeRole(stored.config)) };
      },
      async create(req) {
        return writeRole(req);
      },
      async update(req) {
        return writeRole(req);
      },
      async delete(req) {
        await deleteRole(req.db, mountIdOf(req), roleNameOf(req.fields.name));
        return null;
      },
    },
  }),
];

async function writeRole(req: Req<typeof roleFields>) {
  const name = roleNameOf(req.fields.name);
  const stored = await getRole(req.db, mountIdOf(req), name);
  const role = applyRoleWrite(req, req.fields, stored ? decodeRole(stored.config) : null);
  await putRole(req.db, mountIdOf(req), name, encodeRole(role), null);
  // 204, or 200 with the warnings the dispatcher delivers from req.warnings.
  return null;
}
