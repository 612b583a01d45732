/** Every sys/sync/ route, spread into the sys/ table (src/sys/routes.ts). */
import type { RouteDef } from "../../http/route";
import { appRoutes } from "./apps";
import { configRoutes } from "./config";
import { destinationRoutes } from "./destinations";

export const syncRoutes: RouteDef[] = [...configRoutes, ...destinationRoutes, ...appRoutes];
