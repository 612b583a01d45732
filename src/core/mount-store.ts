/**
 * Storage of mounts (secrets engines): the only module that touches the `mounts` table. Creation
 * and the start of a disable are single atomic statements (the invariants are in ./lifecycle.ts).
 */
import { and, eq, inArray } from "drizzle-orm";
import type { Db } from "./db/client";
import { mounts } from "./db/schema";
import { MAX_MOUNT_PATH_SEGMENTS, SYSTEM_MAX_TTL } from "./limits";
import { generationOf, invalidate, ReadCache } from "./read-cache";

export interface NamespaceRef {
  id: string;
  /** "" for the root namespace, else "a/b/" with a trailing slash. */
  path: string;
}

export const ROOT_NAMESPACE: NamespaceRef = { id: "root", path: "" };

export type MountRow = typeof mounts.$inferSelect;

/**
 * Every mount of a namespace, per isolate, for the request pipeline (src/app/resolve.ts). Bounded
 * by CACHE_TTL_MS (src/core/read-cache.ts); every write below invalidates "mounts" in this isolate.
 * A mount being disabled stays routable until its row is gone, as without the cache: the
 * lifecycle triggers refuse its writes (src/core/lifecycle.ts).
 */
const mountLists = new ReadCache<MountRow[]>("mounts.lists", "mounts", 1024, {
  // Early re-reads in the background (./read-cache.ts).
  reload: async (db, nsId) => namespaceMountsQuery(db, nsId),
});

/** The unexecuted read of a namespace's mounts, for a batch of the pipeline's cache misses. */
export const namespaceMountsQuery = (db: Db, nsId: string) => db.select().from(mounts).where(eq(mounts.namespaceId, nsId));

export function cachedMounts(nsId: string): MountRow[] | undefined {
  return mountLists.get(nsId);
}

export function rememberMounts(nsId: string, rows: MountRow[], readAt: number, generation: number): void {
  mountLists.set(nsId, rows, readAt, generation);
}

/** A namespace's mounts, from this isolate's cache when fresh. */
export async function mountsOf(db: Db, nsId: string): Promise<MountRow[]> {
  const hit = cachedMounts(nsId);
  if (hit) return hit;
  const readAt = Date.now();
  const gen = generationOf("mounts");
  const rows = await namespaceMountsQuery(db, nsId);
  rememberMounts(nsId, rows, readAt, gen);
  return rows;
}

/** The mount of `rows` whose path is the longest whole-segment prefix of `path`. */
export function mountForPathIn(rows: readonly MountRow[], path: string): MountRow | null {
  const full = path.endsWith("/") ? path : `${path}/`;
  let best: MountRow | null = null;
  for (const r of rows) if (full.startsWith(r.path) && (!best || r.path.length > best.path.length)) best = r;
  return best;
}

/** The mount whose path is the longest prefix of `path` (segment-wise) in a namespace. */
export async function findMountForPath(db: Db, nsId: string, path: string): Promise<MountRow | null> {
  const candidates = mountCandidates(path);
  if (candidates.length === 0) return null;
  return longestMount(await mountsQuery(db, nsId, candidates));
}

/**
 * The mount paths that could hold `path`: each of its prefixes, with a trailing slash. No mount
 * has more than MAX_MOUNT_PATH_SEGMENTS segments, so longer prefixes are not looked up: the
 * lookup binds one parameter per candidate, and D1 allows 100.
 */
export function mountCandidates(path: string): string[] {
  const segs = path.split("/", MAX_MOUNT_PATH_SEGMENTS);
  const candidates: string[] = [];
  for (let i = 1; i <= segs.length; i++) {
    const p = segs.slice(0, i).join("/");
    if (p !== "") candidates.push(`${p}/`);
  }
  return candidates;
}

/** The unexecuted lookup of candidate mounts, for a request's first D1 batch (src/app/dispatch.ts). */
export const mountsQuery = (db: Db, nsId: string, candidates: string[]) =>
  db.select().from(mounts).where(and(eq(mounts.namespaceId, nsId), inArray(mounts.path, candidates)));

/** The longest (most specific) of the candidate mounts found. */
export function longestMount(rows: MountRow[]): MountRow | null {
  let best: MountRow | null = null;
  for (const r of rows) if (!best || r.path.length > best.path.length) best = r;
  return best;
}

export async function listMounts(db: Db, nsId: string): Promise<MountRow[]> {
  return db.select().from(mounts).where(eq(mounts.namespaceId, nsId)).orderBy(mounts.path);
}

export async function getMount(db: Db, nsId: string, path: string): Promise<MountRow | null> {
  const rows = await db
    .select()
    .from(mounts)
    .where(and(eq(mounts.namespaceId, nsId), eq(mounts.path, path)));
  return rows[0] ?? null;
}

export async function countMountsInNamespace(db: Db, nsId: string): Promise<number> {
  const rows = await db.select({ id: mounts.id }).from(mounts).where(eq(mounts.namespaceId, nsId));
  return rows.length;
}

/**
 * Prefix overlap with `path` ("a/b/") in either direction, as SQL over a mounts row: the row's
 * path is a prefix of `path` (or equal), or `path` is a prefix of the row's. Both end in "/",
 * so a prefix is always a run of whole segments ("a/" holds "a/b/", not "ab/"). The
 * statements that embed it bind `path` as ?2.
 */
