/**
 * The Kubernetes auth method (Vault API: /auth/kubernetes; vault-plugin-auth-kubernetes):
 * `config`, LIST `role`, `role/:name` and the public `login {role, jwt}` that cert-manager,
 * Vault Agent and hvac's `client.auth.kubernetes.login` post.
 *
 * A login (upstream path_login.go pathLogin), in upstream's order:
 * 1. `missing role` / `missing jwt` (400); an unknown role → 400 `invalid role name "x"`;
 * 2. the client address against the role's token_bound_cidrs (403 `permission denied`);
 * 3. the JWT parsed and its claims checked (./claims.ts): signature only with `pem_keys`,
 *    audience when the role has one, issuer when configured; 403;
 * 4. the service account's name and namespace against the role's bindings: 403
 *    `service account name not authorized` / `namespace not authorized`;
 * 5. the cluster's TokenReview API (./token-review.ts), with the reviewer JWT or, when none is
 *    configured, the client's own JWT as bearer; it must agree on name, namespace and uid.
 *    A refusal is 403 `permission denied`; an API that is down is 502;
 * 6. an orphan token through the framework's loginReply: display name `<ns>-<name>`, metadata
 *    service_account_{uid,name,namespace,secret_name} and role.
 *
 * Platform notes (see ./config.ts): the API server's certificate is checked against the
 * platform's trust store, since a Worker's fetch cannot trust `kubernetes_ca_cert` (validated and
 * stored only); `disable_local_ca_jwt` is stored only, since a Worker has no pod files; namespace
 * label selectors are refused.
 *
 * JWTs never appear in logs, errors or reads.
 */
import { authMountId, roleListRoute } from "../method-routes";
import { ApiError, badRequest, notFound, permissionDenied } from "../../../core/errors";
import { defineFields } from "../../../core/fields";
import { route, type JsonReply, type Req } from "../../../core/route";
import { addressAllowed, loginReply } from "../login";
import type { AuthMethod } from "../method";
import { deleteRole, getMethodConfig, getRole, putMethodConfig, putRole } from "../method-store";
import { checkBindings, validateServiceAccountJwt } from "./claims";
import { configFields, configFrom, configView, configWarnings, kubeConfigOf, SEALED_KEYS } from "./config";
import { kubeRoleOf, roleDocument, roleFields, roleFrom, roleView } from "./role";
import { reviewToken } from "./token-review";

const mountIdOf = authMountId;

const roleNameOf = (raw: string | undefined): string => (raw ?? "").trim().toLowerCase();

const loginFields = defineFields({
  role: { type: "string", default: "", description: "Name of the role to log in with." },
  jwt: { type: "string", default: "", description: "The service account's JWT." },
});

async function login(req: Req<typeof loginFields>): Promise<JsonReply> {
  const roleName = req.fields.role.trim();
  if (roleName === "") throw badRequest("missing role");
  const jwt = req.fields.jwt.trim();
  if (jwt === "") throw badRequest("missing jwt");
  const mountId = mountIdOf(req);
  const stored = await getRole(req.db, mountId, roleName.toLowerCase());
  if (!stored) throw badRequest(`invalid role name "${roleName}"`);
  const role = kubeRoleOf(stored.config);
  if (!addressAllowed(req, role.token.boundCidrs)) throw permissionDenied();

  const storedConfig = await getMethodConfig(req.db, req.env, mountId, SEALED_KEYS);
  if (!storedConfig) throw badRequest("could not load backend configuration");
  const config = kubeConfigOf(storedConfig);

  const sa = await validateServiceAccountJwt(jwt, {
    pemKeys: config.pem_keys,
    issuer: config.disable_iss_validation ? "" : config.issuer,
    audience: role.audience.trim(),
    nowSeconds: Math.floor(Date.now() / 1000),
  });
  checkBindings(sa, { names: role.bound_service_account_names, namespaces: role.bound_service_account_namespaces });
  // Upstream needs the uid for the alias name and the token metadata either way.
  if (sa.uid === "") throw new ApiError(403, "could not parse UID from claims");
  if (role.alias_name_source === "serviceaccount_name" && (sa.namespace === "" || sa.name === "")) {
    throw new ApiError(403, "service account namespace and name must be set");
  }

  const audiences = role.audience.trim() !== "" ? [role.audience.trim()] : sa.audiences;
  const review = await reviewToken(req.env, { host: config.kubernetes_host, reviewerJwt: config.token_reviewer_jwt }, jwt, audiences);
  // Upstream serviceAccount.lookup: the cluster must agree with the claims ("namepaces" [sic]).
  const mismatch =
    review.name !== sa.name ? "JWT names did not match" : review.uid !== sa.uid ? "JWT UIDs did not match" : review.namespace !== sa.namespace ? "JWT namepaces did not match" : "";
  if (mismatch !== "") {
    console.warn(`kubernetes login refused: ${mismatch}`);
    throw permissionDenied();
  }

  return loginReply(req, {
    roleName: stored.name,
    params: role.token,
    displayName: `${sa.namespace}-${sa.name}`,
    metadata: {
      service_account_uid: sa.uid,
      service_account_name: sa.name,
      service_account_namespace: sa.namespace,
      service_account_secret_name: sa.secretName,
      role: stored.name,
    },
  });
}

async function writeRole(req: Req<typeof roleFields>): Promise<null> {
  const name = roleNameOf(req.params.name);
  if (name === "") throw badRequest("missing role name");
  const mountId = mountIdOf(req);
  const existing = await getRole(req.db, mountId, name);
  const role = roleFrom(req, existing ? kubeRoleOf(existing.config) : null);
  await putRole(req.db, mountId, name, roleDocument(role), null);
  return null;
}

export const kubernetesMethod: AuthMethod = {
  type: "kubernetes",
  routes: [
    route({
      pattern: "config",
      fields: configFields,
      handlers: {
        async read(req) {
          const stored = await getMethodConfig(req.db, req.env, mountIdOf(req), SEALED_KEYS);
          if (!stored) throw notFound();
          return { data: configView(kubeConfigOf(stored)) };
        },
        // A write replaces the whole configuration (upstream pathConfigWrite).
        async update(req) {
          const config = await configFrom(req.env, req.fields);
          await putMethodConfig(req.db, req.env, mountIdOf(req), { ...config }, SEALED_KEYS);
          req.warnings.push(...configWarnings(config));
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
          const stored = await getRole(req.db, mountIdOf(req), roleNameOf(req.params.name));
          if (!stored) throw notFound();
          return { data: roleView(kubeRoleOf(stored.config)) };
        },
        create: writeRole,
        update: writeRole,
        // 204, also when the role did not exist (upstream). Its tokens are revoked with it.
        async delete(req) {
          await deleteRole(req.db, mountIdOf(req), roleNameOf(req.params.name));
          return null;
        },
      },
    }),
    route({
      pattern: "login",
      fields: loginFields,
      public: ["update"],
      handlers: {
        update: login,
      },
    }),
  ],
};
