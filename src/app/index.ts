/**
 * The Worker entry (wrangler.toml `main`): `fetch` is the root app, `scheduled` runs the engines'
 * cron jobs, `queue` hands each batch to the engine that consumes its queue, and every Durable
 * Object class an engine registers is exported here under its wrangler.toml class_name (the
 * runtime finds them by export name; the check below fails type-checking when the exports and
 * the registry differ). All of it derives from the engine registry (./engines.ts).
 */
// @peculiar/x509 needs the reflect polyfill before it is evaluated: its tsyringe dependency
// throws "tsyringe requires a reflect polyfill" at import time otherwise, and ESM evaluates this
// module's imports in order, so it must be the entry's first import.
import "reflect-metadata";
import { AUDIT_DLQ_NAME, auditQueueConsumer } from "../audit/delivery/consumer";
import { AUDIT_QUEUE_NAME } from "../audit/types";
import { Authority } from "../engines/pki";
import { SyncGate } from "../engines/sync";
import { serviceProblem } from "../core/config";
import { SnapshotIo } from "../core/db/snapshot-io";
import { app } from "./app";
import { runScheduled } from "./cron";
import { ENGINES, type RegisteredEngine } from "./engines";

// SnapshotIo is the core's (the storage snapshot's R2 calls in batches, src/core/db/snapshot-io.ts), not an engine's.
export { Authority, SnapshotIo, SyncGate };

/** The Durable Object classes the registry declares, by name, and the ones exported above. */
type DurableObjectsOf<E> = E extends { durableObjects: infer D } ? D : Record<never, never>;
type Intersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void ? I : never;
type RegisteredDurableObjects = Intersection<DurableObjectsOf<RegisteredEngine>>;
const EXPORTED_DURABLE_OBJECTS = { Authority, SyncGate } satisfies { [K in keyof RegisteredDurableObjects]: RegisteredDurableObjects[K] };
void EXPORTED_DURABLE_OBJECTS;

/** Queue name → consumer, from every engine's `queues`, and the audit trail's delivery (its DLQ: replay). */
const CONSUMERS = new Map([
  ...ENGINES.flatMap((e) => Object.entries(e.queues ?? {})),
  [AUDIT_QUEUE_NAME, auditQueueConsumer] as const,
  [AUDIT_DLQ_NAME, auditQueueConsumer] as const,
]);

/** How long a sealed service defers a queue batch; each deferral counts as one of the queue's retries. */
const SEALED_RETRY_SECONDS = 60;

export default {
  fetch: app.fetch,
  queue: async (batch, env) => {
    // Sealed or unconfigured: hand the batch back for later, unconsumed (nothing may be written).
    const problem = await serviceProblem(env);
    if (problem) {
      console.error(`queue ${batch.queue}: batch deferred: ${problem}`);
      batch.retryAll({ delaySeconds: SEALED_RETRY_SECONDS });
      return;
    }
    const consume = CONSUMERS.get(batch.queue);
    if (!consume) throw new Error(`no engine consumes queue "${batch.queue}"`);
    await consume(batch, env);
  },
  scheduled: (controller, env, ctx) => {
    ctx.waitUntil(runScheduled(controller, env));
  },
} satisfies ExportedHandler<Env>;
