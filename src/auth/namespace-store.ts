/**
 * Storage of namespaces: the only module that touches the `namespaces` table. Creation and the
 * start of a delete are single atomic statements (invariants 1 and 3 of src/core/lifecycle.ts).
 */
import { eq, inArray } from "drizzle-orm";
import type { Db } from "../core/db/client";
import { namespaces } from "../core/db/schema";
import { ROOT_NAMESPACE, type NamespaceRef } from "../core/mount-store";
import { generationOf, invalidate, ReadCache } from "../core/read-cache";

/**
 * Namespaces by full path (null: none there) and by id, per isolate, for the request pipeline
 * (src/app/resolve.ts). Bounded by CACHE_TTL_MS (src/core/read-cache.ts); every write below
 * invalidates "namespaces" in this isolate. A namespace created elsewhere is found within
 * CACHE_TTL_MS, as a deleted one stops being found.
 */
// Early re-reads in the background (src/core/read-cache.ts): one row by path or by id, or none.
const byPath = new ReadCache<NamespaceRef | null>("namespaces.byPath", "namespaces", 4096, {
  reload: async (db, path) => (await namespacesQuery(db, [path]))[0] ?? null,
});
const byId = new ReadCache<NamespaceRef | null>("namespaces.byId", "namespaces", 4096, {
  reload: async (db, id) => (await db.select({ id: namespaces.id, path: namespaces.path }).from(namespaces).where(eq(namespaces.id, id)))[0] ?? null,
});

/** The cached answer for a full path: a namespace, null (none there), or undefined (not known). */
export function cachedNamespace(path: string): NamespaceRef | null | undefined {
  return path === "" ? ROOT_NAMESPACE : byPath.get(path);
}

/**
 * Keeps the answers of one namespacesQuery over `paths`, a chain of prefixes from the shortest
 * (taken at `readAt`, under `generation`). Only up to the first path that is not a namespace:
 * nothing can nest below it, so the deeper answers are never asked for, and keeping them (one
 * per distinct KV key path) would only crowd the cache.
 */
export function rememberNamespaces(paths: string[], rows: NamespaceRef[], readAt: number, generation: number): void {
  for (const p of paths) {
    const found = rows.find((r) => r.path === p) ?? null;
    byPath.set(p, found, readAt, generation);
    if (!found) break;
  }
  for (const r of rows) byId.set(r.id, r, readAt, generation);
}

export type NamespaceRow = typeof namespaces.$inferSelect;

/** The unexecuted lookup of namespaces by full path (the root is implicit, never a row). */
export const namespacesQuery = (db: Db, paths: string[]) =>
  db.select({ id: namespaces.id, path: namespaces.path }).from(namespaces).where(inArray(namespaces.path, paths));

export async function getNamespaceByPath(db: Db, path: string): Promise<NamespaceRow | null> {
  const rows = await db.select().from(namespaces).where(eq(namespaces.path, path));
  return rows[0] ?? null;
}

export async function getNamespaceById(db: Db, id: string): Promise<NamespaceRef | null> {
  if (id === ROOT_NAMESPACE.id) return ROOT_NAMESPACE;
  const hit = byId.get(id);
  if (hit !== undefined) return hit;
  const readAt = Date.now();
  const gen = generationOf("namespaces");
  const rows = await db.select({ id: namespaces.id, path: namespaces.path }).from(namespaces).where(eq(namespaces.id, id));
  const found = rows[0] ?? null;
  byId.set(id, found, readAt, gen);
  return found;
}

export async function listChildNamespaces(db: Db, parentId: string): Promise<NamespaceRow[]> {
  return db.select().from(namespaces).where(eq(namespaces.parentId, parentId)).orderBy(namespaces.path);
}

/**
 * Inserts the namespace unless, at that instant, a namespace has its path or a mount of its
 * parent sits under its name (`mountPrefix`, "name/", relative to the parent): a namespace would
 * shadow such a mount, since path prefixes select namespaces. One statement, so of concurrent
 * creates exactly one succeeds. Returns whether the row was inserted. A parent being deleted
 * makes the insert abort (src/core/lifecycle.ts).
 */
export async function insertNamespaceIfFree(db: Db, row: NamespaceRow, mountPrefix: string): Promise<boolean> {
  const res = await db.$client
    .prepare(
      `INSERT INTO namespaces (id, path, parent_id, custom_metadata, created_at, state)
       SELECT ?1, ?2, ?3, ?4, ?5, 'active'
       WHERE NOT EXISTS (SELECT 1 FROM namespaces WHERE path = ?2)
         AND NOT EXISTS (SELECT 1 FROM mounts WHERE namespace_id = ?3 AND substr(path, 1, length(?6)) = ?6)
       RETURNING id`,
    )
    .bind(row.id, row.path, row.parentId, JSON.stringify(row.customMetadata), row.createdAt, mountPrefix)
    .all();
  invalidate("namespaces");
  return res.results.length === 1;
}

/**
 * Step one of a delete: marks the namespace "deleting" only if it is empty at that instant (no
 * child namespace, no mount, and no row in any of `engineTables`, the tables the engines declare
 * as keeping a namespace alive: src/core/engine.ts `namespaceTables`, e.g. sync destinations and
 * repohost apps). From then on the triggers refuse everything that would make it non-empty
 * again, so emptiness holds until the row is gone. The engines' tables are tested here, not
 * through each engine's store, because the test and the mark must be one statement; the engines
 * name them so that this module names none. Returns whether the namespace is now marked (also
 * when it already was).
 */
export async function markNamespaceDeletingIfEmpty(db: Db, id: string, engineTables: readonly string[]): Promise<boolean> {
  const res = await db.$client
    .prepare(
      `UPDATE namespaces SET state = 'deleting'
       WHERE id = ?1
         AND NOT EXISTS (SELECT 1 FROM namespaces WHERE parent_id = ?1)
         AND NOT EXISTS (SELECT 1 FROM mounts WHERE namespace_id = ?1)${engineTables.map(notExistsIn).join("")}
       RETURNING id`,
    )
    .bind(id)
    .all();
  invalidate("namespaces");
  return res.results.length === 1;
}

/** One more condition of the mark: no row of `table` in the namespace (?1). */
function notExistsIn(table: string): string {
  // Table names come from the engines' declarations, never from a request; the check keeps a
  // mistyped one from becoming anything but a table name.
  if (!/^[a-z][a-z0-9_]*$/.test(table)) throw new Error(`namespaceTables: "${table}" is not a table name`);
  return ` AND NOT EXISTS (SELECT 1 FROM ${table} WHERE namespace_id = ?1)`;
}

export async function deleteNamespaceRow(db: Db, id: string): Promise<void> {
  await db.delete(namespaces).where(eq(namespaces.id, id));
  invalidate("namespaces");
}

export async function updateNamespaceMetadata(db: Db, id: string, customMetadata: Record<string, string>): Promise<void> {
  await db.update(namespaces).set({ customMetadata }).where(eq(namespaces.id, id));
  invalidate("namespaces");
}

/** sys/metrics: every namespace's id and path (the root namespace has no row). */
export async function allNamespacePaths(db: Db): Promise<NamespaceRef[]> {
  return db.select({ id: namespaces.id, path: namespaces.path }).from(namespaces);
}
