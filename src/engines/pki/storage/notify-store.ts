/**
 * Storage of expiry notifications (docs/pki-notifications.md): the mount's configuration (the
 * pki_config row "notifications"; its headers sealed by ../notify/config.ts before they get
 * here), the scan marks (pki_notify_marks) and the record of every notification
 * (pki_notify_sent). The only module that touches the two pki_notify_* tables.
 *
 * Invariant: a (mount, serial, threshold, target) row is inserted once (its primary key,
 * `ON CONFLICT DO NOTHING ... RETURNING`), and only a caller that got the row back queues its
 * message; so two overlapping scans never queue the same notification twice.
 */
import { and, asc, eq, lt, sql } from "drizzle-orm";
import type { Db } from "../../../core/db/client";
import { mounts, pkiConfig, pkiIssuers, pkiNotifyMarks, pkiNotifySent } from "../../../core/db/schema";
import type { Stmt } from "./store";
import { NO_OF, serialOctets, serialText, type BlobValue } from "./cert-keys";

export const NOTIFY_CONFIG = "notifications";

export interface StoredTarget {
  url: string;
  format: "json" | "slack";
  /** Sealed JSON object of header name → value; null without headers. */
  sealed_headers: string | null;
}

export interface StoredNotifyConfig {
  targets: StoredTarget[];
  thresholds: string[];
}

export async function getNotifyConfig(db: Db, mountId: string): Promise<StoredNotifyConfig | null> {
  const rows = await db.select({ value: pkiConfig.value }).from(pkiConfig).where(and(eq(pkiConfig.mountId, mountId), eq(pkiConfig.name, NOTIFY_CONFIG)));
  return (rows[0]?.value as StoredNotifyConfig | undefined) ?? null;
}

export async function putNotifyConfig(db: Db, mountId: string, cfg: StoredNotifyConfig): Promise<void> {
  const value = cfg as unknown as Record<string, unknown>;
  await db.insert(pkiConfig).values({ mountId, name: NOTIFY_CONFIG, value }).onConflictDoUpdate({ target: [pkiConfig.mountId, pkiConfig.name], set: { value } });
}

export async function deleteNotifyConfig(db: Db, mountId: string): Promise<void> {
  await db.batch([
    db.delete(pkiConfig).where(and(eq(pkiConfig.mountId, mountId), eq(pkiConfig.name, NOTIFY_CONFIG))),
    db.delete(pkiNotifyMarks).where(eq(pkiNotifyMarks.mountId, mountId)),
  ]);
}

/** Every active mount with a notification configuration. */
export async function notifyingMounts(db: Db): Promise<{ mountId: string; path: string; config: StoredNotifyConfig }[]> {
  const rows = await db
    .select({ mountId: pkiConfig.mountId, path: mounts.path, value: pkiConfig.value })
    .from(pkiConfig)
    .innerJoin(mounts, and(eq(mounts.id, pkiConfig.mountId), eq(mounts.state, "active")))
    .where(eq(pkiConfig.name, NOTIFY_CONFIG));
  return rows.map((r) => ({ mountId: r.mountId, path: r.path, config: r.value as unknown as StoredNotifyConfig }));
}

// -- scanning ---------------------------------------------------------------------------------

export interface Mark {
  notAfter: number;
  serial: string;
}

export async function getMarks(db: Db, mountId: string): Promise<Map<string, Mark>> {
  const rows = await db.select().from(pkiNotifyMarks).where(eq(pkiNotifyMarks.mountId, mountId));
  return new Map(rows.map((r) => [r.threshold, { notAfter: r.notAfter, serial: r.serial }]));
}

export const putMarkStmt = (db: Db, mountId: string, threshold: string, m: Mark): Stmt =>
  db
    .insert(pkiNotifyMarks)
    .values({ mountId, threshold, notAfter: m.notAfter, serial: m.serial })
    .onConflictDoUpdate({ target: [pkiNotifyMarks.mountId, pkiNotifyMarks.threshold], set: { notAfter: m.notAfter, serial: m.serial } });

export interface DueCert {
  serial: string;
  common_name: string | null;
  not_after: number;
  not_before: number | null;
  created_at: number;
  revoked_at: number | null;
}

/**
 * Certificates after `mark` (in (not_after, serial) order) whose not_after is at most `until`:
 * a range of the index pki_certs_inv_not_after from the mark's not_after, ties in not_after
 * sorted by serial (octets, in colon hex's order: src/core/db/schema/pki-serial.ts) one
 * not_after at a time, so the marks of pki_notify_marks (colon hex) keep their meaning.
 */
export async function certsAfterMark(db: Db, mountId: string, mark: Mark, until: number, limit: number): Promise<DueCert[]> {
  const res = await db.$client
    .prepare(
      `SELECT serial, common_name, not_after, not_before, created_at, revoked_at FROM pki_certs WHERE mount_no = ${NO_OF} AND not_after >= ? AND (not_after, serial) > (?, ?) AND not_after <= ? ORDER BY not_after, serial LIMIT ?`,
    )
    .bind(mountId, mark.notAfter, mark.notAfter, serialOctets(mark.serial), until, limit)
    .all<Omit<DueCert, "serial"> & { serial: BlobValue }>();
  return res.results.map((r) => ({ ...r, serial: serialText(r.serial) }));
}

