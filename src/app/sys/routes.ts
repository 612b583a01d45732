/** Every sys/ endpoint, in one table for the dispatcher: sys's own, then the engines' (sys/sync/). */
import type { RouteDef } from "../../core/route";
import { ENGINE_SYS_ROUTES } from "../engines";
import { activationFlagRoutes } from "./activation-flags";
import { auditRoutes } from "./audit";
import { authRoutes, authTuneViaMountsRoute } from "./auth";
import { capabilityRoutes } from "./capabilities";
import { leaseRoutes } from "./leases";
import { metricsRoutes } from "./metrics";
import { mountRoutes } from "./mounts";
import { namespaceRoutes } from "./namespaces";
import { policyRoutes } from "./policies";
import { snapshotRoutes } from "./snapshot-routes";
import { uiMountRoutes } from "./ui-mounts";

export const sysRoutes: RouteDef[] = [authTuneViaMountsRoute, ...mountRoutes, ...authRoutes, ...policyRoutes, ...namespaceRoutes, ...capabilityRoutes, ...uiMountRoutes, ...activationFlagRoutes, ...leaseRoutes, ...auditRoutes, ...metricsRoutes, ...snapshotRoutes, ...ENGINE_SYS_ROUTES];
