/**
 * The R2 work of a storage snapshot (./snapshot-objects.ts), done in batches by the `SnapshotIo`
 * Durable Object on the Worker's behalf.
 *
 * Why: every binding call a Worker makes counts against its subrequests per invocation (10,000
 * on Workers Paid in the current table, https://developers.cloudflare.com/workers/platform/limits/#subrequests).
 * One R2 get per body to save and one put per body to restore, all inside the one snapshot
 * request, held a snapshot to a few thousand certificate bodies. A call to a Durable Object is
 * one subrequest for the Worker, and the Workers limits apply to an object per request it
 * receives (https://developers.cloudflare.com/durable-objects/platform/limits/: "Durable Objects
 * are a special kind of Worker"), so each call brings its own budget. The Worker
 * makes one call per batch of up to BATCH bodies: `list` (one page of keys, LIST_LIMIT), `read`
 * (a batch of bodies, IO_CONCURRENCY gets in flight inside the object) and `write` (a batch of
 * puts, the same). The objects are named `snapshot-io-<k>`, k rotating over INSTANCES, so a
 * snapshot's calls in flight (./snapshot-objects.ts AHEAD) go to different objects and run at
 * once.
 *
 * Invariants:
 * - **The objects hold no state**: no storage, nothing kept between calls. Any instance can
 *   serve any call, a call may be retried on another, and an instance that restarts loses
 *   nothing. The class is declared with `new_sqlite_classes` like the others only because that
 *   is how a Durable Object class is declared now; its storage stays empty.
 * - **Every call is idempotent**: a read reads, a write puts the snapshot's bytes under their key
 *   (a key names one certificate, ./snapshot-objects.ts), so a call the runtime reports as
 *   failed but retryable (`retryable`, https://developers.cloudflare.com/durable-objects/best-practices/error-handling/)
 *   is made once more.
 * - **The object acts on the binding named by the section**, in its own env: the same bucket as
 *   the Worker's binding of that name. So the Worker hands a section to the object only when the
 *   bucket it holds is that binding itself (an R2 binding object); a wrapper or substitute (a
 *   test's double) is called directly, as is every bucket when the deployment has no
 *   SNAPSHOT_IO binding (a wrangler.toml from before it): the bound then is the one before it,
 *   docs/operations.md "Snapshots".
 * - This layer names no engine: the route chooses the buckets (src/app/sys/snapshot-routes.ts).
 */
import { DurableObject } from "cloudflare:workers";
import { bytesToBase64 } from "../encoding";

/** One object as it travels in a snapshot: key, base64 body, content type. */
export type SnapshotItem = [string, string, string | null];
/** One object to put: key, bytes, content type. */
export type PutItem = [string, Uint8Array, string | null];
/** A listed page: each object's key and size, and the cursor of the next page (null: the last). */
export interface ListedPage {
  objects: { key: string; size: number }[];
  cursor: string | null;
}

/** Keys per list call (R2 returns at most 1000: https://developers.cloudflare.com/r2/api/workers/workers-api-reference/#r2listoptions). */
export const LIST_LIMIT = 1000;
/** Objects per read or write call at most (a snapshot's items line holds at most this many). */
export const BATCH = 500;
/** Gets or puts in flight at once within one call. */
export const IO_CONCURRENCY = 16;
/** Objects a snapshot's calls rotate over. */
export const INSTANCES = 8;

/** The calls a snapshot makes on a bucket, directly or through the Durable Object. */
export interface ObjectIo {
  list(cursor: string | null): Promise<ListedPage>;
  /** The bodies of `keys`, in order; null for a key no longer there (tidy deleted it). */
  read(keys: string[]): Promise<(SnapshotItem | null)[]>;
  write(items: PutItem[]): Promise<void>;
}

/** A bucket whose objects a snapshot carries, under the section name the snapshot gives it. */
export interface ObjectSection {
  /** The section's name, which is also the name of the bucket's binding (the object resolves it by name). */
  name: string;
  bucket: R2Bucket;
  /** The SnapshotIo namespace (binding SNAPSHOT_IO); absent: the bucket is called directly. */
  io?: DurableObjectNamespace<SnapshotIo> | undefined;
}

