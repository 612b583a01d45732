/**
 * The auth-method registry: every method, registered once, by its sys/auth `type`.
 * The dispatcher routes "auth/<path>/…" to the mount's method, and sys/auth enables only these
 * types. `oidc` is the JWT method under its other name, as Vault mounts vault-plugin-auth-jwt.
 */
import { approleMethod } from "../auth/methods/approle";
import { jwtMethod } from "../auth/methods/jwt";
import { kubernetesMethod } from "../auth/methods/kubernetes";
import type { AuthMethod } from "../auth/methods/method";
import type { CompiledRoute } from "../core/route";
import { compileRoutes } from "./engines";

export interface RegisteredAuthMethod {
  method: AuthMethod;
  routes: CompiledRoute[];
}

function registry(methods: Record<string, AuthMethod>): Record<string, RegisteredAuthMethod> {
  const out: Record<string, RegisteredAuthMethod> = {};
  const compiled = new Map<AuthMethod, CompiledRoute[]>();
  for (const [type, method] of Object.entries(methods)) {
    const routes = compiled.get(method) ?? compileRoutes(method.routes);
    compiled.set(method, routes);
    out[type] = { method, routes };
  }
  return out;
}

/** sys/auth type → the method serving it. */
export const AUTH_METHODS: Readonly<Record<string, RegisteredAuthMethod>> = registry({
  approle: approleMethod,
  jwt: jwtMethod,
  oidc: jwtMethod,
  kubernetes: kubernetesMethod,
});
