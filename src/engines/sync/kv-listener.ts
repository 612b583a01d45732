/**
 * How the sync engine follows KV-v2 change events (src/engines/kv/events.ts): writes re-sync every
 * association of the secret; deleting or destroying the current version, or deleting the
 * metadata, unsyncs; undelete re-syncs. Vault's secrets-sync docs say a new version is pushed and
 * a deleted secret is deleted at the destination, without telling soft delete, destroy and
 * metadata delete apart, so each of them unsyncs. A write's bookkeeping rides in the
 * write's own D1 batch (a write companion). The engine value declares this follower
 * (./index.ts) and the engine registry (src/app/engines.ts) subscribes it once per isolate.
 */
import { loadConfig } from "../../core/config";
import type { KvFollower } from "../kv";
import { onSecretChanged, onSecretWritten, secretWriteStatements } from "./operations";

export const syncKvFollower: KvFollower = {
  async onChange(event, ctx) {
    await onSecretChanged({ env: ctx.env, db: ctx.db, keys: loadConfig(ctx.env).seal }, event);
  },
  // Writes: the bump commits with the write itself (one D1 round trip fewer per write).
  writeCompanion: {
    statements: secretWriteStatements,
    async ran(event, ctx, results) {
      await onSecretWritten({ env: ctx.env, db: ctx.db, keys: loadConfig(ctx.env).seal }, event, results);
    },
  },
};
