/**
 * Storage of the PKI engine: the only module that touches the pki_* tables. Writes that must
 * land together are returned as statements for `db.batch` (D1 has no interactive transactions,
 * workers-stack.md pitfall 8), so an issuer and its key are never half-written.
 */
import { and, asc, eq, type SQL } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import type { Db } from "../../../core/db/client";
import { pkiCerts, pkiConfig, pkiIssuers, pkiKeys, pkiRoles } from "../../../core/db/schema";
import { AUTO_TIDY_DEFAULTS, type AutoTidyConfig } from "../tidy/tidy";
import { EXTERNAL_POLICY_DEFAULTS, EXTERNAL_POLICY_STATUS_DEFAULTS, type ExternalPolicyConfig, type ExternalPolicyStatus } from "../external-policy/config";

export type KeyRow = typeof pkiKeys.$inferSelect;
export type IssuerRow = typeof pkiIssuers.$inferSelect;
export type CertRow = typeof pkiCerts.$inferSelect;
export type Stmt = BatchItem<"sqlite">;

export async function runBatch(db: Db, stmts: Stmt[]): Promise<void> {
  if (stmts.length === 0) return;
  const [first, ...rest] = stmts;
  if (!first) return;
  await db.batch([first, ...rest]);
}

// -- keys -------------------------------------------------------------------------------------

export const listKeys = (db: Db, mountId: string): Promise<KeyRow[]> =>
  db.select().from(pkiKeys).where(eq(pkiKeys.mountId, mountId)).orderBy(asc(pkiKeys.id));

export async function getKey(db: Db, mountId: string, id: string): Promise<KeyRow | null> {
  const rows = await db.select().from(pkiKeys).where(and(eq(pkiKeys.mountId, mountId), eq(pkiKeys.id, id)));
  return rows[0] ?? null;
}

export const insertKeyStmt = (db: Db, row: KeyRow): Stmt => db.insert(pkiKeys).values(row);
export const deleteKeyStmt = (db: Db, mountId: string, id: string): Stmt =>
  db.delete(pkiKeys).where(and(eq(pkiKeys.mountId, mountId), eq(pkiKeys.id, id)));

export async function renameKey(db: Db, mountId: string, id: string, name: string): Promise<void> {
  await db.update(pkiKeys).set({ name }).where(and(eq(pkiKeys.mountId, mountId), eq(pkiKeys.id, id)));
}

// -- issuers ----------------------------------------------------------------------------------

export const listIssuers = (db: Db, mountId: string): Promise<IssuerRow[]> =>
  db.select().from(pkiIssuers).where(eq(pkiIssuers.mountId, mountId)).orderBy(asc(pkiIssuers.id));

export async function getIssuer(db: Db, mountId: string, id: string): Promise<IssuerRow | null> {
  const rows = await db.select().from(pkiIssuers).where(and(eq(pkiIssuers.mountId, mountId), eq(pkiIssuers.id, id)));
  return rows[0] ?? null;
}

/** An issuer together with its key in one query (the issuance hot path). */
export async function getIssuerWithKey(db: Db, mountId: string, id: string): Promise<{ issuer: IssuerRow; key: KeyRow | null } | null> {
  const rows = await db
    .select({ issuer: pkiIssuers, key: pkiKeys })
    .from(pkiIssuers)
    .leftJoin(pkiKeys, eq(pkiKeys.id, pkiIssuers.keyId))
    .where(and(eq(pkiIssuers.mountId, mountId), eq(pkiIssuers.id, id)));
  const r = rows[0];
  return r ? { issuer: r.issuer, key: r.key } : null;
}

export const insertIssuerStmt = (db: Db, row: IssuerRow): Stmt => db.insert(pkiIssuers).values(row);
export const updateIssuerStmt = (db: Db, mountId: string, id: string, patch: Partial<IssuerRow>): Stmt =>
  db.update(pkiIssuers).set(patch).where(and(eq(pkiIssuers.mountId, mountId), eq(pkiIssuers.id, id)));
export const deleteIssuerStmt = (db: Db, mountId: string, id: string): Stmt =>
  db.delete(pkiIssuers).where(and(eq(pkiIssuers.mountId, mountId), eq(pkiIssuers.id, id)));

// -- mount configuration ----------------------------------------------------------------------

export interface IssuersConfig {
  default: string;
  default_follows_latest_issuer: boolean;
}

