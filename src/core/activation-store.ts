/**
 * Storage of activated features (sys/activation-flags): the only module that touches the
 * `activation_flags` table. Activation is one-way and cluster-wide, as in Vault.
 */
import type { Db } from "./db/client";
import { activationFlags } from "./db/schema";

export async function activatedFeatures(db: Db): Promise<string[]> {
  const rows = await db.select({ name: activationFlags.name }).from(activationFlags);
  return rows.map((r) => r.name).sort();
}

/** Marks a feature activated; idempotent (a second activation keeps the first time). */
export async function activateFeature(db: Db, name: string): Promise<void> {
  await db.insert(activationFlags).values({ name, activatedAt: Date.now() }).onConflictDoNothing();
}
