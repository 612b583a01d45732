/**
 * Restores a storage snapshot (format: ./snapshot-format.ts) into this database.
 *
 * Invariant: a refused restore changes nothing. The upload is read a line at a time into staging
 * tables (`lanyard_restore_<tag>_<table>`, no constraints, never read by the service) while its
 * MAC chain is computed; only when the trailer verifies, every table is present with this
 * schema's columns and every sealed value names a configured key are the live tables' contents
 * replaced from staging, in ONE D1 batch (a batch is a transaction: it applies whole or not at
 * all, https://developers.cloudflare.com/d1/worker-api/d1-database/#batch). Other requests see
 * the database before or after the batch, never in between. Staging tables are dropped in that
 * batch, or when the restore is refused; those of a restore whose Worker died mid-way are dropped
 * by the next restore after an hour.
 *
 * Object sections (version 2: the certificate bodies of the CERTS bucket) are staged in D1 the
 * same way and put into their buckets once everything verified, before the swap; a failure there
 * leaves D1 as it was and the bucket with bodies no row reads (./snapshot-objects.ts, invariants).
 * A version-1 snapshot (no object sections) leaves the buckets as they are.
 *
 * Refusals (400, nothing changed), whatever `force` says: not a snapshot; corrupt (the chain does
 * not verify, a line is malformed) or truncated (no trailer); taken with a seal key that is not
 * configured here (SEAL_KEY, SEAL_KEYS_PREVIOUS), or holding values sealed by one (this
 * deployment would be sealed after it); another schema version. `force` (Vault's snapshot-force)
 * bypasses one check only: that the snapshot was taken from this deployment. A version-2
 * snapshot must hold every section this deployment passes, and no other.
 */
import { ApiError } from "../errors";
import { randomHex } from "../encoding";
import { invalidateAll } from "../read-cache";
import { forgetSealVerdict, sealedColumns } from "./seal-canary";
import { currentKeyId, type SealKeys } from "./seal";
import { configuredKeyTexts, decodeValue, keyForHeader, MacChain, parseHeader, refused, type SnapshotHeader, type SnapshotTrailer } from "./snapshot-format";
import { snapshotLines } from "./snapshot-lines";
import { type ObjectSection, putStaged, stageObjects, type StagedObjects, startObjects } from "./snapshot-objects";
import { swapFromStaging } from "./snapshot-swap";
import { deploymentId, leftoverStaging, quoteIdent, snapshotTables, STAGING_PREFIX, type TableInfo } from "./snapshot-tables";

/** D1 binds at most 100 parameters per statement (https://developers.cloudflare.com/d1/platform/limits/). */
const MAX_PARAMS = 100;
/** A staging table older than this belongs to a restore that died. */
const STALE_STAGING_MS = 60 * 60 * 1000;

export interface RestoreOptions {
  force: boolean;
  /** MAX_SNAPSHOT_BYTES: the upload as sent. */
  maxBytes: number;
  /** The buckets restored from the snapshot's object sections, by section name. */
  sections?: readonly ObjectSection[];
}

export interface RestoreResult {
  tables: number;
  rows: number;
  objects: number;
}

/** What the reading of the upload has reached. */
interface Progress {
  header: SnapshotHeader | null;
  chain: MacChain | null;
  live: Map<string, TableInfo>;
  /** Snapshot table name → its staging table and the column order of its rows. */
  staged: Map<string, { staging: string; columns: string[]; sealedAt: number[] }>;
  current: string | null;
  rows: number;
  /** The buckets configured here; the sections read so far; the one whose items come now. */
  sections: Map<string, ObjectSection>;
  objectStaged: Map<string, StagedObjects>;
  currentObjects: StagedObjects | null;
  objects: number;
  trailer: SnapshotTrailer | null;
  /** Key ids configured here; key ids of sealed values found that are not. */
  keyIds: Set<string>;
  foreignKeyIds: Set<string>;
}