export interface KeysConfig {
  default: string;
}

export interface UrlsConfig {
  issuing_certificates: string[];
  crl_distribution_points: string[];
  delta_crl_distribution_points: string[];
  ocsp_servers: string[];
  enable_templating: boolean;
}

export interface ClusterConfig {
  path: string;
  aia_path: string;
}

/** config/crl (pki-engine.md §6.3). Durations are kept as the strings the user wrote. */
export interface CrlConfig {
  expiry: string;
  disable: boolean;
  ocsp_disable: boolean;
  ocsp_expiry: string;
  auto_rebuild: boolean;
  auto_rebuild_grace_period: string;
  enable_delta: boolean;
  delta_rebuild_interval: string;
  allow_expired_cert_revocation: boolean;
  max_crl_entries: number;
}

export interface ConfigShapes {
  issuers: IssuersConfig;
  keys: KeysConfig;
  urls: UrlsConfig;
  cluster: ClusterConfig;
  crl: CrlConfig;
  /** config/auto-tidy (src/engines/pki/tidy/tidy.ts, pki-engine.md §6.7). */
  auto_tidy: AutoTidyConfig;
  /** config/external-policy (src/engines/pki/external-policy/config.ts, pki-engine.md §7). */
  external_policy: ExternalPolicyConfig;
  /** The policy service's last good answer (kept apart so issuance never overwrites a config write). */
  external_policy_status: ExternalPolicyStatus;
}

export const CONFIG_DEFAULTS: ConfigShapes = {
  issuers: { default: "", default_follows_latest_issuer: false },
  keys: { default: "" },
  urls: { issuing_certificates: [], crl_distribution_points: [], delta_crl_distribution_points: [], ocsp_servers: [], enable_templating: false },
  cluster: { path: "", aia_path: "" },
  crl: {
    expiry: "72h",
    disable: false,
    ocsp_disable: false,
    ocsp_expiry: "12h",
    auto_rebuild: false,
    auto_rebuild_grace_period: "12h",
    enable_delta: false,
    delta_rebuild_interval: "15m",
    allow_expired_cert_revocation: false,
    max_crl_entries: 100000,
  },
  auto_tidy: AUTO_TIDY_DEFAULTS,
  external_policy: EXTERNAL_POLICY_DEFAULTS,
  external_policy_status: EXTERNAL_POLICY_STATUS_DEFAULTS,
};

export async function getConfig<K extends keyof ConfigShapes>(db: Db, mountId: string, name: K): Promise<ConfigShapes[K]> {
  const rows = await db.select().from(pkiConfig).where(and(eq(pkiConfig.mountId, mountId), eq(pkiConfig.name, name)));
  const stored = rows[0]?.value as Partial<ConfigShapes[K]> | undefined;
  return { ...CONFIG_DEFAULTS[name], ...stored };
}

/** All configuration rows of a mount in one query. */
export async function getAllConfig(db: Db, mountId: string): Promise<ConfigShapes> {
  const rows = await db.select().from(pkiConfig).where(eq(pkiConfig.mountId, mountId));
  const out: ConfigShapes = structuredClone(CONFIG_DEFAULTS);
  for (const r of rows) {
    if (r.name in out) Object.assign(out[r.name as keyof ConfigShapes], r.value);
  }
  return out;
}

export function putConfigStmt<K extends keyof ConfigShapes>(db: Db, mountId: string, name: K, value: ConfigShapes[K]): Stmt {
  const v = value as unknown as Record<string, unknown>;
  return db.insert(pkiConfig).values({ mountId, name, value: v }).onConflictDoUpdate({ target: [pkiConfig.mountId, pkiConfig.name], set: { value: v } });
}

/** Everything issuance reads, in one D1 round trip (the hot path; see npm run bench). */
export interface IssuanceState {
  role: Record<string, unknown> | null;
  issuers: IssuerRow[];
  keys: KeyRow[];
  config: ConfigShapes;
}

