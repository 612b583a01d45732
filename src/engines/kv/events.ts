/**
 * Typed change events of the KV-v2 engine. Every change to a secret (write, patch, delete,
 * undelete, destroy, metadata delete) emits exactly one event after it is committed, so that
 * other engines (secrets sync) can react without the KV code knowing about them.
 *
 * Listeners run after the response via `waitUntil`: a slow or failing listener never delays or
 * fails the write that triggered it. Their errors are caught and logged (without secret data:
 * events carry paths and version numbers only).
 */
import type { Db } from "../../core/db/client";

export type KvChangeKind = "written" | "deleted" | "undeleted" | "destroyed" | "metadata-deleted";

export interface KvChangeEvent {
  kind: KvChangeKind;
  namespaceId: string;
  mountId: string;
  /** The mount's path with its trailing slash, e.g. "secret/". */
  mountPath: string;
  /** The secret's path relative to the mount (no data/ prefix). */
  path: string;
  /** The version written (written) or soft-deleted by a data/ DELETE (deleted). */
  version?: number;
  /** The versions a delete/, undelete/ or destroy/ call addressed. */
  versions?: number[];
}

/** What a listener gets besides the event: the bindings and database of the request. */
export interface KvEventContext {
  env: Env;
  db: Db;
  waitUntil(p: Promise<unknown>): void;
}

export type KvChangeListener = (event: KvChangeEvent, ctx: KvEventContext) => void | Promise<void>;

// Module scope is per isolate. The engines that follow KV changes are subscribed by the engine
// registry (src/app/engines.ts, through followKvChanges), never by importing a module; tests
// subscribe with onKvChange.
const listeners = new Set<KvChangeListener>();

/** Subscribes to KV changes; returns the unsubscribe function. */
export function onKvChange(listener: KvChangeListener): () => void {
  listeners.add(listener);
  return () => {
    listeners.delete(listener);
  };
}

/** Emits one event to every listener, each in its own waitUntil with its errors contained. */
export function emitKvChange(ctx: KvEventContext, event: KvChangeEvent): void {
  const frozen = Object.freeze({ ...event, versions: event.versions ? [...event.versions] : undefined });
  for (const listener of [...listeners]) {
    const run = (async () => listener(frozen, ctx))().catch((err: unknown) => {
      console.error(`kv change listener failed for ${event.kind} ${event.mountPath}${event.path}:`, err);
    });
    ctx.waitUntil(run);
  }
}

/**
 * A listener that rides in the batch that commits a write ("written" events), so that its
 * bookkeeping costs no D1 round trip of its own (a KV write with sync is 2 round trips, not
 * 3). `statements` is asked before the write; its statements go after the write's own in the
 * same D1 batch (one transaction). Once the batch has run, `ran` gets their results,
 * in waitUntil like any listener, errors contained, with `won` telling whether the write was
 * kept. A write that loses its race still runs them (without changing the key), so they must be
 * harmless alone, and `ran` must finish what they started either way: the sync engine's mark
 * associations to look again, and its `ran` queues them. A batch that fails is rolled back
 * whole, theirs included, and `ran` is not called.
 */
export interface KvWriteCompanion {
  statements(db: Db, key: { mountId: string; path: string }, now: number): D1PreparedStatement[];
  ran(event: KvChangeEvent, ctx: KvEventContext, results: D1Result<unknown>[], won: boolean): Promise<void>;
}

const companions = new Set<KvWriteCompanion>();

/** Registers a write companion; returns the unregister function. */
export function addKvWriteCompanion(c: KvWriteCompanion): () => void {
  companions.add(c);
  return () => {
    companions.delete(c);
  };
}

/** The companions' statements for one write, and the call that hands each its results once the batch ran. */
export function companionStatements(
  db: Db,
  key: { mountId: string; path: string },
  now: number,
): { statements: D1PreparedStatement[]; ran(ctx: KvEventContext, event: KvChangeEvent, results: D1Result<unknown>[], won: boolean): void } {
  const parts = [...companions].map((c) => ({ c, stmts: c.statements(db, key, now) }));
  return {
    statements: parts.flatMap((p) => p.stmts),
    ran(ctx, event, results, won) {
      const frozen = Object.freeze({ ...event });
      let at = 0;
      for (const { c, stmts } of parts) {
        const mine = results.slice(at, at + stmts.length);
        at += stmts.length;
        const run = (async () => c.ran(frozen, ctx, mine, won))().catch((err: unknown) => {
          console.error(`kv write companion failed for ${event.mountPath}${event.path}:`, err);
        });
        ctx.waitUntil(run);
      }
    },
  };
}

/**
 * What an engine that follows KV changes declares (secrets sync): a listener for every change
 * and, optionally, a companion that rides in each write's batch.
 */
export interface KvFollower {
  onChange: KvChangeListener;
  writeCompanion?: KvWriteCompanion;
}

/**
 * Subscribes a follower to this isolate's KV changes (once, however often it is called with the
 * same value); returns the unsubscribe function. Called by the engine registry.
 */
export function followKvChanges(follower: KvFollower): () => void {
  const offs = [onKvChange(follower.onChange)];
  if (follower.writeCompanion) offs.push(addKvWriteCompanion(follower.writeCompanion));
  return () => {
    for (const off of offs) off();
  };
}
