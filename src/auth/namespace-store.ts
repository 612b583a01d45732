/** Storage of namespaces: the only module that touches the `namespaces` table. */
import { eq, inArray, like } from "drizzle-orm";
import type { Db } from "../db/client";
import { namespaces } from "../db/schema";
import { ROOT_NAMESPACE, type NamespaceRef } from "../sys/mount-store";

export type NamespaceRow = typeof namespaces.$inferSelect;

/** Namespace rows for a set of full paths ("a/", "a/b/"). The root namespace is implicit. */
export async function findNamespaces(db: Db, paths: string[]): Promise<NamespaceRef[]> {
  const wanted = paths.filter((p) => p !== "");
  const found: NamespaceRef[] = paths.includes("") ? [ROOT_NAMESPACE] : [];
  if (wanted.length === 0) return found;
  const rows = await namespacesQuery(db, wanted);
  return [...found, ...rows];
}

/** The unexecuted lookup of namespaces by full path (the root is implicit, never a row). */
export const namespacesQuery = (db: Db, paths: string[]) =>
  db.select({ id: namespaces.id, path: namespaces.path }).from(namespaces).where(inArray(namespaces.path, paths));

export async function getNamespaceByPath(db: Db, path: string): Promise<NamespaceRow | null> {
  const rows = await db.select().from(namespaces).where(eq(namespaces.path, path));
  return rows[0] ?? null;
}

export async function getNamespaceById(db: Db, id: string): Promise<NamespaceRef | null> {
  if (id === ROOT_NAMESPACE.id) return ROOT_NAMESPACE;
  const rows = await db.select({ id: namespaces.id, path: namespaces.path }).from(namespaces).where(eq(namespaces.id, id));
  return rows[0] ?? null;
}

export async function listChildNamespaces(db: Db, parentId: string): Promise<NamespaceRow[]> {
  return db.select().from(namespaces).where(eq(namespaces.parentId, parentId)).orderBy(namespaces.path);
}

/** Every namespace at or below a path (for revoking the tokens of a subtree). */
export async function listSubtree(db: Db, path: string): Promise<NamespaceRow[]> {
  return db.select().from(namespaces).where(like(namespaces.path, `${path}%`));
}

export async function insertNamespace(db: Db, row: NamespaceRow): Promise<void> {
  await db.insert(namespaces).values(row);
}

export function deleteNamespaceRow(db: Db, id: string) {
  return db.delete(namespaces).where(eq(namespaces.id, id));
}

export async function updateNamespaceMetadata(db: Db, id: string, customMetadata: Record<string, string>): Promise<void> {
  await db.update(namespaces).set({ customMetadata }).where(eq(namespaces.id, id));
}
