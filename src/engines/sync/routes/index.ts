/** Every sys/sync/ route: the engine's sysRoutes (../index.ts), which the app adds to the sys/ table. */
import type { RouteDef } from "../../../core/route";
import { registerKvListener } from "../kv-listener";
import { appRoutes } from "./apps";
import { associationRoutes } from "./associations";
import { configRoutes } from "./config";
import { destinationRoutes } from "./destinations";
import { reconcileRoutes } from "./reconcile";

// The engine follows KV-v2 changes from the moment the sync routes are part of the app.
registerKvListener();

export const syncRoutes: RouteDef[] = [...configRoutes, ...associationRoutes, ...reconcileRoutes, ...destinationRoutes, ...appRoutes];
