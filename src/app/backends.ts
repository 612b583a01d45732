/** Route tables of the built-in backends that are not mounts: sys/ and auth/token/. */
import { tokenRoutes } from "../auth/token-routes";
import { compileRoutes } from "./engines";
import { sysRoutes } from "./sys/routes";

export const BACKEND_ROUTES = {
  sys: compileRoutes(sysRoutes),
  token: compileRoutes(tokenRoutes),
};