const OVERLAP = "(substr(?2, 1, length(path)) = path OR substr(path, 1, length(?2)) = ?2)";

/**
 * Inserts the mount unless, at that instant, a mount of its namespace overlaps its path or a
 * child namespace has the name of its first segment (`shadowingNamespace`, a full namespace
 * path). One statement, so of concurrent conflicting enables exactly one succeeds. Returns
 * whether the row was inserted. A namespace being deleted makes the insert abort (lifecycle.ts).
 */
export async function insertMountIfFree(db: Db, row: MountRow, shadowingNamespace: string): Promise<boolean> {
  const res = await db.$client
    .prepare(
      `INSERT INTO mounts (id, namespace_id, path, type, accessor, description, options, default_lease_ttl, max_lease_ttl, created_at, state)
       SELECT ?3, ?1, ?2, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'active'
       WHERE NOT EXISTS (SELECT 1 FROM mounts WHERE namespace_id = ?1 AND ${OVERLAP})
         AND NOT EXISTS (SELECT 1 FROM namespaces WHERE path = ?11)
       RETURNING id`,
    )
    .bind(row.namespaceId, row.path, row.id, row.type, row.accessor, row.description, JSON.stringify(row.options), row.defaultLeaseTtl, row.maxLeaseTtl, row.createdAt, shadowingNamespace)
    .all();
  invalidate("mounts");
  return res.results.length === 1;
}

/** The mount that keeps `path` from being enabled: the longest one above it, else the first below. */
export async function overlappingMount(db: Db, nsId: string, path: string): Promise<{ path: string } | null> {
  const res = await db.$client
    .prepare(`SELECT path FROM mounts WHERE namespace_id = ?1 AND ${OVERLAP} ORDER BY length(path) <= length(?2) DESC, CASE WHEN length(path) <= length(?2) THEN -length(path) ELSE 0 END, path LIMIT 1`)
    .bind(nsId, path)
    .all<{ path: string }>();
  return res.results[0] ?? null;
}

/** The first mount of a namespace whose path starts with `prefix` ("name/"), for namespace creation. */
export async function mountUnder(db: Db, nsId: string, prefix: string): Promise<{ path: string } | null> {
  const res = await db.$client
    .prepare("SELECT path FROM mounts WHERE namespace_id = ?1 AND substr(path, 1, length(?2)) = ?2 ORDER BY path LIMIT 1")
    .bind(nsId, prefix)
    .all<{ path: string }>();
  return res.results[0] ?? null;
}

/**
 * Step (a) of a disable (lifecycle.ts): from this statement on, the triggers refuse every write
 * of the mount's engine rows. Idempotent, so a repeated disable resumes an interrupted one.
 */
export async function markMountDisabling(db: Db, id: string): Promise<void> {
  await db.update(mounts).set({ state: "disabling" }).where(eq(mounts.id, id));
  invalidate("mounts");
}

/**
 * Whether a mount with this accessor exists and is not being disabled. Accessors are never reused
 * by another mount, so a live row means the mount itself is back (a restore of D1 to before its
 * disable: docs/operations.md "Restore").
 */
export async function mountAliveByAccessor(db: Db, accessor: string): Promise<boolean> {
  const rows = await db.select({ id: mounts.id }).from(mounts).where(and(eq(mounts.accessor, accessor), eq(mounts.state, "active"))).limit(1);
  return rows.length > 0;
}

export async function deleteMountRow(db: Db, id: string): Promise<void> {
  await db.delete(mounts).where(eq(mounts.id, id));
  invalidate("mounts");
}

/** Tunes an active mount; false when it is being disabled (or gone), so nothing was changed. */
export async function updateMount(
  db: Db,
  id: string,
  patch: Partial<Pick<MountRow, "description" | "defaultLeaseTtl" | "maxLeaseTtl" | "options">>,
): Promise<boolean> {
  const rows = await db
    .update(mounts)
    .set(patch)
    .where(and(eq(mounts.id, id), eq(mounts.state, "active")))
    .returning({ id: mounts.id });
  invalidate("mounts");
  return rows.length === 1;
}

/**
 * A mount's default and maximum lease TTL: tuned values, else the system's 768h
 * (docs/http-conventions.md "Settled questions").
 */
export function effectiveTtls(m: MountRow): { defaultTtl: number; maxTtl: number } {
  const maxTtl = m.maxLeaseTtl || SYSTEM_MAX_TTL;
  return { defaultTtl: Math.min(m.defaultLeaseTtl || SYSTEM_MAX_TTL, maxTtl), maxTtl };
}

/** Mounts by id, in any namespace and state (the lease expiry job resolves each lease's mount). */
export async function getMountsByIds(db: Db, ids: string[]): Promise<MountRow[]> {
  if (ids.length === 0) return [];
  return db.select().from(mounts).where(inArray(mounts.id, ids));
}

/** sys/metrics: every mount's id, namespace and path (the labels of the gauges that name a mount). */
export async function allMountPlaces(db: Db): Promise<{ id: string; namespaceId: string; path: string }[]> {
  return db.select({ id: mounts.id, namespaceId: mounts.namespaceId, path: mounts.path }).from(mounts);
}
