/**
 * The seal check: whether the configured keys (SEAL_KEY, SEAL_KEYS_PREVIOUS) open this database's
 * data. Without it a wrong key is only found when a row fails to open, as a 500 on whatever
 * request touched one, while sys/health says all is well. Vault answers the same question with
 * its seal status: a Vault that cannot decrypt its barrier is sealed, sys/health answers 503 and
 * every other request is refused (https://developer.hashicorp.com/vault/api-docs/system/health,
 * https://developer.hashicorp.com/vault/docs/concepts/seal).
 *
 * The proof is a canary: one row of `seal_canary`, a known text sealed with SEAL_KEY the first
 * time the service starts on this database. At start it must open with SEAL_KEY or one of
 * SEAL_KEYS_PREVIOUS; when it opens with a previous key only, it is sealed again with SEAL_KEY
 * (the canary follows SEAL_KEY). Beside the canary, the oldest sealed row of each table that holds
 * sealed data must name a configured key: that catches a database sealed before the canary existed
 * (an upgrade started with the wrong key) and an old key dropped from SEAL_KEYS_PREVIOUS while
 * rows sealed by it remain (rows are not re-sealed by a rotation).
 *
 * One D1 read per isolate: an open verdict is kept for the keys it was reached with; a sealed one
 * is checked again at most every RECHECK_MS, so a corrected secret heals without a restart.
 */
import { currentKeyId, seal, unseal, type SealKeys } from "./seal";

const CANARY_TEXT = "lanyard seal canary";
const CANARY_CONTEXT = "seal_canary:1";
/** How long a sealed verdict stands before the next request checks again. */
export const RECHECK_MS = 5_000;

export const WRONG_KEY = "service is sealed: no configured key (SEAL_KEY, SEAL_KEYS_PREVIOUS) opens this database's data; set SEAL_KEY to the key it was sealed with, or keep that key in SEAL_KEYS_PREVIOUS after a rotation";
const NO_TABLE = "service is sealed: the seal canary table is missing; apply the migrations first (wrangler d1 migrations apply DB --remote)";

interface Verdict {
  /** The key text the verdict was reached with. */
  keys: string;
  /** null: open. */
  problem: string | null;
  at: number;
}

let verdict: Verdict | null = null;
let pending: { keys: string; promise: Promise<string | null> } | null = null;

const keyText = (keys: SealKeys) => `${keys.current}\u0000${keys.previous ?? ""}`;

/** Whether this isolate already knows the keys open the data (the hot path: no await). */
export function knownOpen(keys: SealKeys): boolean {
  return verdict !== null && verdict.problem === null && verdict.keys === keyText(keys);
}

/** Why the service is sealed with these keys, or null when they open the data. */
export async function sealProblem(d1: D1Database, keys: SealKeys, now = Date.now()): Promise<string | null> {
  const text = keyText(keys);
  if (verdict?.keys === text && (verdict.problem === null || now - verdict.at < RECHECK_MS)) return verdict.problem;
  if (pending?.keys === text) return pending.promise;
  const promise = checkCanary(d1, keys).then(
    (problem) => {
      verdict = { keys: text, problem, at: Date.now() };
      return problem;
    },
  );
  pending = { keys: text, promise };
  try {
    return await promise;
  } finally {
    if (pending?.promise === promise) pending = null;
  }
}

/** Forget the verdict (tests that change the keys or the data under the same keys). */
export function forgetSealVerdict(): void {
  verdict = null;
  pending = null;
}

// The first (by rowid: usually the oldest) sealed value of each column that holds sealed data,
// as the layers above declare them (setSealedColumns, called once by the engine registry).
// Each sealed value starts `v1:<key id>:` (./seal.ts).
let sampleSql: string | null = null;
let declared: readonly { table: string; column: string }[] = [];

/** The sealed columns the layers above declared, and the canary's own (a restore checks their key ids). */
export function sealedColumns(): readonly { table: string; column: string }[] {
  return [...declared, { table: "seal_canary", column: "sealed" }];
}

