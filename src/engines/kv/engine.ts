/**
 * The KV-v2 operations: each one combines the domain rules (service.ts), storage (store.ts) and
 * change events (events.ts). Route handlers (routes.ts) only coerce input and call these.
 */
import { loadConfig } from "../../core/config";
import type { Db } from "../../core/db/client";
import type { SealKeys } from "../../core/db/seal";
import { ApiError, badRequest, notFound } from "../../core/errors";
import type { JsonReply, Req } from "../../core/route";
import { companionStatements, emitKvChange, type KvChangeEvent, type KvEventContext } from "./events";
import {
  CAS_MISMATCH,
  checkCas,
  configView,
  deletionTimeFor,
  effectiveMaxVersions,
  isLive,
  listChildren,
  metadataView,
  oldestAfterWrite,
  patchCustomMetadata,
  subkeys,
  versionView,
  type JsonObject,
  type KeyMetadata,
  type KvSettings,
} from "./service";
import * as store from "./store";
import { MAX_JSON_DEPTH, valueDepthExceeds } from "../../core/json";

/** Everything an operation needs about the request, resolved once. */
export interface KvCtx {
  db: Db;
  keys: SealKeys;
  mountId: string;
  mountPath: string;
  namespaceId: string;
  events: KvEventContext;
  /** What the request's existence check read (keyExists): a write's first attempt starts from it. */
  checked?: CheckedKey;
}

/** A key's settings and metadata as the existence check of this request read them. */
interface CheckedKey {
  path: string;
  config: KvSettings;
  meta: KeyMetadata | null;
}

// Per request (the Req object): a write reads the key once for the create-vs-update check and
// its first attempt, not twice. A later attempt, after a lost race, reads again.
const checkedKeys = new WeakMap<Req, CheckedKey>();

export function kvCtx(req: Req): KvCtx {
  // The dispatcher only routes here through a kv mount; a missing mount is a wiring bug.
  if (!req.mount) throw new Error("kv route reached without a mount");
  return {
    db: req.db,
    keys: loadConfig(req.env).seal,
    mountId: req.mount.id,
    mountPath: req.mount.path,
    namespaceId: req.ns.id,
    events: { env: req.env, db: req.db, waitUntil: (p) => req.waitUntil(p) },
    checked: checkedKeys.get(req),
  };
}

function changeEvent(ctx: KvCtx, kind: KvChangeEvent["kind"], path: string, extra: Pick<KvChangeEvent, "version" | "versions"> = {}): KvChangeEvent {
  return { kind, namespaceId: ctx.namespaceId, mountId: ctx.mountId, mountPath: ctx.mountPath, path, ...extra };
}

function emit(ctx: KvCtx, kind: KvChangeEvent["kind"], path: string, extra: Pick<KvChangeEvent, "version" | "versions"> = {}): void {
  emitKvChange(ctx.events, changeEvent(ctx, kind, path, extra));
}

/**
 * How often a write without cas re-reads and retries after losing a race. Each round at least
 * one of the contending writers wins, so this bounds the number of writers that can pile up on
 * one key at the same moment before someone gets an error.
 */
const MAX_WRITE_ATTEMPTS = 80;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Writes a new version. `produce` computes the data from the state read in this attempt (a
 * patch merges onto the current version), so a retry after a lost race starts from fresh state.
 */
async function writeLoop(
  ctx: KvCtx,
  path: string,
  cas: number | undefined,
  produce: (meta: KeyMetadata | null) => Promise<JsonObject>,
): Promise<JsonReply> {
  for (let attempt = 0; attempt < MAX_WRITE_ATTEMPTS; attempt++) {
    const checked = attempt === 0 && ctx.checked?.path === path ? ctx.checked : undefined;
    const { config, meta } = checked ?? (await store.getConfigAndMetadata(ctx.db, ctx.mountId, path));
    const current = meta?.currentVersion ?? 0;
    checkCas(cas, current, config.casRequired || (meta?.casRequired ?? false));
    const data = await produce(meta);
    const now = Date.now();
    const version = current + 1;
    const oldest = oldestAfterWrite(version, meta?.oldestVersion ?? 0, effectiveMaxVersions(config, meta));
    const deletionTime = deletionTimeFor(now, config, meta);
    const companions = companionStatements(ctx.db, { mountId: ctx.mountId, path }, now);
    const input = { mountId: ctx.mountId, path, expectedCurrent: current, data, createdTime: now, deletionTime, oldestVersion: oldest };
    const res = await store.writeVersion(ctx.db, ctx.keys, input, companions.statements);
    const event = changeEvent(ctx, "written", path, { version });
    if (res.extra.length > 0) companions.ran(ctx.events, event, res.extra, res.ok);
    if (res.ok) {
      emitKvChange(ctx.events, event);
      return { data: versionView({ version, createdTime: now, deletionTime, destroyed: false }, meta?.customMetadata ?? {}) };
    }
    // Someone else wrote this version first: a cas write was conditional on exactly that state.
    if (cas !== undefined) throw badRequest(CAS_MISMATCH);
    // Jittered backoff spreads the contenders out so the next round has fewer collisions.
    await sleep(Math.random() * Math.min(2 ** attempt, 25));
  }
  throw new ApiError(429, "too many concurrent writes to this secret; retry the request");
}

