/**
 * sys/storage/raft/snapshot and sys/storage/raft/snapshot-force (Vault API:
 * https://developer.hashicorp.com/vault/api-docs/system/storage/raft): save a snapshot of the
 * whole D1 database and the certificate bodies of the CERTS bucket (GET) and restore one (POST), so `vault operator raft snapshot save|restore`
 * and hvac's take_raft_snapshot / restore_raft_snapshot / force_restore_raft_snapshot work.
 * Format, integrity and what a restore refuses: src/core/db/snapshot-*.ts; the procedure and its
 * limits: docs/operations.md "Snapshots".
 *
 * Vault marks these paths sudo and serves them in the root namespace only; a token of a child
 * namespace (even with sudo there) gets 404, as for a path its namespace does not have. The
 * bodies are streamed (RouteDef.streamBody): MAX_REQUEST_BYTES does not apply, MAX_SNAPSHOT_BYTES
 * does, and neither body is written to the audit trail.
 *
 * Force: Vault's snapshot-force skips the check that the snapshot's keys match the cluster's.
 * Lanyard's skips the check that the snapshot comes from this deployment (restoring into a new
 * one: disaster recovery, a copy for staging) and nothing else: a snapshot this deployment's
 * seal keys cannot verify and open is refused either way, since installing it would leave the
 * service sealed.
 */
import { loadConfig } from "../../core/config";
import type { ObjectSection } from "../../core/db/snapshot-objects";
import { restoreSnapshot } from "../../core/db/snapshot-restore";
import { snapshotStream } from "../../core/db/snapshot-stream";
import { ApiError, badRequest, notFound } from "../../core/errors";
import { ROOT_NAMESPACE } from "../../core/mount-store";
import { route, type Req } from "../../core/route";

/** MAX_SNAPSHOT_BYTES' default: the smallest request body Cloudflare's plans accept (100 MB, Free and Pro). */
export const DEFAULT_MAX_SNAPSHOT_BYTES = 100 * 1000 * 1000;

/** MAX_SNAPSHOT_BYTES (docs/configuration.md): a positive whole number of bytes. */
export function maxSnapshotBytes(env: Env): number {
  const raw = env.MAX_SNAPSHOT_BYTES?.trim();
  if (raw === undefined || raw === "") return DEFAULT_MAX_SNAPSHOT_BYTES;
  if (!/^\d+$/.test(raw) || Number(raw) <= 0) throw new ApiError(503, "MAX_SNAPSHOT_BYTES: expected a positive whole number of bytes");
  return Number(raw);
}

/**
 * The buckets a snapshot carries beside D1: CERTS, the DER of issued certificates whose pki_certs
 * rows hold none (docs/architecture.md "Certificate bodies"), so that a snapshot is a whole backup
 * of the CA. The section name is the binding's. Their R2 calls go through the SnapshotIo Durable
 * Object (binding SNAPSHOT_IO, src/core/db/snapshot-io.ts) in batches, so the request's
 * subrequests do not grow with the bodies; without that binding they are made here.
 */
export const snapshotSections = (env: Env): ObjectSection[] => [{ name: "CERTS", bucket: env.CERTS, io: (env as Partial<Env>).SNAPSHOT_IO }];

function rootOnly(req: Req): void {
  if (req.ns.id !== ROOT_NAMESPACE.id) throw notFound([`unsupported path: ${req.path} is served in the root namespace only`]);
}

async function save(req: Req): Promise<Response> {
  rootOnly(req);
  const body = await snapshotStream(req.env.DB, loadConfig(req.env).seal, snapshotSections(req.env));
  return new Response(body, {
    status: 200,
    headers: {
      "content-type": "application/octet-stream",
      "content-disposition": 'attachment; filename="lanyard.snap"',
      "x-request-id": req.requestId,
    },
  });
}

async function restore(req: Req, force: boolean): Promise<null> {
  rootOnly(req);
  const maxBytes = maxSnapshotBytes(req.env);
  const declared = Number(req.headers.get("content-length") ?? "0");
  if (declared > maxBytes) throw new ApiError(413, `snapshot refused: larger than MAX_SNAPSHOT_BYTES (${maxBytes} bytes); nothing was changed`);
  if (!req.bodyStream) throw badRequest("snapshot refused: the body is empty (no snapshot header); nothing was changed");
  const result = await restoreSnapshot(req.env.DB, loadConfig(req.env).seal, req.bodyStream, { force, maxBytes, sections: snapshotSections(req.env) });
  console.log(`snapshot restored${force ? " (force)" : ""}: ${result.tables} tables, ${result.rows} rows, ${result.objects} objects (request ${req.requestId})`);
  // Vault answers 204.
  return null;
}

export const snapshotRoutes = [
  route({
    pattern: "storage/raft/snapshot",
    sudo: ["read", "update"],
    streamBody: true,
    handlers: {
      read: save,
      update: (req) => restore(req, false),
    },
  }),
  route({
    pattern: "storage/raft/snapshot-force",
    sudo: ["update"],
    streamBody: true,
    handlers: {
      update: (req) => restore(req, true),
    },
  }),
];
