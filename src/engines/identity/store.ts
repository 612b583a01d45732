/**
 * The one door of the identity tables (src/core/db/schema/identity.ts): the issuer's signing keys
 * and the per-namespace issuer setting. Private keys are sealed here and opened only here; every
 * write invalidates this isolate's "identity" area (src/core/read-cache.ts), which also retires
 * layer-0 answers of the discovery document and key set (src/core/public-answers.ts).
 *
 * Invariants:
 * - A key is inserted signing (rotated_at null) and later marked rotated with a withdrawal time,
 *   once; it is deleted only after its withdrawal time (ISSUER_KEY_RULES in ./keys.ts).
 * - Two isolates may each insert a first key at once: both are published and both verify; the
 *   newest signs and the next rotation retires the other (no token is ever signed by a key that
 *   is not in the key set).
 */
import { and, desc, eq, isNotNull, isNull, lt } from "drizzle-orm";
import type { Db } from "../../core/db/client";
import { identityConfig, identityKeys } from "../../core/db/schema";
import { seal, unseal, type SealKeys } from "../../core/db/seal";
import { invalidate } from "../../core/read-cache";

export interface IssuerKey {
  kid: string;
  algorithm: string;
  publicJwk: string;
  sealedPrivateKey: string;
  createdAt: number;
  rotatedAt: number | null;
  withdrawAt: number | null;
}

const keyContext = (kid: string) => `identity-key:${kid}`;

/** Every key still published (signing, or rotated and not yet withdrawn at `now`), newest first. */
export async function publishedKeys(db: Db, now: number): Promise<IssuerKey[]> {
  const rows = await db.select().from(identityKeys).orderBy(desc(identityKeys.createdAt), desc(identityKeys.kid)).all();
  return rows.filter((r) => r.withdrawAt === null || r.withdrawAt > now);
}

/** The keys that sign (rotated_at null), newest first. */
export async function signingKeys(db: Db): Promise<IssuerKey[]> {
  return db.select().from(identityKeys).where(isNull(identityKeys.rotatedAt)).orderBy(desc(identityKeys.createdAt), desc(identityKeys.kid)).all();
}

/** Stores a new signing key, its private half sealed under a context naming its kid. */
export async function insertKey(db: Db, keys: SealKeys, k: { kid: string; algorithm: string; publicJwk: string; privateJwk: string; createdAt: number }): Promise<void> {
  const sealedPrivateKey = await seal(keys, k.privateJwk, keyContext(k.kid));
  await db.insert(identityKeys).values({ kid: k.kid, algorithm: k.algorithm, publicJwk: k.publicJwk, sealedPrivateKey, createdAt: k.createdAt, rotatedAt: null, withdrawAt: null }).run();
  invalidate("identity");
}

/** The private JWK of a key (JSON text). */
export async function openPrivateKey(keys: SealKeys, k: IssuerKey): Promise<string> {
  return unseal(keys, k.sealedPrivateKey, keyContext(k.kid));
}

/** Marks a signing key rotated: it stops signing now and is withdrawn at `withdrawAt`. Only once. */
export async function markRotated(db: Db, kid: string, now: number, withdrawAt: number): Promise<void> {
  await db.update(identityKeys).set({ rotatedAt: now, withdrawAt }).where(and(eq(identityKeys.kid, kid), isNull(identityKeys.rotatedAt))).run();
  invalidate("identity");
}

/** Deletes the keys withdrawn before `now`; returns how many. */
export async function deleteWithdrawn(db: Db, now: number): Promise<number> {
  const gone = await db.delete(identityKeys).where(and(isNotNull(identityKeys.withdrawAt), lt(identityKeys.withdrawAt, now))).returning({ kid: identityKeys.kid }).all();
  if (gone.length > 0) invalidate("identity");
  return gone.length;
}

/** The namespace's `issuer` setting, or null when unset. */
export async function getIssuerSetting(db: Db, namespaceId: string): Promise<string | null> {
  const row = await db.select({ issuer: identityConfig.issuer }).from(identityConfig).where(eq(identityConfig.namespaceId, namespaceId)).get();
  return row?.issuer ?? null;
}

/** Sets (or with "" clears) the namespace's `issuer`. */
export async function putIssuerSetting(db: Db, namespaceId: string, issuer: string, now: number): Promise<void> {
  if (issuer === "") await db.delete(identityConfig).where(eq(identityConfig.namespaceId, namespaceId)).run();
  else {
    await db
      .insert(identityConfig)
      .values({ namespaceId, issuer, updatedAt: now })
      .onConflictDoUpdate({ target: identityConfig.namespaceId, set: { issuer, updatedAt: now } })
      .run();
  }
  invalidate("identity");
}

/** A deleted namespace's setting goes with it. */
export async function deleteNamespaceIdentity(db: Db, namespaceId: string): Promise<void> {
  await db.delete(identityConfig).where(eq(identityConfig.namespaceId, namespaceId)).run();
  invalidate("identity");
}
