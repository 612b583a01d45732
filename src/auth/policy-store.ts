/**
 * Storage of ACL policies: the only module that touches the `policies` table. Every write
 * invalidates "policies" (the ACLs src/auth/policies.ts caches) in this isolate.
 */
import { and, eq, inArray } from "drizzle-orm";
import type { Db } from "../core/db/client";
import { policies } from "../core/db/schema";
import { invalidate } from "../core/read-cache";

export type PolicyRow = typeof policies.$inferSelect;

export async function getPolicy(db: Db, nsId: string, name: string): Promise<PolicyRow | null> {
  const rows = await db.select().from(policies).where(and(eq(policies.namespaceId, nsId), eq(policies.name, name)));
  return rows[0] ?? null;
}

/**
 * Names per query: D1 allows at most 100 bound parameters per statement, and the namespace takes
 * one. New tokens carry at most MAX_TOKEN_POLICIES (64) names, so this is one query for them; a
 * token stored before that limit (or any other caller) gets several, never a 500.
 */
const NAMES_PER_QUERY = 90;

export async function getPolicies(db: Db, nsId: string, names: string[]): Promise<PolicyRow[]> {
  const unique = [...new Set(names)];
  if (unique.length === 0) return [];
  const chunks: string[][] = [];
  for (let i = 0; i < unique.length; i += NAMES_PER_QUERY) chunks.push(unique.slice(i, i + NAMES_PER_QUERY));
  const results = await Promise.all(
    chunks.map((chunk) => db.select().from(policies).where(and(eq(policies.namespaceId, nsId), inArray(policies.name, chunk)))),
  );
  return results.flat();
}

export async function listPolicyNames(db: Db, nsId: string): Promise<string[]> {
  const rows = await db.select({ name: policies.name }).from(policies).where(eq(policies.namespaceId, nsId));
  return rows.map((r) => r.name);
}

export async function putPolicy(db: Db, row: PolicyRow): Promise<void> {
  await db
    .insert(policies)
    .values(row)
    .onConflictDoUpdate({ target: [policies.namespaceId, policies.name], set: { text: row.text, updatedAt: row.updatedAt } });
  invalidate("policies");
}

export async function deletePolicy(db: Db, nsId: string, name: string): Promise<void> {
  await db.delete(policies).where(and(eq(policies.namespaceId, nsId), eq(policies.name, name)));
  invalidate("policies");
}

export async function deleteNamespacePolicies(db: Db, nsIds: string[]): Promise<void> {
  if (nsIds.length === 0) return;
  await db.delete(policies).where(inArray(policies.namespaceId, nsIds));
  invalidate("policies");
}
