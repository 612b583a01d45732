/**
 * sys/sync/config (spec "Sync configuration"; Vault API: /v1/sys/sync, Vault docs: secrets sync policies): the global switch. Only
 * callable from the root namespace or the administrative namespace (ADMIN_NAMESPACE); elsewhere
 * 403, after the ACL check, so the capability rules of Vault docs: secrets sync policies (read, patch, delete) apply too.
 */
import { loadConfig } from "../../../core/config";
import { badRequest, permissionDenied } from "../../../core/errors";
import { formatGoDuration } from "../../../core/duration";
import { defineFields } from "../../../core/fields";
import { route, type Req } from "../../../core/route";
import { resumePending } from "../operations";
import { engineDeps } from "./deps";
import { DEFAULT_SYNC_CONFIG, getSyncConfig, putSyncConfig, resetSyncConfig, type SyncConfig } from "../store";

const fields = defineFields({
  disabled: { type: "bool", description: "When true, nothing is sent to destinations; operations wait as PENDING." },
  queue_capacity: { type: "int", description: `Maximum number of pending operations (default ${DEFAULT_SYNC_CONFIG.queueCapacity}).` },
  reconcile_interval: { type: "duration", description: "How often drift reconciliation runs (default 1h; 0 turns it off)." },
});

function requireAdminNamespace(req: Req): void {
  const admin = loadConfig(req.env).adminNamespace;
  if (req.ns.path !== "" && req.ns.path !== admin) throw permissionDenied();
}

// reconcile_interval reads back as a Go duration string ("1h0m0s", "0s"), as Vault renders durations.
const view = (c: SyncConfig) => ({ disabled: c.disabled, queue_capacity: c.queueCapacity, reconcile_interval: formatGoDuration(c.reconcileInterval) });

export const configRoutes = [
  route({
    pattern: "sync/config",
    fields,
    handlers: {
      async read(req) {
        requireAdminNamespace(req);
        return { data: view(await getSyncConfig(req.db)) };
      },
      async patch(req) {
        requireAdminNamespace(req);
        const current = await getSyncConfig(req.db);
        const next: SyncConfig = { ...current };
        if (req.has("disabled")) next.disabled = req.fields.disabled === true;
        else if (req.body.disabled === null) next.disabled = DEFAULT_SYNC_CONFIG.disabled;
        if (req.has("queue_capacity")) {
          const cap = req.fields.queue_capacity ?? 0;
          // The bound is compared with row counts and stored as an integer: a positive safe
          // integer (1e20 would lose precision and overflow the column).
          if (!Number.isSafeInteger(cap) || cap < 1) throw badRequest(`queue_capacity: must be a positive integer no larger than ${Number.MAX_SAFE_INTEGER}`);
          next.queueCapacity = cap;
        } else if (req.body.queue_capacity === null) {
          next.queueCapacity = DEFAULT_SYNC_CONFIG.queueCapacity;
        }
        if (req.has("reconcile_interval")) {
          const secs = req.fields.reconcile_interval ?? 0;
          if (!Number.isSafeInteger(secs) || secs < 0) throw badRequest("reconcile_interval: must be a duration of 0 or more");
          next.reconcileInterval = secs;
        } else if (req.body.reconcile_interval === null) {
          next.reconcileInterval = DEFAULT_SYNC_CONFIG.reconcileInterval;
        }
        await putSyncConfig(req.db, next);
        // Re-enabled: the parked (PENDING) operations go to the queue now.
        if (current.disabled && !next.disabled) await resumePending(engineDeps(req));
        return { data: view(next) };
      },
      async delete(req) {
        requireAdminNamespace(req);
        const current = await getSyncConfig(req.db);
        await resetSyncConfig(req.db);
        if (current.disabled) await resumePending(engineDeps(req));
        return null;
      },
    },
  }),
];
