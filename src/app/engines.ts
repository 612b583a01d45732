/**
 * The engine registry: every secrets engine, registered once. The Worker entry (./index.ts: queue
 * consumers, Durable Object classes), the cron (./cron.ts), the dispatcher (mount routes), sys/
 * (mount types and their aliases and options, the engines' sys routes, mount disable and
 * namespace delete hooks) all derive from ENGINES. Adding an engine means one entry here; the
 * engine declares itself in its index.ts (the `Engine` type of src/core/engine.ts). The one
 * wiring between engines is here too: the engines that follow KV-v2 changes (KV_FOLLOWERS).
 */
import { AUDIT_SEALED_COLUMN } from "../audit/audit-store";
import { setSealedColumns } from "../core/db/seal-canary";
import type { Engine } from "../core/engine";
import { compileRoute, type CompiledRoute, type RouteDef } from "../core/route";
import { followKvChanges, kvEngine, type KvFollower } from "../engines/kv";
import { identityEngine } from "../engines/identity";
import { pkiEngine } from "../engines/pki";
import { syncEngine, syncKvFollower } from "../engines/sync";

const REGISTERED = [kvEngine, pkiEngine, syncEngine, identityEngine] as const satisfies readonly Engine[];

/** Every engine, in registration order (the order hooks and cron jobs run in). */
export const ENGINES: readonly Engine[] = REGISTERED;

/** The registry with each engine's own type (for the entry's Durable Object export check). */
export type RegisteredEngine = (typeof REGISTERED)[number];

/**
 * What follows KV-v2 changes (secrets sync re-syncs or unsyncs a secret's associations). The KV
 * engine keeps its followers per isolate; they are subscribed here, when the registry is loaded,
 * and by no other module.
 */
const KV_FOLLOWERS: readonly KvFollower[] = [syncKvFollower];
for (const follower of KV_FOLLOWERS) followKvChanges(follower);

export const compileRoutes = (defs: readonly RouteDef[]): CompiledRoute[] => defs.map(compileRoute);

export interface MountEngine {
  engine: Engine;
  /** The engine's mount routes, compiled once. */
  routes: CompiledRoute[];
  /** Removes every row the engine keeps for a mount (called when the mount is disabled). */
  purge: NonNullable<Engine["mounts"]>["purge"];
}

/** Mount type ("kv", "pki") → the engine that serves it (no prototype: any stored type is safe to look up). */
export const MOUNT_ENGINES: Readonly<Record<string, MountEngine>> = mountEngines(ENGINES);

function mountEngines(engines: readonly Engine[]): Record<string, MountEngine> {
  const out: Record<string, MountEngine> = Object.create(null) as Record<string, MountEngine>;
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

/**
 * Every name sys/mounts accepts as an enable's `type` (the engines' types and their aliases,
 * "kv-v2") → the type the mount is stored under.
 */
export const MOUNT_TYPE_NAMES: ReadonlyMap<string, string> = mountTypeNames(ENGINES);

function mountTypeNames(engines: readonly Engine[]): Map<string, string> {
  const out = new Map<string, string>();
  const add = (name: string, type: string) => {
    if (out.has(name)) throw new Error(`mount type name "${name}" is registered twice`);
    out.set(name, type);
  };
  for (const engine of engines) {
    for (const type of engine.mounts?.types ?? []) add(type, type);
  }
  for (const engine of engines) {
    for (const [alias, type] of Object.entries(engine.mounts?.aliases ?? {})) {
      if (!engine.mounts?.types.includes(type)) throw new Error(`engine ${engine.name}: alias "${alias}" names "${type}", none of its mount types`);
      add(alias, type);
    }
  }
  return out;
}

/** The routes engines add under sys/, in registration order. */
export const ENGINE_SYS_ROUTES: RouteDef[] = ENGINES.flatMap((e) => e.sysRoutes ?? []);

/** The tables whose rows keep a namespace from being deleted, from every engine (sys/namespaces). */
export const NAMESPACE_TABLES: readonly string[] = ENGINES.flatMap((e) => e.namespaceTables ?? []);

// The seal check samples every column of sealed values: the engines' and the audit devices' salts.
setSealedColumns([...ENGINES.flatMap((e) => e.sealedColumns ?? []), AUDIT_SEALED_COLUMN]);
