/**
 * The KV-v2 engine's one face: the engine value the app registers (src/app/engines.ts), and what
 * other engines may use of KV (secrets sync reads secrets and follows their changes). Nothing
 * outside src/engines/kv/ imports any other module of it.
 */
import type { Engine } from "../../core/engine";
import { kvRoutes } from "./routes";
import { purgeKvMount } from "./store";

export const kvEngine = {
  name: "kv",
  mounts: {
    types: ["kv"],
    routes: kvRoutes,
    purge: (db, mount) => purgeKvMount(db, mount.id),
  },
} satisfies Engine;

// -- for other engines: reading secrets and following their changes ----------------------------

export { addKvWriteCompanion, onKvChange, type KvChangeEvent, type KvChangeKind, type KvEventContext, type KvWriteCompanion } from "./events";
export { isLive, type JsonObject, type KeyMetadata, type VersionInfo } from "./service";
export { currentVersionOf, currentVersionStatement, getMetadata, getVersion, openVersionData, type StoredVersion } from "./store";