export async function restoreSnapshot(d1: D1Database, keys: SealKeys, body: ReadableStream<Uint8Array>, opts: RestoreOptions): Promise<RestoreResult> {
  const now = Date.now();
  const [{ schema, tables }, deployment, stale] = await Promise.all([snapshotTables(d1), deploymentId(d1), leftoverStaging(d1, now, STALE_STAGING_MS)]);
  if (stale.length > 0) await dropTables(d1, stale);
  const tag = `${STAGING_PREFIX}${now.toString(36)}_${randomHex(3)}_`;
  const keyIds = new Set(await Promise.all(configuredKeyTexts(keys).map((k) => currentKeyId({ current: k }))));
  const p: Progress = {
    header: null, chain: null, live: new Map(tables.map((t) => [t.name, t])), staged: new Map(), current: null, rows: 0,
    sections: new Map((opts.sections ?? []).map((s) => [s.name, s])), objectStaged: new Map(), currentObjects: null, objects: 0,
    trailer: null, keyIds, foreignKeyIds: new Set(),
  };
  const objectStaging = () => [...p.objectStaged.values()].map((s) => s.staging);
  try {
    for await (const line of snapshotLines(body, opts.maxBytes)) {
      if (p.trailer) throw refused("the snapshot is corrupt (data after its trailer)");
      await readLine(d1, keys, p, line, { schema, deployment, force: opts.force, tag });
    }
    await checkComplete(p);
    // Bodies first, rows second: a failure here leaves D1 as it was (./snapshot-objects.ts).
    for (const s of p.objectStaged.values()) await putStaged(d1, s);
    await swapFromStaging(d1, [...p.staged.entries()].map(([name, s]) => ({ name, staging: s.staging, columns: s.columns })));
    // This isolate's caches and seal verdict describe the data before: forget them (other isolates
    // follow within CACHE_TTL_MS, docs/operations.md "Snapshots").
    invalidateAll();
    forgetSealVerdict();
  } catch (e) {
    await dropQuietly(d1, [...[...p.staged.values()].map((s) => s.staging), ...objectStaging()]);
    throw e instanceof ApiError ? e : refusedByD1(e);
  }
  // The bodies' staging tables outlive the swap's batch; one left by a failure here goes with the next restore.
  await dropQuietly(d1, objectStaging());
  return { tables: p.staged.size, rows: p.rows, objects: p.objects };
}

/** A D1 error while staging or swapping: the batch rolled back; say why without a 500. */
function refusedByD1(e: unknown): unknown {
  if (!(e instanceof Error) || !/D1_|SQLITE|constraint/i.test(e.message)) return e;
  return refused(`its rows do not fit this database (${e.message.slice(0, 300)})`);
}

interface Target {
  schema: string;
  deployment: string;
  force: boolean;
  tag: string;
}

async function readLine(d1: D1Database, keys: SealKeys, p: Progress, line: Uint8Array<ArrayBuffer>, target: Target): Promise<void> {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(line));
  } catch {
    throw refused(p.header ? "the snapshot is corrupt (a line is not JSON)" : "the body is not a Lanyard storage snapshot (no snapshot header)");
  }
  if (!p.header || !p.chain) {
    p.header = parseHeader(value);
    p.chain = new MacChain(await keyForHeader(keys, p.header));
    checkHeader(p.header, target);
    await p.chain.add(line);
    return;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw refused("the snapshot is corrupt (a line is not an object)");
  const v = value as Record<string, unknown>;
  if (v.end === true) {
    p.trailer = v as unknown as SnapshotTrailer;
    return;
  }
  await p.chain.add(line);
  const sections = p.header.version >= 2;
  if (typeof v.table === "string") {
    p.currentObjects = null;
    await startTable(d1, p, v.table, v.columns, target.tag);
  } else if (Array.isArray(v.rows)) await stageRows(d1, p, v.rows);
  else if (sections && v.objects !== undefined) {
    p.current = null;
    p.currentObjects = await startObjects(d1, p.sections, p.objectStaged, v.objects, target.tag);
    p.objectStaged.set(p.currentObjects.section.name, p.currentObjects);
  } else if (sections && Array.isArray(v.items)) {
    if (!p.currentObjects) throw refused("the snapshot is corrupt (objects before any object section)");
    p.objects += await stageObjects(d1, p.currentObjects, v.items);
  } else throw refused("the snapshot is corrupt (a line of an unknown kind)");
}

/** The header's promises about where the snapshot came from, against this deployment. */
function checkHeader(h: SnapshotHeader, target: Target): void {
  if (h.schema !== target.schema) {
    throw refused(`the snapshot's schema version is ${h.schema.slice(0, 80)} and this deployment's is ${target.schema}; apply the same migrations on both sides first (wrangler d1 migrations apply)`);
  }
  if (!target.force && h.deployment !== target.deployment) {
    throw refused("the snapshot was taken from another deployment; to install it here anyway use sys/storage/raft/snapshot-force (vault operator raft snapshot restore -force)");
  }
}

