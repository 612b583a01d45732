/**
 * The engine registry: every secrets engine, registered once. The Worker entry (./index.ts: queue
 * consumers, Durable Object classes), the cron (./cron.ts), the dispatcher (mount routes), sys/
 * (the engines' sys routes, mount disable and namespace delete hooks) all derive from ENGINES.
 * Adding an engine means one entry here; the engine declares itself in its index.ts (the
 * `Engine` type of src/core/engine.ts).
 */
import type { Engine } from "../core/engine";
import { compileRoute, type CompiledRoute, type RouteDef } from "../core/route";
import { kvEngine } from "../engines/kv";
import { pkiEngine } from "../engines/pki";
import { syncEngine } from "../engines/sync";

const REGISTERED = [kvEngine, pkiEngine, syncEngine] as const satisfies readonly Engine[];

/** Every engine, in registration order (the order hooks and cron jobs run in). */
export const ENGINES: readonly Engine[] = REGISTERED;

/** The registry with each engine's own type (for the entry's Durable Object export check). */
export type RegisteredEngine = (typeof REGISTERED)[number];

export const compileRoutes = (defs: readonly RouteDef[]): CompiledRoute[] => defs.map(compileRoute);

export interface MountEngine {
  engine: Engine;
  /** The engine's mount routes, compiled once. */
  routes: CompiledRoute[];
  /** Removes every row the engine keeps for a mount (called when the mount is disabled). */
  purge: NonNullable<Engine["mounts"]>["purge"];
}

/** Mount type ("kv", "pki") → the engine that serves it. */
export const MOUNT_ENGINES: Readonly<Record<string, MountEngine>> = mountEngines(ENGINES);

function mountEngines(engines: readonly Engine[]): Record<string, MountEngine> {
  const out: Record<string, MountEngine> = {};
  for (const engine of engines) {
    if (!engine.mounts) continue;
    const routes = compileRoutes(engine.mounts.routes);
    for (const type of engine.mounts.types) {
      if (out[type]) throw new Error(`mount type "${type}" is served by two engines (${out[type].engine.name}, ${engine.name})`);
      out[type] = { engine, routes, purge: engine.mounts.purge };
    }
  }
  return out;
}

/** The routes engines add under sys/, in registration order. */
export const ENGINE_SYS_ROUTES: RouteDef[] = ENGINES.flatMap((e) => e.sysRoutes ?? []);
