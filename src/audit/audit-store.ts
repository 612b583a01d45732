/**
 * Storage of audit devices: the only module that touches the `audit_devices` table
 * (src/core/db/schema/audit.ts), and the per-isolate cache of the enabled devices that the
 * request path reads.
 *
 * The cache (auditing costs no D1 round trip of its own): the device list is kept per isolate for
 * at most DEVICE_CACHE_MS (1 s), or CACHE_TTL_MS when that is shorter (src/core/read-cache.ts; 0:
 * read on every request). When it is stale, the request pipeline adds `deviceListQuery` to the batch of
 * its read-model misses (src/app/resolve.ts; alone when nothing else missed), and hands the rows to
 * `absorbDeviceRows`; so reading the devices never costs a round trip of its own, and with no
 * device enabled a request pays only the freshness check (and, once a second per isolate, one
 * extra statement in that batch). Enabling or disabling a device invalidates the "audit" area of
 * the isolate that did it (which also makes layer 0's public answers, src/core/public-answers.ts,
 * unusable); other isolates see the change within DEVICE_CACHE_MS (docs/audit.md).
 * Salts are unsealed once per sealed text and kept with the cache; they never leave the Worker.
 * Measured (Workers pool, KV read with the root token, wrapping env.DB): 50 reads = 50 D1 batches
 * of 5 statements with or without a device; the device-list statement rode in 20 of them over
 * the 10.5 s they took (a loaded machine, ~200 ms a request). With one device the hook adds ~0.12 ms of CPU (two entries HMAC'd and serialized) plus
 * two awaited Queue sends (the request entry before the work, the response entry after).
 */
import { BoundedCache } from "../core/bounded-cache";
import { generationOf, invalidate, ReadCache } from "../core/read-cache";
import { eq, sql } from "drizzle-orm";
import { loadConfig } from "../core/config";
import { openDb, type Db } from "../core/db/client";
import { auditDevices } from "../core/db/schema";
import { seal, unseal, type SealKeys } from "../core/db/seal";
import type { AuditDeliveryTarget, AuditDevice, AuditDeviceType } from "./types";

export const DEVICE_CACHE_MS = 1000;

type DeviceRow = typeof auditDevices.$inferSelect;

const saltContext = (id: string) => `audit_devices:${id}:salt`;
const headersContext = (id: string) => `audit_devices:${id}:headers`;

/** Read-back value of every header of an http device: header values are never read back. */
export const MASKED = "********";

/** Where audit devices keep sealed values (their HMAC salts), for the seal check at start. */
export const AUDIT_SEALED_COLUMN = { table: "audit_devices", column: "sealed_salt" } as const;

/**
 * The one list of enabled devices (key ""), area "audit". No early re-read: the list is asked for
 * twice per request (layer 0 in src/app/dispatch.ts, then the trail) and only the trail reads it,
 * so a re-read taken by the first would only turn layer 0 away.
 */
const devicesCache = new ReadCache<AuditDevice[]>("audit.devices", "audit", 1, { maxAgeMs: DEVICE_CACHE_MS, refreshAhead: false });
// Unsealed salts by sealed text: a sealed value opens to one salt only, so this never goes stale.
const salts = new BoundedCache<string>("audit.salts", 256);

/** The enabled devices if the isolate's copy is fresh, else undefined (then read them). */
export function cachedDevices(now = Date.now()): AuditDevice[] | undefined {
  return devicesCache.get("", now);
}

/** The isolate's last copy however old, for refused requests that never reached the batch. */
export function lastKnownDevices(): AuditDevice[] | undefined {
  return devicesCache.last("");
}

/** The unexecuted read of every device, for the request's first D1 batch. */
export const deviceListQuery = (db: Db) => db.select().from(auditDevices).orderBy(auditDevices.path);

/**
 * Rows of `deviceListQuery` → devices (salts unsealed), stored as the isolate's fresh copy unless
 * an enable or disable in this isolate overtook the read: `generation` is the "audit" generation
 * taken before the read (by default the current one, which keeps whatever was read).
 */
export async function absorbDeviceRows(keys: SealKeys, rows: DeviceRow[], readAt = Date.now(), generation = generationOf("audit")): Promise<AuditDevice[]> {
  const devices = await Promise.all(rows.map((r) => toDevice(keys, r)));
  devicesCache.set("", devices, readAt, generation);
  return devices;
}

/** The enabled devices: the cached copy when fresh, else one read. */
export async function loadDevices(db: Db, keys: SealKeys): Promise<AuditDevice[]> {
  const fresh = cachedDevices();
  if (fresh) return fresh;
  const at = Date.now();
  const generation = generationOf("audit");
  return absorbDeviceRows(keys, await deviceListQuery(db), at, generation);
}

