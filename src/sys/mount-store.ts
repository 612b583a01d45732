/** Storage of mounts (secrets engines): the only module that touches the `mounts` table. */
import { and, eq, inArray, sql, type SQL } from "drizzle-orm";
import type { Db } from "../db/client";
import { mounts } from "../db/schema";
import { MAX_MOUNT_PATH_SEGMENTS } from "./limits";

export interface NamespaceRef {
  id: string;
  /** "" for the root namespace, else "a/b/" with a trailing slash. */
  path: string;
}

export const ROOT_NAMESPACE: NamespaceRef = { id: "root", path: "" };

export type MountRow = typeof mounts.$inferSelect;

/** The mount whose path is the longest prefix of `path` (segment-wise) in a namespace. */
export async function findMountForPath(db: Db, nsId: string, path: string): Promise<MountRow | null> {
  const candidates = mountCandidates(path);
  if (candidates.length === 0) return null;
  return longestMount(await mountsQuery(db, nsId, candidates));
}

/**
 * The mount paths that could hold `path`: each of its prefixes, with a trailing slash. No mount
 * has more than MAX_MOUNT_PATH_SEGMENTS segments, so longer prefixes are not looked up: the
 * lookup binds one parameter per candidate, and D1 allows 100 (issue 18 #6).
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

/** The unexecuted lookup of candidate mounts, for a request's first D1 batch (src/http/dispatch.ts). */
export const mountsQuery = (db: Db, nsId: string, candidates: string[]) =>
  db.select().from(mounts).where(and(eq(mounts.namespaceId, nsId), inArray(mounts.path, candidates)));

/** An SQL expression for the id of the mount at `path` of `type` (NULL when there is none). */
export const mountIdSql = (nsId: string, path: string, type: string): SQL =>
  sql`(SELECT ${mounts.id} FROM ${mounts} WHERE ${mounts.namespaceId} = ${nsId} AND ${mounts.path} = ${path} AND ${mounts.type} = ${type})`;

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

export function insertMount(db: Db, row: MountRow) {
  return db.insert(mounts).values(row);
}

export function deleteMountRow(db: Db, id: string) {
  return db.delete(mounts).where(eq(mounts.id, id));
}

export async function updateMount(
  db: Db,
  id: string,
  patch: Partial<Pick<MountRow, "description" | "defaultLeaseTtl" | "maxLeaseTtl" | "options">>,
): Promise<void> {
  await db.update(mounts).set(patch).where(eq(mounts.id, id));
}
