/**
 * POST sys/sync/destinations/:type/:name/reconcile (docs/secrets-sync.md "3. Drift is detected and repaired"): queues a drift check of
 * every settled association of the destination (../reconcile.ts) and answers 202 with
 * `data.queued`, how many. Lanyard's addition; Vault has no drift detection (hashicorp/vault#25576).
 * Policy: `update` on the path, like associations/set.
 */
import { badRequest, notFound } from "../../../core/errors";
import { route, type Req } from "../../../core/route";
import { DESTINATION_TYPES, findProvider } from "../providers/registry";
import { queueDestinationReconcile } from "../reconcile";
import { destinationExists, getSyncConfig, listPurging } from "../store";
import { engineDeps } from "./deps";

async function reconcileDestination(req: Req) {
  const raw = req.params.type ?? "";
  const type = findProvider(raw)?.type;
  if (!type) throw badRequest(`type: unknown destination type "${raw}"; known types: ${DESTINATION_TYPES.join(", ")}`);
  const key = { namespaceId: req.ns.id, type, name: req.params.name ?? "" };
  if (!(await destinationExists(req.db, key))) throw notFound();
  if ((await listPurging(req.db)).some((k) => k.namespaceId === key.namespaceId && k.type === key.type && k.name === key.name)) {
    throw badRequest(`destination ${type}/${key.name} is being purged; nothing to reconcile`);
  }
  if ((await getSyncConfig(req.db)).disabled) throw badRequest("secrets sync is disabled (sys/sync/config); re-enable it to reconcile");
  return { status: 202, data: { queued: await queueDestinationReconcile(engineDeps(req), key) } };
}

export const reconcileRoutes = [
  route({
    pattern: "sync/destinations/:type/:name/reconcile",
    handlers: { update: reconcileDestination },
  }),
];
