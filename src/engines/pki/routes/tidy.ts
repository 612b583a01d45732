/**
 * tidy, tidy-status, tidy-cancel, config/auto-tidy (Vault API /pki/tidy; docs/pki-tidy.md). The job itself runs in
 * the mount's Authority Durable Object (src/engines/pki/authority/tidy-runner.ts); these handlers validate,
 * hand over and shape the answers.
 */
import { route } from "../../../core/route";
import { authorityOf } from "../issuance/serials";
import { getConfig, putConfigStmt, runBatch } from "../storage/store";
import {
  TIDY_CANCEL_NONE_WARNING,
  TIDY_NOTHING_WARNING,
  TIDY_RUNNING_WARNING,
  TIDY_STARTED_WARNING,
  anyTidyEnabled,
  applyAutoTidyUpdate,
  autoTidyFields,
  autoTidyView,
  statusView,
  tidyFields,
  tidyParamsFromFields,
} from "../tidy/tidy";
import { countStored } from "../storage/tidy-store";
import type { TidySnapshot } from "../authority/tidy-runner";
import type { Db } from "../../../core/db/client";
import type { MountRow } from "../../../core/mount-store";
import { mountOf } from "./common";

/** The tidy-status data; counts only when auto-tidy maintains them (upstream certCountEnabled). */
async function statusData(db: Db, mount: MountRow, snap: TidySnapshot): Promise<Record<string, unknown>> {
  const cfg = await getConfig(db, mount.id, "auto_tidy");
  const counts = cfg.maintain_stored_certificate_counts ? await countStored(db, mount.id) : null;
  return statusView(snap.job, snap.cancelling, snap.lastTidy, mount.id, counts);
}

export const tidyRoutes = [
  route({
    pattern: "tidy",
    fields: tidyFields,
    handlers: {
      async update(req) {
        const mount = mountOf(req);
        const params = tidyParamsFromFields(req.fields, req.has);
        const started = await authorityOf(req.env, mount).tidyStart(mount, params);
        if (!started) return { data: null, warnings: [TIDY_RUNNING_WARNING] };
        return { status: 202, data: null, warnings: [anyTidyEnabled(params) ? TIDY_STARTED_WARNING : TIDY_NOTHING_WARNING] };
      },
    },
  }),
  route({
    pattern: "tidy-status",
    handlers: {
      async read(req) {
        const mount = mountOf(req);
        const snap = await authorityOf(req.env, mount).tidyStatus();
        return { data: await statusData(req.db, mount, snap) };
      },
    },
  }),
  route({
    pattern: "tidy-cancel",
    handlers: {
      async update(req) {
        const mount = mountOf(req);
        const r = await authorityOf(req.env, mount).tidyCancel();
        if (!r.running) return { data: null, warnings: [TIDY_CANCEL_NONE_WARNING] };
        return { data: await statusData(req.db, mount, r.snapshot) };
      },
    },
  }),
  route({
    pattern: "config/auto-tidy",
    fields: autoTidyFields,
    handlers: {
      async read(req) {
        return { data: autoTidyView(await getConfig(req.db, mountOf(req).id, "auto_tidy")) };
      },
      async update(req) {
        const mount = mountOf(req);
        const next = applyAutoTidyUpdate(await getConfig(req.db, mount.id, "auto_tidy"), req.fields, req.has);
        await runBatch(req.db, [putConfigStmt(req.db, mount.id, "auto_tidy", next)]);
        return { data: autoTidyView(next) };
      },
    },
  }),
];
