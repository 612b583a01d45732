/**
 * What a secrets engine is to the app: one value that says everything the Worker needs to wire it
 * (its mount types, their aliases and options, and its routes, the sys/ routes it adds, scheduled
 * jobs, queue consumers, Durable Object classes, what keeps a namespace from being deleted, and
 * what it does when a mount is disabled or a namespace deleted). Each engine
 * exports one such value from its index.ts; src/app/engines.ts registers every engine once, and
 * the Worker entry, the dispatcher, the cron and sys/ derive from that registry. It lives in core
 * so that engines can declare themselves without importing the app (`core ← auth ← engines ← app`).
 */
import type { Db } from "./db/client";
import type { LeaseRow } from "./lease-store";
import type { GaugeFamily, MetricsContext } from "./metrics";
import type { MountRow } from "./mount-store";
import type { RouteDef } from "./route";

/** A scheduled job (wrangler.toml [triggers] crons); each runs on its own, see src/app/cron.ts. */
export interface CronJob {
  name: string;
  run(env: Env, controller: ScheduledController): Promise<void>;
}

/** The bindings and database of the request that triggers a hook. */
export interface EngineHookContext {
  env: Env;
  db: Db;
}

/** The mounts an engine serves (sys/mounts `type`, after normalisation: "kv", "pki"). */
export interface EngineMounts {
  types: readonly string[];
  /**
   * Other names sys/mounts accepts for one of `types` when enabling a mount (alias → type, e.g.
   * "kv-v2" → "kv"). The mount is stored, and reads back, under the type itself.
   */
  aliases?: Readonly<Record<string, string>>;
  /**
   * The options a new mount is stored with, from the enable's `type` as asked (one of `types` or
   * an alias) and its `options`; throws an ApiError (400) for a value the engine refuses. Keys it
   * does not act on are left out here and warned about through `checkOption`. Absent: the engine
   * takes no options, and a mount is stored with none.
   */
  normalizeOptions?(asked: string, options: Readonly<Record<string, unknown>>): Record<string, string>;
  /**
   * For an option key of an enable or a tune: true when the engine acts on it (after checking the
   * value, throwing a 400 that names `field` for one it refuses), false for any other key, which
   * sys/mounts names in a warning. Absent: every key is warned about.
   */
  checkOption?(key: string, value: unknown, field: string): boolean;
  /** Options every mount of the engine reads back with, under its stored ones (sys/mounts `options`). */
  defaultOptions?: Readonly<Record<string, string>>;
  /**
   * Subtrees under the mount that policies name instead of the mount's own paths (KV-v2's
   * "data/" and "metadata/"), which sys/internal/ui/mounts probes to tell whether a token may use
   * the mount.
   */
  policySubtrees?: readonly string[];
  /** Routes relative to the mount path (what RouteDef patterns match after "<mount>/"). */
  routes: readonly RouteDef[];
  /** Removes every row and object the engine keeps for a mount (the mount is being disabled). */
  purge(db: Db, mount: MountRow, env: Env): Promise<void>;
}

/** A column of sealed values (each starts `v1:<key id>:`, ./db/seal.ts). */
export interface SealedColumn {
  table: string;
  column: string;
}

export interface Engine {
  /** For logs and errors, e.g. "pki". */
  name: string;
  /** Absent for an engine that serves no mount (secrets sync lives under sys/sync/). */
  mounts?: EngineMounts;
  /** Routes the engine adds to the sys/ backend, relative to "sys/" (e.g. "sync/destinations"). */
  sysRoutes?: readonly RouteDef[];
  /** Scheduled jobs, run on every cron trigger. */
  cron?: readonly CronJob[];
  /** Queue consumers by queue name (wrangler.toml [[queues.consumers]] queue). */
  queues?: Readonly<Record<string, (batch: MessageBatch<unknown>, env: Env) => Promise<void>>>;
  /**
   * Durable Object classes by the name wrangler.toml binds them under (class_name). The Worker
   * entry must export each under that name; src/app/index.ts checks it at type level.
   */
  durableObjects?: Readonly<Record<string, abstract new (ctx: DurableObjectState, env: Env) => Rpc.DurableObjectBranded>>;
  /**
   * Called when any mount is being disabled, after it is marked "disabling" and before the owning
   * engine purges it (sync: unsync the associations of a KV mount's secrets).
   */
  onMountDisable?(ctx: EngineHookContext, mount: MountRow): Promise<void>;
  /**
   * What of this engine still lives in a namespace and keeps it from being deleted, as a phrase
   * ("sync destinations (a/b) and repohost apps (x)"), or null when nothing does.
   */
  namespaceLeftovers?(db: Db, namespaceId: string): Promise<string | null>;
  /**
   * The engine's tables whose rows keep a namespace from being deleted, each with a
   * `namespace_id` column (sync: its destinations and repohost apps). The namespace delete tests
   * them in the very statement that marks the namespace "deleting" (invariant 3 of
   * ./lifecycle.ts), which is why the engine names its tables instead of running its own query;
   * `namespaceLeftovers` only words the refusal and must count the same rows.
   */
  namespaceTables?: readonly string[];
  /**
   * Where the engine keeps values sealed with SEAL_KEY (`table.column`): the seal check at start
   * (./db/seal-canary.ts) reads the oldest of each and refuses to serve when no configured key
   * sealed it, so core never names an engine's table.
   */
  sealedColumns?: readonly SealedColumn[];
  /** Removes the engine's remaining rows of a namespace that is being deleted (idempotent). */
  purgeNamespace?(db: Db, namespaceId: string): Promise<void>;
  /**
   * Revokes the secret behind a lease the engine registered on one of its mounts (src/core/leases.ts):
   * sys/leases/revoke, revoke-prefix and the lease's expiry call it, as Vault's expiration manager
   * calls the secret's Revoke callback. Must succeed when the secret is already gone (Vault only
   * logs that); the lease row is deleted by the caller afterwards.
   */
  revokeLease?(ctx: EngineHookContext, mount: MountRow, lease: LeaseRow): Promise<void>;
  /**
   * The engine's gauges for sys/metrics (./metrics.ts; docs/operations.md "Metrics"), read from
   * its own tables with a few aggregate statements, so core and app name none of them.
   */
  metrics?(ctx: MetricsContext): Promise<GaugeFamily[]>;
}
