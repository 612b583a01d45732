// @peculiar/x509 needs the reflect polyfill before it is evaluated (workers-stack.md pitfall 3).
import "reflect-metadata";
import { app } from "./app";
import { runScheduled } from "./cron";
import { handleSyncBatch } from "../engines/sync/consumer";

export { Authority } from "../engines/pki/authority/authority";

export default {
  fetch: app.fetch,
  queue: (batch, env) => handleSyncBatch(batch, env),
  scheduled: (controller, env, ctx) => {
    ctx.waitUntil(runScheduled(controller, env));
  },
} satisfies ExportedHandler<Env>;