/** `fn` over `items`, at most `limit` at once, results in order; after a failure no new call starts. */
export async function pooled<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  const worker = async () => {
    for (let i = next++; i < items.length && !failed; i = next++) {
      try {
        out[i] = await fn(items[i] as T);
      } catch (e) {
        failed = true;
        throw e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

async function listPage(bucket: R2Bucket, cursor: string | null): Promise<ListedPage> {
  const listed = await bucket.list({ limit: LIST_LIMIT, ...(cursor === null ? {} : { cursor }) });
  return { objects: listed.objects.map((o) => ({ key: o.key, size: o.size })), cursor: listed.truncated ? listed.cursor : null };
}

async function readItems(bucket: R2Bucket, keys: string[]): Promise<(SnapshotItem | null)[]> {
  return pooled(keys, IO_CONCURRENCY, async (key): Promise<SnapshotItem | null> => {
    const body = await bucket.get(key);
    return body ? [key, bytesToBase64(new Uint8Array(await body.arrayBuffer())), body.httpMetadata?.contentType ?? null] : null;
  });
}

async function writeItems(bucket: R2Bucket, items: PutItem[]): Promise<void> {
  await pooled(items, IO_CONCURRENCY, ([key, body, type]) => bucket.put(key, body, type === null ? {} : { httpMetadata: { contentType: type } }));
}

/** The calls made on the bucket itself, each body one R2 call of the caller's. */
export const directIo = (bucket: R2Bucket): ObjectIo => ({
  list: (cursor) => listPage(bucket, cursor),
  read: (keys) => readItems(bucket, keys),
  write: (items) => writeItems(bucket, items),
});

/** An R2 binding itself (workerd's R2Bucket), not a wrapper or a double of one. */
const isBinding = (v: unknown): v is R2Bucket => typeof v === "object" && v !== null && Object.prototype.toString.call(v) === "[object R2Bucket]";

/** A call once more when the runtime says it may succeed (an object reset, an overload). */
async function retryOnce<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (e) {
    if ((e as { retryable?: unknown } | null)?.retryable !== true) throw e;
    return call();
  }
}

/** The calls made through SnapshotIo objects, k rotating from a random start (spread across concurrent snapshots). */
function viaObjects(ns: DurableObjectNamespace<SnapshotIo>, binding: string): ObjectIo {
  let k = Math.floor(Math.random() * INSTANCES);
  const stub = () => ns.get(ns.idFromName(`snapshot-io-${k++ % INSTANCES}`));
  return {
    list: (cursor): Promise<ListedPage> => retryOnce(() => stub().list(binding, cursor)),
    read: (keys) => retryOnce(() => stub().read(binding, keys)) as Promise<(SnapshotItem | null)[]>,
    write: (items) => retryOnce(() => stub().write(binding, items)),
  };
}

/** How a snapshot reaches a section's bucket: through the objects when it can (see the invariants), else directly. */
export function objectIo(section: ObjectSection): ObjectIo {
  return section.io !== undefined && isBinding(section.bucket) ? viaObjects(section.io, section.name) : directIo(section.bucket);
}

/**
 * The Durable Object (binding SNAPSHOT_IO, wrangler.toml): stateless batches of R2 calls on the
 * bucket bound under the name given. Its callers are ./snapshot-objects.ts only.
 */
export class SnapshotIo extends DurableObject<Env> {
  private bucket(name: string): R2Bucket {
    const b = (this.env as unknown as Record<string, unknown>)[name];
    if (!isBinding(b)) throw new Error(`snapshot io: no R2 bucket is bound as ${name.slice(0, 64)}`);
    return b;
  }

  private static batch<T>(items: T[]): T[] {
    if (items.length > BATCH) throw new Error(`snapshot io: ${items.length} objects in one call, over ${BATCH}`);
    return items;
  }

  list(binding: string, cursor: string | null): Promise<ListedPage> {
    return listPage(this.bucket(binding), cursor);
  }

  read(binding: string, keys: string[]): Promise<(SnapshotItem | null)[]> {
    return readItems(this.bucket(binding), SnapshotIo.batch(keys));
  }

  write(binding: string, items: PutItem[]): Promise<void> {
    return writeItems(this.bucket(binding), SnapshotIo.batch(items));
  }
}
