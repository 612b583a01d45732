/**
 * Storage of the PKI engine: issuers, keys, roles, certificates and config. The other pki_* tables
 * have their own doors beside it (revocation-store.ts, tidy-store.ts, metadata-store.ts), and the
 * certificate bodies kept in R2 theirs (cert-bodies.ts; getCertWithBody reads through it); nothing
 * outside storage/ touches any of them. Roles, issuers and
 * configuration come out through the decoders of ./decode.ts (defaults filled). Writes that must
 * land together are returned as statements for `db.batch` (D1 has no interactive transactions:
 * it refuses BEGIN), so an issuer and its key are never half-written.
 */
import { and, asc, eq, getTableColumns, gte, sql, type SQL } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import type { Db } from "../../../core/db/client";
import { pkiCerts, pkiConfig, pkiIssuers, pkiKeys, pkiRoles } from "../../../core/db/schema";
import type { ConfigShapes, Role } from "../defaults";
import { decodeAllConfig, decodeConfig, decodeIssuer, decodeRole } from "./decode";
import { generationOf, invalidate, ReadCache } from "../../../core/read-cache";
import { bodyOf } from "./cert-bodies";
import { ensureIdsStmts, firstSerialAfter, idOf, noOf, serialFromHex, serialText } from "./cert-keys";

// The read shapes of the configuration, for the modules that take them from storage; their
// definitions and defaults are in ../defaults.ts.
export type { ClusterConfig, ConfigShapes, CrlConfig, IssuersConfig, KeysConfig, UrlsConfig } from "../defaults";

export type KeyRow = typeof pkiKeys.$inferSelect;
export type IssuerRow = typeof pkiIssuers.$inferSelect;
export type Stmt = BatchItem<"sqlite">;

/**
 * Runs statements as one D1 batch. Every write to the PKI tables goes through here or through a
 * write function below, and each invalidates this isolate's PKI read model ("pki",
 * src/core/read-cache.ts), so the isolate that changes a role, issuer, key or configuration uses
 * the change at once; other isolates within CACHE_TTL_MS. Certificates alone are written through
 * ../issuance/cert-commit.ts (insertCertsBatch), which leaves the read model alone.
 */
export async function runBatch(db: Db, stmts: Stmt[]): Promise<void> {
  if (stmts.length === 0) return;
  const [first, ...rest] = stmts;
  if (!first) return;
  await db.batch([first, ...rest]);
  invalidate("pki");
}

/** Certificate rows only, as one D1 batch: nothing the read model holds changes. */
export async function insertCertsBatch(db: Db, stmts: Stmt[]): Promise<void> {
  const [first, ...rest] = stmts;
  if (!first) return;
  await db.batch([first, ...rest]);
}

// -- keys -------------------------------------------------------------------------------------

export const listKeys = (db: Db, mountId: string): Promise<KeyRow[]> =>
  db.select().from(pkiKeys).where(eq(pkiKeys.mountId, mountId)).orderBy(asc(pkiKeys.id));

export const insertKeyStmt = (db: Db, row: KeyRow): Stmt => db.insert(pkiKeys).values(row);
export const deleteKeyStmt = (db: Db, mountId: string, id: string): Stmt =>
  db.delete(pkiKeys).where(and(eq(pkiKeys.mountId, mountId), eq(pkiKeys.id, id)));

export async function renameKey(db: Db, mountId: string, id: string, name: string): Promise<void> {
  await db.update(pkiKeys).set({ name }).where(and(eq(pkiKeys.mountId, mountId), eq(pkiKeys.id, id)));
  invalidate("pki");
}

// -- issuers ----------------------------------------------------------------------------------

export async function listIssuers(db: Db, mountId: string): Promise<IssuerRow[]> {
  const rows = await db.select().from(pkiIssuers).where(eq(pkiIssuers.mountId, mountId)).orderBy(asc(pkiIssuers.id));
  return rows.map(decodeIssuer);
}

export const insertIssuerStmt = (db: Db, row: IssuerRow): Stmt => db.insert(pkiIssuers).values(row);
export const updateIssuerStmt = (db: Db, mountId: string, id: string, patch: Partial<IssuerRow>): Stmt =>
  db.update(pkiIssuers).set(patch).where(and(eq(pkiIssuers.mountId, mountId), eq(pkiIssuers.id, id)));
