/**
 * Subscribes the sync engine to KV-v2 change events (src/engines/kv/events.ts): writes re-sync every
 * association of the secret; deleting or destroying the current version, or deleting the
 * metadata, unsyncs; undelete re-syncs (Vault docs: secrets sync). A write's bookkeeping rides in the
 * write's own D1 batch (a write companion). Registered once per isolate when the sync routes
 * are loaded.
 */
import { loadConfig } from "../../core/config";
import { addKvWriteCompanion, onKvChange } from "../kv";
import { onSecretChanged, onSecretWritten, secretWriteStatements } from "./operations";

let registered = false;

export function registerKvListener(): void {
  if (registered) return;
  registered = true;
  onKvChange(async (event, ctx) => {
    await onSecretChanged({ env: ctx.env, db: ctx.db, keys: loadConfig(ctx.env).seal }, event);
  });
  // Writes: the bump commits with the write itself (one D1 round trip fewer per write).
  addKvWriteCompanion({
    statements: secretWriteStatements,
    async ran(event, ctx, results) {
      await onSecretWritten({ env: ctx.env, db: ctx.db, keys: loadConfig(ctx.env).seal }, event, results);
    },
  });
}