/** The mount's issuers, not_after in Unix seconds (pki_issuers keeps milliseconds). */
export async function issuersOf(db: Db, mountId: string): Promise<{ id: string; name: string; serial: string; certificate: string; notAfter: number; revoked: boolean }[]> {
  const rows = await db
    .select({ id: pkiIssuers.id, name: pkiIssuers.name, serial: pkiIssuers.serial, certificate: pkiIssuers.certificate, notAfter: pkiIssuers.notAfter, revoked: pkiIssuers.revoked })
    .from(pkiIssuers)
    .where(eq(pkiIssuers.mountId, mountId));
  return rows.map((r) => ({ ...r, notAfter: Math.floor(r.notAfter / 1000) }));
}

export type NotifyRow = typeof pkiNotifySent.$inferSelect;
export type NewNotifyRow = Omit<NotifyRow, "state" | "attempts" | "lastError" | "sentAt">;

interface SentColumns {
  mount_id: string;
  serial: string;
  threshold: string;
  target: string;
  kind: string;
  mount_path: string;
  common_name: string;
  not_after: number;
  state: string;
  attempts: number;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  sent_at: number | null;
}

const fromColumns = (r: SentColumns): NotifyRow => ({
  mountId: r.mount_id,
  serial: r.serial,
  threshold: r.threshold,
  target: r.target,
  kind: r.kind,
  mountPath: r.mount_path,
  commonName: r.common_name,
  notAfter: r.not_after,
  state: r.state,
  attempts: r.attempts,
  lastError: r.last_error,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  sentAt: r.sent_at,
});

/**
 * Inserts the rows not yet recorded and returns those it inserted (the ones to queue): one
 * statement however many rows, the rows bound once as a JSON array (D1 allows 100 bound
 * parameters, and a statement a page keeps the scan's share of the invocation's queries small).
 */
export async function recordNotifications(db: Db, rows: NewNotifyRow[]): Promise<NotifyRow[]> {
  if (rows.length === 0) return [];
  const res = await db.$client
    .prepare(
      `INSERT INTO pki_notify_sent (mount_id, serial, threshold, target, kind, mount_path, common_name, not_after, state, attempts, last_error, created_at, updated_at, sent_at)
       SELECT value ->> 'mountId', value ->> 'serial', value ->> 'threshold', value ->> 'target', value ->> 'kind', value ->> 'mountPath',
              value ->> 'commonName', value ->> 'notAfter', 'pending', 0, NULL, value ->> 'createdAt', value ->> 'updatedAt', NULL
       FROM json_each(?) WHERE true
       ON CONFLICT DO NOTHING
       RETURNING *`,
    )
    .bind(JSON.stringify(rows))
    .all<SentColumns>();
  return res.results.map(fromColumns);
}

export interface NotifyKey {
  mountId: string;
  serial: string;
  threshold: string;
  target: string;
}

const keyWhere = (k: NotifyKey) =>
  and(eq(pkiNotifySent.mountId, k.mountId), eq(pkiNotifySent.serial, k.serial), eq(pkiNotifySent.threshold, k.threshold), eq(pkiNotifySent.target, k.target));

export async function getNotification(db: Db, k: NotifyKey): Promise<NotifyRow | null> {
  return (await db.select().from(pkiNotifySent).where(keyWhere(k)))[0] ?? null;
}

export async function markSent(db: Db, k: NotifyKey, now: number): Promise<void> {
  await db
    .update(pkiNotifySent)
    .set({ state: "sent", sentAt: now, updatedAt: now, attempts: sql`${pkiNotifySent.attempts} + 1`, lastError: null })
    .where(keyWhere(k));
}

export async function markAttempt(db: Db, k: NotifyKey, now: number, error: string): Promise<number> {
  const rows = await db
    .update(pkiNotifySent)
    .set({ updatedAt: now, attempts: sql`${pkiNotifySent.attempts} + 1`, lastError: error })
    .where(and(keyWhere(k), eq(pkiNotifySent.state, "pending")))
    .returning({ attempts: pkiNotifySent.attempts });
  return rows[0]?.attempts ?? 0;
}

/** A notification that cannot be sent any more (its target or configuration was removed). */
export async function markDropped(db: Db, k: NotifyKey, now: number, why: string): Promise<void> {
  await db.update(pkiNotifySent).set({ state: "dropped", updatedAt: now, lastError: why }).where(and(keyWhere(k), eq(pkiNotifySent.state, "pending")));
}

/**
 * Pending rows untouched since `before` (their message was lost: a failed send, or dead-lettered);
 * touched again now, so the next sweep leaves them to the message this sweep queues.
 */
export async function claimStalePending(db: Db, before: number, now: number, limit: number): Promise<NotifyRow[]> {
  const stale = await db
    .select()
    .from(pkiNotifySent)
    .where(and(eq(pkiNotifySent.state, "pending"), lt(pkiNotifySent.updatedAt, before)))
    .orderBy(asc(pkiNotifySent.updatedAt))
    .limit(limit);
  const out: NotifyRow[] = [];
  for (const r of stale) {
    const claimed = await db
      .update(pkiNotifySent)
      .set({ updatedAt: now })
      .where(and(keyWhere(r), eq(pkiNotifySent.state, "pending"), eq(pkiNotifySent.updatedAt, r.updatedAt)))
      .returning({ serial: pkiNotifySent.serial });
    if (claimed.length > 0) out.push({ ...r, updatedAt: now });
  }
  return out;
}

/** The notification rows of a mount, for mount removal. */
export function purgeNotifyStmts(db: Db, mountId: string): Stmt[] {
  return [db.delete(pkiNotifySent).where(eq(pkiNotifySent.mountId, mountId)), db.delete(pkiNotifyMarks).where(eq(pkiNotifyMarks.mountId, mountId))];
}