export const deleteIssuerStmt = (db: Db, mountId: string, id: string): Stmt =>
  db.delete(pkiIssuers).where(and(eq(pkiIssuers.mountId, mountId), eq(pkiIssuers.id, id)));

/**
 * DELETE root (Vault API /pki/root): every issuer and key of the mount and the default pointers
 * to them, in one batch; issued certificates and the other configuration stay.
 */
export async function deleteAllIssuersAndKeys(db: Db, mountId: string): Promise<void> {
  await db.batch([
    db.delete(pkiIssuers).where(eq(pkiIssuers.mountId, mountId)),
    db.delete(pkiKeys).where(eq(pkiKeys.mountId, mountId)),
    db.delete(pkiConfig).where(and(eq(pkiConfig.mountId, mountId), eq(pkiConfig.name, "issuers"))),
    db.delete(pkiConfig).where(and(eq(pkiConfig.mountId, mountId), eq(pkiConfig.name, "keys"))),
  ]);
  invalidate("pki");
}

// -- mount configuration ----------------------------------------------------------------------

export async function getConfig<K extends keyof ConfigShapes>(db: Db, mountId: string, name: K): Promise<ConfigShapes[K]> {
  const rows = await db.select().from(pkiConfig).where(and(eq(pkiConfig.mountId, mountId), eq(pkiConfig.name, name)));
  return decodeConfig(name, rows[0]?.value);
}

/** All configuration rows of a mount in one query. */
export async function getAllConfig(db: Db, mountId: string): Promise<ConfigShapes> {
  return decodeAllConfig(await db.select().from(pkiConfig).where(eq(pkiConfig.mountId, mountId)));
}

export function putConfigStmt<K extends keyof ConfigShapes>(db: Db, mountId: string, name: K, value: ConfigShapes[K]): Stmt {
  const v = value as unknown as Record<string, unknown>;
  return db.insert(pkiConfig).values({ mountId, name, value: v }).onConflictDoUpdate({ target: [pkiConfig.mountId, pkiConfig.name], set: { value: v } });
}

/** Everything issuance reads, in one D1 round trip (the hot path; see npm run bench). */
export interface IssuanceState {
  /** The role, decoded (fields added after it was written at their defaults); null when none. */
  role: Role | null;
  issuers: IssuerRow[];
  keys: KeyRow[];
  config: ConfigShapes;
}

/**
 * The PKI read model: IssuanceState per mount and role, per isolate, for at most CACHE_TTL_MS
 * (src/core/read-cache.ts); every PKI write invalidates it in the writing isolate (runBatch and
 * the write functions here). A cached state is frozen, deeply: requests share it, so a caller
 * that tried to change one would fail loudly instead of changing another request's view.
 */
const states = new ReadCache<IssuanceState>("pki.issuanceStates", "pki", 4096, {
  // Early re-reads after the answer (src/core/read-cache.ts); the key is mount id and role name.
  reload: (db, key) => {
    const [mountId = "", role = ""] = key.split("\n");
    return readIssuanceState(db, mountId, role === "" ? null : role);
  },
});

export async function loadIssuanceState(db: Db, mountId: string, roleName: string | null): Promise<IssuanceState> {
  const key = `${mountId}\n${roleName ?? ""}`;
  const hit = states.get(key);
  if (hit) return hit;
  const readAt = Date.now();
  const gen = generationOf("pki");
  const state = await readIssuanceState(db, mountId, roleName);
  states.set(key, state, readAt, gen);
  return state;
}

/** One mount and role's issuance state, read from D1 in one batch (no cache). */
async function readIssuanceState(db: Db, mountId: string, roleName: string | null): Promise<IssuanceState> {
  const [roles, issuers, config, keys] = await db.batch(issuanceStateQueries(db, mountId, roleName));
  return deepFreeze(issuanceStateOf(roleName, roles, issuers, config, keys));
}

function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === "object" && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
  }
  return v;
}

/**
 * The queries behind loadIssuanceState, for callers that add statements of their own to the same
 * D1 batch (the OCSP responder adds its revocation lookup: one round trip per response).
 */
export function issuanceStateQueries(db: Db, mountId: string | SQL, roleName: string | null) {
  return [
    db.select().from(pkiRoles).where(and(eq(pkiRoles.mountId, mountId), eq(pkiRoles.name, roleName ?? ""))),
    db.select().from(pkiIssuers).where(eq(pkiIssuers.mountId, mountId)).orderBy(asc(pkiIssuers.id)),
    db.select().from(pkiConfig).where(eq(pkiConfig.mountId, mountId)),
    db.select().from(pkiKeys).where(eq(pkiKeys.mountId, mountId)),
  ] as const;
}