async function toDevice(keys: SealKeys, r: DeviceRow): Promise<AuditDevice> {
  let salt = salts.get(r.sealedSalt);
  if (salt === undefined) {
    salt = await unseal(keys, r.sealedSalt, saltContext(r.id));
    salts.set(r.sealedSalt, salt);
  }
  const options: AuditDevice["options"] = { ...r.options };
  if (r.sealedHeaders !== null) options.headers = await maskedHeaders(keys, r);
  const flag = (name: string, dflt: boolean) => {
    const v = r.options[name];
    return v === undefined ? dflt : parseBool(v) ?? dflt;
  };
  return {
    id: r.id,
    path: r.path,
    type: r.type as AuditDeviceType,
    description: r.description,
    options,
    local: r.local,
    salt,
    logRaw: flag("log_raw", false),
    hmacAccessor: flag("hmac_accessor", true),
    elideListResponses: flag("elide_list_responses", false),
  };
}

async function maskedHeaders(keys: SealKeys, r: DeviceRow): Promise<Record<string, string>> {
  if (r.sealedHeaders === null) return {};
  const names = Object.keys(JSON.parse(await unseal(keys, r.sealedHeaders, headersContext(r.id))) as Record<string, string>);
  return Object.fromEntries(names.map((n) => [n, MASKED]));
}

/** Go's strconv.ParseBool, which Vault uses for device options; null when not a boolean. */
export function parseBool(v: string): boolean | null {
  if (["1", "t", "T", "true", "TRUE", "True"].includes(v)) return true;
  if (["0", "f", "F", "false", "FALSE", "False"].includes(v)) return false;
  return null;
}

export interface NewDevice {
  path: string;
  type: AuditDeviceType;
  description: string;
  options: Record<string, string>;
  headers: Record<string, string> | null;
  local: boolean;
}

/**
 * Enables a device: one conditional insert (the unique path index is the guard, so two
 * concurrent enables of one path cannot both succeed). False when the path is in use.
 */
export async function insertDevice(db: Db, keys: SealKeys, d: NewDevice): Promise<boolean> {
  const id = crypto.randomUUID();
  const salt = crypto.randomUUID();
  const rows = await db
    .insert(auditDevices)
    .values({
      id,
      path: d.path,
      type: d.type,
      description: d.description,
      options: d.options,
      sealedHeaders: d.headers ? await seal(keys, JSON.stringify(d.headers), headersContext(id)) : null,
      local: d.local,
      sealedSalt: await seal(keys, salt, saltContext(id)),
      createdAt: Date.now(),
    })
    .onConflictDoNothing()
    .returning({ id: auditDevices.id });
  invalidate("audit");
  return rows.length > 0;
}

/** Disables the device at `path` (Vault: no error when there is none). */
export async function deleteDevice(db: Db, path: string): Promise<void> {
  await db.delete(auditDevices).where(eq(auditDevices.path, path));
  invalidate("audit");
}

/** The device at `path`, read now (sys/audit-hash must see a device enabled a moment ago). */
export async function deviceAt(db: Db, keys: SealKeys, path: string): Promise<AuditDevice | null> {
  const rows = await db.select().from(auditDevices).where(eq(auditDevices.path, path));
  return rows[0] ? toDevice(keys, rows[0]) : null;
}

/** Every device, read now (sys/audit list). */
export async function listDevices(db: Db, keys: SealKeys): Promise<AuditDevice[]> {
  return Promise.all((await deviceListQuery(db)).map((r) => toDevice(keys, r)));
}

/**
 * What the delivery side needs to send a device's entries: address and unsealed headers (http)
 * or prefix (r2). Null when the device is gone (disabled since the entries were queued) or is a
 * stdout device (never queued).
 */
export async function deliveryTarget(env: Env, id: string): Promise<AuditDeliveryTarget | null> {
  const db = openDb(env.DB);
  const keys = loadConfig(env).seal;
  const rows = await db.select().from(auditDevices).where(eq(auditDevices.id, id));
  const r = rows[0];
  if (!r || (r.type !== "http" && r.type !== "r2")) return null;
  const compress = parseBool(r.options.compress ?? "false") === true;
  if (r.type === "r2") return { id: r.id, path: r.path, type: "r2", prefix: r.options.prefix ?? "audit/", compress };
  const headers = r.sealedHeaders === null ? {} : (JSON.parse(await unseal(keys, r.sealedHeaders, headersContext(r.id))) as Record<string, string>);
  return { id: r.id, path: r.path, type: "http", address: r.options.address ?? "", headers, compress };
}

/** sys/metrics: enabled devices per type, one GROUP BY (nothing sealed is read). */
export async function deviceCounts(db: Db): Promise<{ type: string; n: number }[]> {
  return db.select({ type: auditDevices.type, n: sql<number>`count(*)` }).from(auditDevices).groupBy(auditDevices.type);
}
