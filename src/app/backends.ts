/** Route tables of the built-in backends that are not mounts: sys/, auth/token/ and identity/. */
import { tokenRoutes } from "../auth/token-routes";
import { identityRoutes } from "../engines/identity";
import { compileRoutes } from "./engines";
import { sysRoutes } from "./sys/routes";

export const BACKEND_ROUTES = {
  sys: compileRoutes(sysRoutes),
  token: compileRoutes(tokenRoutes),
  identity: compileRoutes(identityRoutes),
};