type RoleRow = typeof pkiRoles.$inferSelect;
type ConfigRow = typeof pkiConfig.$inferSelect;

export function issuanceStateOf(roleName: string | null, roles: RoleRow[], issuers: IssuerRow[], config: ConfigRow[], keys: KeyRow[]): IssuanceState {
  const stored = roleName === null ? undefined : roles[0]?.data;
  return { role: stored === undefined ? null : decodeRole(stored), issuers: issuers.map(decodeIssuer), keys, config: decodeAllConfig(config) };
}

// -- roles ------------------------------------------------------------------------------------

/** The role, decoded (fields added after it was written at their defaults); null when none. */
export async function getRole(db: Db, mountId: string, name: string): Promise<Role | null> {
  const rows = await db.select().from(pkiRoles).where(and(eq(pkiRoles.mountId, mountId), eq(pkiRoles.name, name)));
  return rows[0] ? decodeRole(rows[0].data) : null;
}

export async function putRole(db: Db, mountId: string, name: string, role: Role): Promise<void> {
  const now = Date.now();
  // Role is a closed interface, not an index signature; the column holds it as JSON.
  const data = role as unknown as Record<string, unknown>;
  await db
    .insert(pkiRoles)
    .values({ mountId, name, data, updatedAt: now })
    .onConflictDoUpdate({ target: [pkiRoles.mountId, pkiRoles.name], set: { data, updatedAt: now } });
  invalidate("pki");
}

export async function deleteRole(db: Db, mountId: string, name: string): Promise<void> {
  await db.delete(pkiRoles).where(and(eq(pkiRoles.mountId, mountId), eq(pkiRoles.name, name)));
  invalidate("pki");
}

/** The role names of a mount, sorted (LIST roles: no role is decoded). */
export async function listRoleNames(db: Db, mountId: string): Promise<string[]> {
  const rows = await db.select({ name: pkiRoles.name }).from(pkiRoles).where(eq(pkiRoles.mountId, mountId)).orderBy(asc(pkiRoles.name));
  return rows.map((r) => r.name);
}

/** Every role of a mount, decoded, sorted by name. */
export async function listRoles(db: Db, mountId: string): Promise<{ name: string; role: Role }[]> {
  const rows = await db.select({ name: pkiRoles.name, data: pkiRoles.data }).from(pkiRoles).where(eq(pkiRoles.mountId, mountId)).orderBy(asc(pkiRoles.name));
  return rows.map((r) => ({ name: r.name, role: decodeRole(r.data) }));
}

// -- certificates -----------------------------------------------------------------------------

/**
 * A certificate row as the engine sees it: ids and colon hex. The table keeps pki_ids numbers and
 * the serial's octets (migration 0019, ./cert-keys.ts); these functions convert.
 */
export interface CertRow {
  mountId: string;
  /** Colon-separated lowercase hex, as Vault writes serial numbers ("17:67:16:..."). */
  serial: string;
  /** base64 DER when the row keeps its body; '' when the body is in R2 (./cert-bodies.ts). */
  der: string;
  issuerId: string;
  /** Unix seconds. */
  notAfter: number;
  createdAt: number;
  metadata: string | null;
  commonName: string | null;
  sans: string | null;
  notBefore: number | null;
  role: string | null;
  revokedAt: number | null;
  crlShard: number | null;
}

type InsertRequired = "mountId" | "serial" | "der" | "issuerId" | "notAfter" | "createdAt";
export type CertInsert = Pick<CertRow, InsertRequired> & Partial<Omit<CertRow, InsertRequired>>;

/** The row's values in the slim layout: ids as their numbers (numbered by ensureIdsStmts in the same batch). */
function slimValues(row: CertInsert) {
  const { mountId, issuerId, ...rest } = row;
  return { ...rest, mountNo: noOf(mountId), issuerNo: noOf(issuerId) };
}

/** The statements that store one certificate row (the ids' numbers first), for the caller's batch. */
export const insertCertStmts = (db: Db, row: CertInsert): Stmt[] => [...ensureIdsStmts(db, [row.mountId, row.issuerId]), db.insert(pkiCerts).values(slimValues(row))];

