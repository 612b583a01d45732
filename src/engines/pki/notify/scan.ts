/**
 * The expiry notification scan (scheduled, every cron run; docs/pki-notifications.md). For each
 * mount with config/notifications and each of its thresholds T, it finds the certificates and
 * issuers newly within T of their not_after, records one pki_notify_sent row per (certificate,
 * threshold, target) and queues a message for each row it inserted (./deliver.ts sends it).
 *
 * Which certificates: not revoked, not yet expired, not an issuer of the mount (issuers have
 * their own notices, kind "issuer"), and whose lifetime exceeds T by more than LIFETIME_SLACK:
 * a certificate issued for less than the threshold never crossed it, and telling of every
 * short-lived certificate at issuance would drown the ones that matter.
 *
 * Invariants:
 * - Leaf certificates are scanned in (not_after, serial) order from a mark per (mount,
 *   threshold) (pki_notify_marks), PAGE_ROWS a page, at most MAX_PAGES pages a run over all
 *   mounts: a bounded share of the invocation's 1,000 D1 queries (4 a page), however many
 *   certificates are stored. The window ends at now + T, so the mark never passes a certificate
 *   that is not due yet.
 * - No certificate is skipped by the mark: one issued after a run began has not_after = issue
 *   time + lifetime > run start + T + LIFETIME_SLACK when it qualifies, beyond any window a run
 *   that started before it could scan (LIFETIME_SLACK bounds how long a run may take).
 * - Each notification is queued once: only the run whose INSERT created its row queues it
 *   (../storage/notify-store.ts). A row whose message was lost (a failed send, a dead letter) is
 *   re-queued once it has been pending and untouched for STALE_SECONDS (the delivery touches it
 *   on every attempt, at most 6 h apart).
 */
import { openDb, type Db } from "../../../core/db/client";
import { caCertDer } from "../x509/issuer-facts";
import { inventoryFacts } from "../x509/inventory-facts";
import {
  certsAfterMark,
  claimStalePending,
  getMarks,
  issuersOf,
  notifyingMounts,
  putMarkStmt,
  recordNotifications,
  type NewNotifyRow,
  type NotifyRow,
  type StoredNotifyConfig,
} from "../storage/notify-store";
import { runBatch } from "../storage/store";
import { targetKey, thresholdSeconds } from "./config";
import { sendNotifyMessages, type NotifyMessage } from "./queue";

export const PAGE_ROWS = 200;
export const MAX_PAGES = 50;
export const LIFETIME_SLACK = 120;
export const STALE_SECONDS = 12 * 3600;

interface MountScan {
  mountId: string;
  path: string;
  config: StoredNotifyConfig;
}

const toMessage = (r: NotifyRow): NotifyMessage => ({ mount_id: r.mountId, serial: r.serial, threshold: r.threshold, target: r.target });

/** The rows of one due (certificate or issuer, threshold), one per target; stamped with the real clock. */
function rowsFor(m: MountScan, targets: string[], base: Omit<NewNotifyRow, "mountId" | "mountPath" | "target" | "createdAt" | "updatedAt">): NewNotifyRow[] {
  const stamp = Math.floor(Date.now() / 1000);
  return targets.map((target) => ({ ...base, mountId: m.mountId, mountPath: m.path, target, createdAt: stamp, updatedAt: stamp }));
}

/** One page of one threshold's leaf scan; returns whether more may be due. */
async function scanPage(db: Db, m: MountScan, targets: string[], threshold: string, issuerSerials: Set<string>, now: number): Promise<{ queued: NotifyRow[]; more: boolean }> {
  const t = thresholdSeconds(threshold);
  const marks = await getMarks(db, m.mountId);
  const stored = marks.get(threshold);
  const mark = stored && stored.notAfter >= now ? stored : { notAfter: now, serial: "" };
  const page = await certsAfterMark(db, m.mountId, mark, now + t, PAGE_ROWS);
  const last = page.at(-1);
  if (!last) return { queued: [], more: false };
  const rows: NewNotifyRow[] = [];
  for (const c of page) {
    const lifetime = c.not_after - (c.not_before ?? Math.floor(c.created_at / 1000));
    if (c.revoked_at !== null || issuerSerials.has(c.serial) || lifetime <= t + LIFETIME_SLACK) continue;
    rows.push(...rowsFor(m, targets, { serial: c.serial, threshold, kind: "certificate", commonName: c.common_name ?? "", notAfter: c.not_after }));
  }
  const queued = await recordNotifications(db, rows);
  await runBatch(db, [putMarkStmt(db, m.mountId, threshold, { notAfter: last.not_after, serial: last.serial })]);
  return { queued, more: page.length === PAGE_ROWS };
}

/** Issuers within a threshold: few per mount, so every run offers each; the insert de-duplicates. */
async function scanIssuers(db: Db, m: MountScan, targets: string[], now: number): Promise<{ rows: NotifyRow[]; serials: Set<string> }> {
  const issuers = await issuersOf(db, m.mountId);
  const rows: NewNotifyRow[] = [];
  for (const i of issuers) {
    if (i.revoked || i.notAfter <= now) continue;
    for (const threshold of m.config.thresholds) {
      if (i.notAfter > now + thresholdSeconds(threshold)) continue;
      let cn = i.name;
      try {
        cn = inventoryFacts(caCertDer(i.certificate)).commonName;
      } catch {
        // An issuer's certificate always parses; its name stands in if one ever does not.
      }
      rows.push(...rowsFor(m, targets, { serial: i.serial, threshold, kind: "issuer", commonName: cn, notAfter: i.notAfter }));
    }
  }
  return { rows: await recordNotifications(db, rows), serials: new Set(issuers.map((i) => i.serial)) };
}

/**
 * The scheduled job: returns how many notifications it queued. `nowMs` places the expiry windows
 * (tests move it); row stamps and the re-queue of lost messages follow the real clock.
 */
export async function notifyScanJob(env: Env, nowMs = Date.now()): Promise<number> {
  const db = openDb(env.DB);
  const now = Math.floor(nowMs / 1000);
  let pages = 0;
  let queued = 0;
  for (const m of await notifyingMounts(db)) {
    const targets = await Promise.all(m.config.targets.map((t) => targetKey(t)));
    if (targets.length === 0) continue;
    const issuers = await scanIssuers(db, m, targets, now);
    await sendNotifyMessages(env, issuers.rows.map(toMessage));
    queued += issuers.rows.length;
    for (const threshold of m.config.thresholds) {
      let more = true;
      while (more && pages < MAX_PAGES) {
        pages++;
        const r = await scanPage(db, m, targets, threshold, issuers.serials, now);
        await sendNotifyMessages(env, r.queued.map(toMessage));
        queued += r.queued.length;
        more = r.more;
      }
    }
  }
  const real = Math.floor(Date.now() / 1000);
  const stale = await claimStalePending(db, real - STALE_SECONDS, real, 100);
  await sendNotifyMessages(env, stale.map(toMessage));
  return queued + stale.length;
}
