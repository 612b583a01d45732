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

// Module scope is per isolate; listeners are registered at import time by the engines that care.
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