export async function loadIssuanceState(db: Db, mountId: string, roleName: string | null): Promise<IssuanceState> {
  const [roles, issuers, config, keys] = await db.batch(issuanceStateQueries(db, mountId, roleName));
  return issuanceStateOf(roleName, roles, issuers, config, keys);
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

/**
 * What signing without a role reads (OCSP): issuers, configuration and keys, in the order of
 * issuanceStateQueries minus the role, for callers that add statements to the same D1 batch.
 */
export function signingStateQueries(db: Db, mountId: string | SQL) {
  const [, issuers, config, keys] = issuanceStateQueries(db, mountId, null);
  return [issuers, config, keys] as const;
}

type RoleRow = typeof pkiRoles.$inferSelect;
type ConfigRow = typeof pkiConfig.$inferSelect;

/**
 * The IssuanceState from results of issuanceStateQueries that ran in someone else's batch
 * (RouteDef.prefetch, src/app/dispatch.ts); null when they are not all there.
 */
export function issuanceStateFromResults(roleName: string | null, results: readonly unknown[]): IssuanceState | null {
  const [roles, issuers, config, keys] = results;
  if (results.length !== 4 || !Array.isArray(roles) || !Array.isArray(issuers) || !Array.isArray(config) || !Array.isArray(keys)) return null;
  // The same four queries in the same order (issuanceStateQueries), so the rows are theirs.
  return issuanceStateOf(roleName, roles as RoleRow[], issuers as IssuerRow[], config as ConfigRow[], keys as KeyRow[]);
}

export function issuanceStateOf(roleName: string | null, roles: RoleRow[], issuers: IssuerRow[], config: ConfigRow[], keys: KeyRow[]): IssuanceState {
  const out: ConfigShapes = structuredClone(CONFIG_DEFAULTS);
  for (const r of config) if (r.name in out) Object.assign(out[r.name as keyof ConfigShapes], r.value);
  return { role: roleName === null ? null : (roles[0]?.data ?? null), issuers, keys, config: out };
}

// -- roles ------------------------------------------------------------------------------------

export async function getRoleData(db: Db, mountId: string, name: string): Promise<Record<string, unknown> | null> {
  const rows = await db.select().from(pkiRoles).where(and(eq(pkiRoles.mountId, mountId), eq(pkiRoles.name, name)));
  return rows[0]?.data ?? null;
}

export async function putRoleData(db: Db, mountId: string, name: string, data: Record<string, unknown>): Promise<void> {
  const now = Date.now();
  await db
    .insert(pkiRoles)
    .values({ mountId, name, data, updatedAt: now })
    .onConflictDoUpdate({ target: [pkiRoles.mountId, pkiRoles.name], set: { data, updatedAt: now } });
}

export async function deleteRole(db: Db, mountId: string, name: string): Promise<void> {
  await db.delete(pkiRoles).where(and(eq(pkiRoles.mountId, mountId), eq(pkiRoles.name, name)));
}

export async function listRoles(db: Db, mountId: string): Promise<{ name: string; data: Record<string, unknown> }[]> {
  return db.select({ name: pkiRoles.name, data: pkiRoles.data }).from(pkiRoles).where(eq(pkiRoles.mountId, mountId)).orderBy(asc(pkiRoles.name));
}

// -- certificates -----------------------------------------------------------------------------

export const insertCertStmt = (db: Db, row: typeof pkiCerts.$inferInsert): Stmt => db.insert(pkiCerts).values(row);

export async function getCert(db: Db, mountId: string, serial: string): Promise<CertRow | null> {
  const rows = await db.select().from(pkiCerts).where(and(eq(pkiCerts.mountId, mountId), eq(pkiCerts.serial, serial)));
  return rows[0] ?? null;
}

export async function listCertSerials(db: Db, mountId: string): Promise<string[]> {
  const rows = await db.select({ serial: pkiCerts.serial }).from(pkiCerts).where(eq(pkiCerts.mountId, mountId)).orderBy(asc(pkiCerts.serial));
  return rows.map((r) => r.serial);
}

// -- mount removal ----------------------------------------------------------------------------

/** Removes every row of a mount (the mount is being disabled). */
export async function purgePkiRows(db: Db, mountId: string): Promise<void> {
  await db.batch([
    db.delete(pkiCerts).where(eq(pkiCerts.mountId, mountId)),
    db.delete(pkiRoles).where(eq(pkiRoles.mountId, mountId)),
    db.delete(pkiIssuers).where(eq(pkiIssuers.mountId, mountId)),
    db.delete(pkiKeys).where(eq(pkiKeys.mountId, mountId)),
    db.delete(pkiConfig).where(eq(pkiConfig.mountId, mountId)),
  ]);
}
