/**
 * `<mount>/config/notifications` (docs/pki-notifications.md): read (headers masked), write
 * (checked, headers sealed), delete. Logic in ../notify/config.ts.
 */
import { notFound } from "../../../core/errors";
import { route } from "../../../core/route";
import { deleteNotifyConfig, getNotifyConfig, putNotifyConfig } from "../storage/notify-store";
import { readableNotifyConfig, sealNotifyConfig } from "../notify/config";
import { mountOf } from "./common";

export const notificationRoutes = [
  route({
    pattern: "config/notifications",
    handlers: {
      async read(req) {
        const mount = mountOf(req);
        const cfg = await getNotifyConfig(req.db, mount.id);
        if (!cfg) throw notFound();
        return { data: await readableNotifyConfig(req.env, mount.id, cfg) };
      },
      async update(req) {
        const mount = mountOf(req);
        const cfg = await sealNotifyConfig(req.env, mount.id, req.body, await getNotifyConfig(req.db, mount.id));
        await putNotifyConfig(req.db, mount.id, cfg);
        return { data: await readableNotifyConfig(req.env, mount.id, cfg) };
      },
      async delete(req) {
        await deleteNotifyConfig(req.db, mountOf(req).id);
        return null;
      },
    },
  }),
];
