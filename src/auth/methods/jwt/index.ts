/**
 * The JWT/OIDC auth method, JWT login part (Vault API: /auth/jwt): machines present a
 * JWT signed by an issuer the mount trusts (GitHub Actions, a Kubernetes cluster, any OIDC
 * provider) and get a token with the role's policies. What the framework registers for the
 * mount types `jwt` and `oidc` (Vault mounts vault-plugin-auth-jwt under both names).
 *
 * - ./routes.ts: `config`, LIST `role`, `role/:name`, `login` (public);
 * - ./config.ts: the configuration, its validation and write-time fetch;
 * - ./role.ts: the role model and Vault's write rules;
 * - ./keys.ts: key sources (JWKS URL, OIDC discovery, PEM keys), fetching and the isolate cache;
 * - ./verify.ts: the JWS signature and algorithm checks (jose);
 * - ./claims.ts: time, iss/sub/aud, bound claims, claim mappings, user and groups claims.
 *
 * Roles and config are stored through ../method-store.ts; this method has no table of its own,
 * so it needs no purge. The browser redirect flow (`oidc/auth_url`, `oidc/callback`) is not served.
 */
import type { AuthMethod } from "../method";
import { jwtRoutes } from "./routes";

export const jwtMethod: AuthMethod = {
  type: "jwt",
  routes: jwtRoutes,
};