async function startTable(d1: D1Database, p: Progress, name: string, columns: unknown, tag: string): Promise<void> {
  const live = p.live.get(name);
  if (!live) throw refused(`the snapshot has a table this deployment's schema does not (${name.slice(0, 64)})`);
  if (p.staged.has(name)) throw refused(`the snapshot is corrupt (table ${name} twice)`);
  const cols = Array.isArray(columns) ? columns.filter((c): c is string => typeof c === "string") : [];
  const same = Array.isArray(columns) && cols.length === columns.length && cols.length === live.columns.length && cols.every((c) => live.columns.includes(c)) && new Set(cols).size === cols.length;
  if (!same) throw refused(`the columns of table ${name} in the snapshot differ from this deployment's schema`);
  const staging = `${tag}${name}`;
  const list = cols.map(quoteIdent).join(", ");
  await d1.prepare(`CREATE TABLE ${quoteIdent(staging)} AS SELECT ${list} FROM ${quoteIdent(name)} WHERE 0`).run();
  const sealed = new Set(sealedColumns().filter((s) => s.table === name).map((s) => s.column));
  p.staged.set(name, { staging, columns: cols, sealedAt: cols.flatMap((c, i) => (sealed.has(c) ? [i] : [])) });
  p.current = name;
}

/** One page into the current table's staging table (one D1 batch of multi-row inserts). */
async function stageRows(d1: D1Database, p: Progress, rows: unknown[]): Promise<void> {
  const table = p.current === null ? undefined : p.staged.get(p.current);
  if (!table) throw refused("the snapshot is corrupt (rows before any table)");
  const width = table.columns.length;
  const values = rows.map((r) => {
    if (!Array.isArray(r) || r.length !== width) throw refused(`the snapshot is corrupt (a row of ${p.current} has the wrong number of values)`);
    for (const i of table.sealedAt) noteSealedKey(p, r[i]);
    return r.map(decodeValue);
  });
  const perStatement = Math.max(1, Math.floor(MAX_PARAMS / width));
  const tuple = `(${table.columns.map(() => "?").join(", ")})`;
  const head = `INSERT INTO ${quoteIdent(table.staging)} (${table.columns.map(quoteIdent).join(", ")}) VALUES `;
  const stmts: D1PreparedStatement[] = [];
  for (let i = 0; i < values.length; i += perStatement) {
    const slice = values.slice(i, i + perStatement);
    stmts.push(d1.prepare(head + slice.map(() => tuple).join(", ")).bind(...slice.flat()));
  }
  if (stmts.length > 0) await d1.batch(stmts);
  p.rows += values.length;
}

/** A sealed value names the key that sealed it (`v1:<key id>:…`, ./seal.ts). */
function noteSealedKey(p: Progress, v: unknown): void {
  if (typeof v !== "string") return;
  const kid = v.split(":", 2)[1];
  if (kid !== undefined && !p.keyIds.has(kid)) p.foreignKeyIds.add(kid);
}

/** Everything that must hold before the swap: a verified trailer, every table, every key. */
async function checkComplete(p: Progress): Promise<void> {
  if (!p.header || !p.chain) throw refused("the body is empty (no snapshot header)");
  if (!p.trailer) throw refused("the snapshot is truncated (no trailer)");
  const t = p.trailer;
  if (typeof t.mac !== "string" || !(await p.chain.matches(t.mac))) throw refused("the snapshot is corrupt (its digest does not match its contents)");
  const objects = p.header.version >= 2 ? t.objects : (t.objects ?? 0);
  if (t.tables !== p.staged.size || t.rows !== p.rows || objects !== p.objects) throw refused("the snapshot is corrupt (its trailer's counts do not match its contents)");
  const missing = [...p.live.keys()].filter((n) => !p.staged.has(n));
  if (missing.length > 0) throw refused(`the snapshot lacks tables of this deployment's schema (${missing.slice(0, 5).join(", ")})`);
  const lacking = [...p.sections.keys()].filter((n) => !p.objectStaged.has(n));
  if (p.header.version >= 2 && lacking.length > 0) throw refused(`the snapshot lacks object sections of this deployment (${lacking.join(", ")})`);
  if (p.foreignKeyIds.size > 0) {
    throw refused(`the snapshot holds values sealed with key id(s) ${[...p.foreignKeyIds].slice(0, 5).join(", ")}, which neither SEAL_KEY nor SEAL_KEYS_PREVIOUS provides; this deployment would be sealed after the restore`);
  }
}

async function dropTables(d1: D1Database, names: string[]): Promise<void> {
  if (names.length === 0) return;
  await d1.batch(names.map((n) => d1.prepare(`DROP TABLE IF EXISTS ${quoteIdent(n)}`)));
}

/** Staging tables dropped on the way out; a failure is logged (the next restore drops them after an hour). */
async function dropQuietly(d1: D1Database, names: string[]): Promise<void> {
  await dropTables(d1, names).catch((drop: unknown) => console.error("snapshot restore: staging tables not dropped:", drop instanceof Error ? drop.message : String(drop)));
}
