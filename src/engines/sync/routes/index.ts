/** Every sys/sync/ route: the engine's sysRoutes (../index.ts), which the app adds to the sys/ table. */
import type { RouteDef } from "../../../core/route";
import { appRoutes } from "./apps";
import { associationRoutes } from "./associations";
import { configRoutes } from "./config";
import { destinationRoutes } from "./destinations";
import { reconcileRoutes } from "./reconcile";

export const syncRoutes: RouteDef[] = [...configRoutes, ...associationRoutes, ...reconcileRoutes, ...destinationRoutes, ...appRoutes];
