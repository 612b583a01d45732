/**
 * Subscribes the sync engine to KV-v2 change events (src/engines/kv/events.ts): writes re-sync every
 * association of the secret; deleting or destroying the current version, or deleting the
 * metadata, unsyncs; undelete re-syncs (reference §1.14). Registered once per isolate when the
 * sync routes are loaded.
 */
import { loadConfig } from "../../core/config";
import { onKvChange } from "../kv";
import { onSecretChanged } from "./operations";

let registered = false;

export function registerKvListener(): void {
  if (registered) return;
  registered = true;
  onKvChange(async (event, ctx) => {
    await onSecretChanged({ env: ctx.env, db: ctx.db, keys: loadConfig(ctx.env).seal }, event);
  });
}