/**
 * Several certificate rows as multi-row INSERTs, CERT_ROWS_PER_INSERT rows each, after the
 * statement(s) numbering their ids: D1 allows 100 bound parameters per statement and a row binds
 * 12 (with the inventory's columns; revoked_at, never set at insert, is written as a literal NULL). One statement per 8 rows instead of one per row costs the local
 * D1 less per group commit (npm run bench).
 */
export const CERT_ROWS_PER_INSERT = 8;
export function insertCertRowsStmts(db: Db, rows: CertInsert[]): Stmt[] {
  if (rows.length === 0) return [];
  const out: Stmt[] = ensureIdsStmts(db, rows.flatMap((r) => [r.mountId, r.issuerId]));
  for (let i = 0; i < rows.length; i += CERT_ROWS_PER_INSERT) out.push(db.insert(pkiCerts).values(rows.slice(i, i + CERT_ROWS_PER_INSERT).map(slimValues)));
  return out;
}

/** The row with this mount and serial (Drizzle terms, for the other storage modules). */
export const certKey = (mountId: string, serial: string): SQL | undefined => and(eq(pkiCerts.mountNo, noOf(mountId)), eq(pkiCerts.serial, serial));

export async function getCert(db: Db, mountId: string, serial: string): Promise<CertRow | null> {
  const { id: _id, mountNo: _m, issuerNo, ...columns } = getTableColumns(pkiCerts);
  const rows = await db
    .select({ ...columns, issuerId: idOf(issuerNo) })
    .from(pkiCerts)
    .where(certKey(mountId, serial));
  const row = rows[0];
  return row ? { ...row, mountId } : null;
}

/**
 * A certificate row with its body in `der` (base64 DER, from the row or from R2: cert-bodies.ts);
 * null when there is no row, or its body is not there yet (an issue still in flight).
 */
export async function getCertWithBody(db: Db, bodies: R2Bucket, mountId: string, serial: string): Promise<CertRow | null> {
  const row = await getCert(db, mountId, serial);
  if (!row) return null;
  const der = await bodyOf(bodies, row);
  return der === null ? null : { ...row, der };
}

/** Puts a certificate's body into its row (the layout before R2), for a row whose R2 put failed. */
export async function keepBodyInRow(db: Db, mountId: string, serial: string, derB64: string): Promise<void> {
  await db.update(pkiCerts).set({ der: derB64 }).where(certKey(mountId, serial));
}

/**
 * Stored serials in key order, `after` exclusive, at most `limit` (0: all). The page is cut in
 * SQL on the (mount, serial) unique index, so a paginated LIST at a million certificates reads
 * one page, not every serial. The octets' order is the colon hex's (src/core/db/schema/pki-serial.ts),
 * which is JavaScript's sort for these ASCII keys; `after` may be any text (firstSerialAfter).
 */
export async function listCertSerials(db: Db, mountId: string, page: { after: string; limit: number } = { after: "", limit: 0 }): Promise<string[]> {
  const mount = eq(pkiCerts.mountNo, noOf(mountId));
  const from = page.after ? firstSerialAfter(page.after) : null;
  if (page.after && from === null) return [];
  const where = from ? and(mount, gte(pkiCerts.serial, serialText(from))) : mount;
  // The serial as hex text, not as the BLOB: see serialFromHex.
  const q = db.select({ hex: sql<string>`lower(hex(${pkiCerts.serial}))` }).from(pkiCerts).where(where).orderBy(asc(pkiCerts.serial));
  const rows = page.limit > 0 ? await q.limit(page.limit) : await q;
  return rows.map((r) => serialFromHex(r.hex));
}

// -- mount removal ----------------------------------------------------------------------------

/** Removes every row of a mount (the mount is being disabled; ../purge.ts deletes its R2 bodies first). */
export async function purgePkiRows(db: Db, mountId: string): Promise<void> {
  await db.batch([
    db.delete(pkiCerts).where(eq(pkiCerts.mountNo, noOf(mountId))),
    db.delete(pkiRoles).where(eq(pkiRoles.mountId, mountId)),
    db.delete(pkiIssuers).where(eq(pkiIssuers.mountId, mountId)),
    db.delete(pkiKeys).where(eq(pkiKeys.mountId, mountId)),
    db.delete(pkiConfig).where(eq(pkiConfig.mountId, mountId)),
  ]);
  invalidate("pki");
}