export function writeSecret(ctx: KvCtx, path: string, data: JsonObject, cas: number | undefined): Promise<JsonReply> {
  return writeLoop(ctx, path, cas, async () => data);
}

/** Merge-patches the current version into a new one; 404 when there is no live current version. */
export function patchSecret(
  ctx: KvCtx,
  path: string,
  patch: (current: JsonObject) => JsonObject,
  cas: number | undefined,
): Promise<JsonReply> {
  return writeLoop(ctx, path, cas, async (meta) => {
    if (!meta || meta.currentVersion === 0) throw notFound();
    const v = await store.getVersion(ctx.db, ctx.mountId, path, meta.currentVersion);
    if (!v || !isLive(v, Date.now())) throw notFound();
    const current = await store.openVersionData(ctx.keys, ctx.mountId, path, v);
    if (!current) throw notFound();
    return patch(requireWalkable(current));
  });
}

/**
 * Subkeys and merge patches walk the data recursively. Bodies nest at most MAX_JSON_DEPTH
 * levels (src/core/request.ts), but a version written before that limit existed may nest
 * deeper and would overflow the stack (a 500); it is refused instead.
 */
function requireWalkable(data: JsonObject): JsonObject {
  if (valueDepthExceeds(data, MAX_JSON_DEPTH)) {
    throw badRequest(`the stored secret nests deeper than ${MAX_JSON_DEPTH} levels; write a new version of it`);
  }
  return data;
}

interface ResolvedVersion {
  meta: KeyMetadata;
  version: store.StoredVersion;
  live: boolean;
}

/** The requested version (0 = current) of a key, or 404 when the key or version does not exist. */
async function resolveVersion(ctx: KvCtx, path: string, requested: number): Promise<ResolvedVersion> {
  if (requested < 0) throw badRequest("version: must not be negative");
  const found = await store.getMetadataAndVersion(ctx.db, ctx.mountId, path, requested);
  if (!found || found.meta.currentVersion === 0 || !found.version) throw notFound();
  return { meta: found.meta, version: found.version, live: isLive(found.version, Date.now()) };
}

export async function readSecret(ctx: KvCtx, path: string, requested: number): Promise<JsonReply> {
  const { meta, version, live } = await resolveVersion(ctx, path, requested);
  const metadata = versionView(version, meta.customMetadata);
  // A deleted or destroyed version answers 404 with its metadata, as upstream does.
  if (!live) return { data: { data: null, metadata }, status: 404 };
  const data = await store.openVersionData(ctx.keys, ctx.mountId, path, version);
  return { data: { data, metadata } };
}

export async function readSubkeys(ctx: KvCtx, path: string, requested: number, depth: number): Promise<JsonReply> {
  if (depth < 0) throw badRequest("depth: must not be negative");
  const { meta, version, live } = await resolveVersion(ctx, path, requested);
  const metadata = versionView(version, meta.customMetadata);
  if (!live) return { data: { subkeys: null, metadata }, status: 404 };
  const data = (await store.openVersionData(ctx.keys, ctx.mountId, path, version)) ?? {};
  return { data: { subkeys: subkeys(requireWalkable(data), depth), metadata } };
}

/** DELETE data/<path>: soft-deletes the current version. */
export async function deleteLatest(ctx: KvCtx, path: string): Promise<null> {
  const meta = await store.getMetadata(ctx.db, ctx.mountId, path);
  if (!meta || meta.currentVersion === 0) return null;
  const changed = await store.softDeleteVersions(ctx.db, ctx.mountId, path, [meta.currentVersion], Date.now());
  if (changed.length > 0) emit(ctx, "deleted", path, { version: meta.currentVersion, versions: changed });
  return null;
}

