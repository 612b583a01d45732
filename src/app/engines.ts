/**
 * Secrets engines by mount type. Adding an engine means one entry here: its routes and how to
 * remove its data when its mount is disabled.
 */
import type { Db } from "../core/db/client";
import { compileRoute, type CompiledRoute, type RouteDef } from "../core/route";
import { kvRoutes } from "../engines/kv/routes";
import { purgeKvMount } from "../engines/kv/store";
import { purgePkiMount } from "../engines/pki/purge";
import { pkiRoutes } from "../engines/pki/routes";
import type { MountRow } from "../core/mount-store";

export interface EngineDef {
  routes: CompiledRoute[];
  /** Removes every row the engine keeps for a mount (called when the mount is disabled). */
  purge(db: Db, mount: MountRow, env: Env): Promise<void>;
}

export const compileRoutes = (defs: RouteDef[]): CompiledRoute[] => defs.map(compileRoute);

export const ENGINES: Record<string, EngineDef> = {
  kv: { routes: compileRoutes(kvRoutes), purge: (db, m) => purgeKvMount(db, m.id) },
  pki: { routes: compileRoutes(pkiRoutes), purge: (db, m, env) => purgePkiMount(db, env, m) },
};
