/**
 * `POST auth/<mount>/login {role_id, secret_id}`: AppRole login (Vault API: /auth/approle/login;
 * OpenBao builtin/credential/approle/path_login.go), unauthenticated like every login path.
 *
 * Checks, in Vault's order; each failure is a 400:
 * 1. no role_id → `missing role_id`; 2. unknown role_id → `invalid role or secret ID`;
 * 3. bind_secret_id and no secret_id → `missing secret_id`;
 * 4. the SecretID is unknown, expired or used up → `invalid role or secret ID`. A use-limited
 *    SecretID is spent here, before the address checks, as in Vault (a login from a refused
 *    address still burns the use);
 * 5. the SecretID's cidr_list is no longer within the role's secret_id_bound_cidrs (Vault: 500);
 * 6. the client address is outside the SecretID's cidr_list, then 7. outside the role's
 *    secret_id_bound_cidrs.
 * Then the framework's loginReply checks the token's bound CIDRs and issues the token.
 *
 * Differences from Vault, on purpose:
 * - Expiry is checked strictly at login. Vault does not check it there and relies on its periodic
 *   tidy (about every 60 s), so a Vault SecretID can work up to a minute past expiration_time.
 * - The client address is CF-Connecting-IP only (the framework's clientAddress); X-Forwarded-For
 *   and X-Real-IP are never trusted. Without it, any CIDR binding refuses the login.
 * - No message quotes the SecretID (Vault's `invalid secret_id "<raw>"` does), and Vault's Go
 *   formatting artefact `: %!w(<nil>)` is left out of the CIDR messages.
 * - Lanyard has no user lockout (Vault locks a role_id out for 15 minutes after 5 failed logins).
 */
import { cidrsWithin, ipInCidrs } from "../../../core/cidr";
import { badRequest } from "../../../core/errors";
import { defineFields } from "../../../core/fields";
import { route } from "../../../core/route";
import { clientAddress, loginReply } from "../login";
import { getRoleByRoleId } from "../method-store";
import { decodeRole, INVALID_CREDENTIALS, MAX_ID_LENGTH, mountIdOf, subsetError } from "./role";
import { spendSecretId } from "./secret-id-store";

const loginFields = defineFields({
  role_id: { type: "string", description: "The role's RoleID (always required)." },
  secret_id: { type: "string", description: "A SecretID of the role (required when the role has bind_secret_id)." },
});

function tooLong(s: string): boolean {
  return new TextEncoder().encode(s).length > MAX_ID_LENGTH;
}

export const loginRoutes = [
  route({
    pattern: "login",
    fields: loginFields,
    public: ["update"],
    handlers: {
      async update(req) {
        const roleId = (req.fields.role_id ?? "").trim();
        if (roleId === "") throw badRequest("missing role_id");
        const mountId = mountIdOf(req);
        const found = tooLong(roleId) ? null : await getRoleByRoleId(req.db, mountId, roleId);
        if (!found) throw badRequest(INVALID_CREDENTIALS);
        const role = decodeRole(found.config);
        const ip = clientAddress(req);
        const shownIp = ip ?? "unknown";

        let secretMetadata: Record<string, string> = {};
        let tokenBoundCidrs: string[] | undefined;
        if (role.bindSecretId) {
          const secretId = (req.fields.secret_id ?? "").trim();
          if (secretId === "") throw badRequest("missing secret_id");
          const entry = tooLong(secretId) ? null : await spendSecretId(req.db, { mountId, roleName: found.name, salt: role.secretIdSalt }, secretId, Date.now());
          if (!entry) throw badRequest(INVALID_CREDENTIALS);
          if (!cidrsWithin(entry.cidrList, role.secretIdBoundCidrs)) throw subsetError("cidr_list", role.secretIdBoundCidrs, entry.cidrList);
          if (entry.cidrList.length > 0 && !ipInCidrs(ip, entry.cidrList)) {
            const how = entry.numUses > 0 ? "by" : "through";
            throw badRequest(`source address "${shownIp}" unauthorized ${how} CIDR restrictions on the secret ID`);
          }
          secretMetadata = entry.metadata;
          if (entry.tokenBoundCidrs.length > 0) tokenBoundCidrs = entry.tokenBoundCidrs;
        }
        if (role.secretIdBoundCidrs.length > 0 && !ipInCidrs(ip, role.secretIdBoundCidrs)) {
          throw badRequest(`source address "${shownIp}" unauthorized by CIDR restrictions on the role`);
        }

        return loginReply(req, {
          roleName: found.name,
          params: role.token,
          // Vault's AppRole sets no display name: the token's is the mount's name ("approle").
          displayName: "",
          // role_name last, so SecretID metadata cannot pose as another role (Vault does the same).
          metadata: { ...secretMetadata, role_name: found.name },
          ...(tokenBoundCidrs ? { boundCidrs: tokenBoundCidrs } : {}),
        });
      },
    },
  }),
];