/** The sealed columns to sample; names are checked, since they are spliced into SQL. */
export function setSealedColumns(columns: readonly { table: string; column: string }[]): void {
  const ident = /^[a-z][a-z0-9_]*$/;
  for (const c of columns) if (!ident.test(c.table) || !ident.test(c.column)) throw new Error(`sealed column ${c.table}.${c.column}: not a plain identifier`);
  declared = [...columns];
  sampleSql = columns.length === 0 ? null : columns.map((c) => `SELECT s FROM (SELECT ${c.column} AS s FROM ${c.table} WHERE ${c.column} IS NOT NULL LIMIT 1)`).join(" UNION ALL ");
}

async function checkCanary(d1: D1Database, keys: SealKeys): Promise<string | null> {
  let canary: { sealed: string } | undefined;
  let samples: { s: string }[];
  try {
    const canaryQuery = d1.prepare("SELECT sealed FROM seal_canary WHERE id = 1");
    const [c, s] = sampleSql ? await d1.batch([canaryQuery, d1.prepare(sampleSql)]) : [await canaryQuery.all(), undefined];
    canary = (c?.results as { sealed: string }[] | undefined)?.[0];
    samples = (s?.results as { s: string }[] | undefined) ?? [];
  } catch (e) {
    if (e instanceof Error && /no such table/i.test(e.message)) return NO_TABLE;
    throw e;
  }
  const ids = await configuredIds(keys);
  // Rows sealed before the canary existed, or by a key since dropped from SEAL_KEYS_PREVIOUS.
  const foreign = samples.map((r) => r.s.split(":")[1] ?? "").filter((kid) => !ids.has(kid));
  if (foreign.length > 0) {
    console.error(`seal check: stored data is sealed by key id(s) ${[...new Set(foreign)].join(", ")}, none of them configured`);
    return WRONG_KEY;
  }
  if (canary) return openCanary(d1, keys, canary.sealed, ids);
  // First start on this database: write the canary. Another isolate may write its own first;
  // whichever row stands is the one checked.
  const sealed = await seal(keys, CANARY_TEXT, CANARY_CONTEXT);
  await d1.prepare("INSERT INTO seal_canary (id, sealed, updated_at) VALUES (1, ?, ?) ON CONFLICT (id) DO NOTHING").bind(sealed, Date.now()).run();
  const stored = await d1.prepare("SELECT sealed FROM seal_canary WHERE id = 1").first<{ sealed: string }>();
  return stored ? openCanary(d1, keys, stored.sealed, ids) : WRONG_KEY;
}

async function configuredIds(keys: SealKeys): Promise<Set<string>> {
  const all = [keys.current, ...(keys.previous ?? "").split(",")].filter((k) => k.trim() !== "");
  return new Set(await Promise.all(all.map((k) => currentKeyId({ current: k }))));
}

async function openCanary(d1: D1Database, keys: SealKeys, sealed: string, ids: Set<string>): Promise<string | null> {
  const kid = sealed.split(":")[1] ?? "";
  let text: string;
  try {
    if (!ids.has(kid)) throw new Error(`sealed by key id ${kid}, which is not configured`);
    text = await unseal(keys, sealed, CANARY_CONTEXT);
  } catch (e) {
    // The key ids go to the log only: the answers that say "sealed" need no token.
    console.error("seal check: the canary does not open:", e instanceof Error ? e.message : "unknown error");
    return WRONG_KEY;
  }
  if (text !== CANARY_TEXT) return WRONG_KEY;
  // Opened with a previous key: seal it again with SEAL_KEY. Conditional on the row being unchanged.
  if (kid !== (await currentKeyId(keys))) {
    const next = await seal(keys, CANARY_TEXT, CANARY_CONTEXT);
    await d1.prepare("UPDATE seal_canary SET sealed = ?, updated_at = ? WHERE id = 1 AND sealed = ?").bind(next, Date.now(), sealed).run();
  }
  return null;
}
