import type { RouteDef } from "../http/route";

export const kvRoutes: RouteDef[] = [];
