/** Every sys/ endpoint, in one table for the dispatcher. */
import type { RouteDef } from "../../core/route";
import { syncRoutes } from "../../engines/sync/routes";
import { activationFlagRoutes } from "./activation-flags";
import { capabilityRoutes } from "./capabilities";
import { mountRoutes } from "./mounts";
import { namespaceRoutes } from "./namespaces";
import { policyRoutes } from "./policies";
import { uiMountRoutes } from "./ui-mounts";

export const sysRoutes: RouteDef[] = [...mountRoutes, ...policyRoutes, ...namespaceRoutes, ...capabilityRoutes, ...uiMountRoutes, ...activationFlagRoutes, ...syncRoutes];