type VersionOp = "deleted" | "undeleted" | "destroyed";

/** delete/, undelete/ and destroy/: one event listing the versions that actually changed. */
export async function changeVersions(ctx: KvCtx, path: string, versions: number[], kind: VersionOp): Promise<null> {
  const meta = await store.getMetadata(ctx.db, ctx.mountId, path);
  if (!meta) return null;
  let changed: number[];
  if (kind === "deleted") changed = await store.softDeleteVersions(ctx.db, ctx.mountId, path, versions, Date.now());
  else if (kind === "undeleted") changed = await store.undeleteVersions(ctx.db, ctx.mountId, path, versions);
  else changed = await store.destroyVersions(ctx.db, ctx.mountId, path, versions);
  if (changed.length > 0) emit(ctx, kind, path, { versions: changed });
  return null;
}

export async function readMetadata(ctx: KvCtx, path: string): Promise<JsonReply> {
  const found = await store.getMetadataAndVersions(ctx.db, ctx.mountId, path);
  if (!found) throw notFound();
  return { data: metadataView(found.meta, found.versions) };
}

export interface MetadataInput {
  maxVersions?: number;
  casRequired?: boolean;
  deleteVersionAfter?: number;
  /** For a write the new map; for a patch null values remove keys. */
  customMetadata?: Record<string, string | null>;
  /** A patch that set custom_metadata to null: remove every key. */
  clearCustomMetadata?: boolean;
}

/** POST metadata/<path> (creates it when missing) and PATCH (404 when missing). */
export async function writeMetadata(ctx: KvCtx, path: string, input: MetadataInput, mode: "write" | "patch"): Promise<null> {
  const meta = await store.getMetadata(ctx.db, ctx.mountId, path);
  if (!meta && mode === "patch") throw notFound();
  const base = meta ?? { maxVersions: 0, casRequired: false, deleteVersionAfter: 0, customMetadata: {} };
  let custom = base.customMetadata;
  if (input.clearCustomMetadata) {
    custom = {};
  } else if (input.customMetadata !== undefined) {
    custom = mode === "patch" ? patchCustomMetadata(base.customMetadata, input.customMetadata) : patchCustomMetadata({}, input.customMetadata);
  }
  await store.upsertMetadataSettings(
    ctx.db,
    ctx.mountId,
    path,
    {
      maxVersions: input.maxVersions ?? base.maxVersions,
      casRequired: input.casRequired ?? base.casRequired,
      deleteVersionAfter: input.deleteVersionAfter ?? base.deleteVersionAfter,
      customMetadata: custom,
    },
    Date.now(),
  );
  return null;
}

export async function deleteMetadata(ctx: KvCtx, path: string): Promise<null> {
  if (await store.deleteKey(ctx.db, ctx.mountId, path)) emit(ctx, "metadata-deleted", path);
  return null;
}

/** LIST metadata/<folder>: direct children, folders as "name/"; 404 with no errors when empty. */
export async function listKeys(ctx: KvCtx, folder: string): Promise<JsonReply> {
  const keys = listChildren(await store.keysUnder(ctx.db, ctx.mountId, folder), folder);
  if (keys.length === 0) throw notFound();
  return { data: { keys } };
}

export async function readConfig(ctx: KvCtx): Promise<JsonReply> {
  return { data: configView(await store.getConfig(ctx.db, ctx.mountId)) };
}

export async function writeConfig(ctx: KvCtx, input: Partial<KvSettings>): Promise<null> {
  const current = await store.getConfig(ctx.db, ctx.mountId);
  await store.putConfig(ctx.db, ctx.mountId, {
    maxVersions: input.maxVersions ?? current.maxVersions,
    casRequired: input.casRequired ?? current.casRequired,
    deleteVersionAfter: input.deleteVersionAfter ?? current.deleteVersionAfter,
  });
  return null;
}

/** Existence check for create-vs-update ACL decisions: a key exists once it has metadata. */
export async function keyExists(req: Req, path: string): Promise<boolean> {
  if (!req.mount) return false;
  const { config, meta } = await store.getConfigAndMetadata(req.db, req.mount.id, path);
  checkedKeys.set(req, { path, config, meta });
  return meta !== null;
}
