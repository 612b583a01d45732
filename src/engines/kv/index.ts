/**
 * The KV-v2 engine's one face: the engine value the app registers (src/app/engines.ts), and what
 * other engines may use of KV (secrets sync reads secrets and follows their changes). Nothing
 * outside src/engines/kv/ imports any other module of it.
 */
import type { Engine } from "../../core/engine";
import { kvMountOptions } from "./mount-options";
import { kvRoutes } from "./routes";
import { purgeKvMount } from "./store";

export const kvEngine = {
  name: "kv",
  sealedColumns: [{ table: "kv_versions", column: "sealed_data" }],
  mounts: {
    types: ["kv"],
    ...kvMountOptions,
    routes: kvRoutes,
    purge: (db, mount) => purgeKvMount(db, mount.id),
  },
} satisfies Engine;

// -- for other engines: reading secrets and following their changes ----------------------------

export { followKvChanges, type KvChangeEvent, type KvChangeKind, type KvEventContext, type KvFollower, type KvWriteCompanion } from "./events";
export { isLive, type JsonObject, type KeyMetadata, type VersionInfo } from "./service";
export { currentVersionOf, currentVersionStatement, getMetadata, getVersion, openVersionData, type StoredVersion } from "./store";
