/**
 * The storage snapshot's R2 work goes through the SnapshotIo Durable Object in batches
 * (src/core/db/snapshot-io.ts; docs/operations.md "Snapshots", "Up to what size"). The CERTS
 * bucket is seeded straight with 2.5 batches of bodies (random bytes of varied sizes, a few
 * content types), then the snapshot is saved and, into an emptied bucket, restored, the Worker's
 * CERTS and SNAPSHOT_IO bindings wrapped in counters (the seam: app.fetch with those bindings,
 * each wrapper calling the real binding): the Worker makes no R2 call of its own, and one
 * Durable Object call per batch plus one per listed page; every body comes back byte for byte
 * with its content type. Without the SNAPSHOT_IO binding (a wrangler.toml from before it) the
 * same save makes one R2 get per body itself. A write call that fails mid-restore fails it with
 * 503 before the swap: D1 as it was, staging dropped; restoring again completes.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app/app";
import { BATCH, LIST_LIMIT, type SnapshotIo } from "../../src/core/db/snapshot-io";
import { ROOT, write } from "../helpers/api";
import { dumpTables } from "../helpers/db-dump";

const N = Math.floor(BATCH * 2.5);
const bytesOf = async (s: ReadableStream<Uint8Array>) => new Uint8Array(await new Response(s).arrayBuffer());
const gunzip = (b: Uint8Array) => bytesOf(new Blob([b]).stream().pipeThrough(new DecompressionStream("gzip")));
const hex = (b: ArrayBuffer | Uint8Array) => Buffer.from(b instanceof Uint8Array ? b : new Uint8Array(b)).toString("hex");
/** Thousands of R2 calls to seed and compare: ~20 s on an idle 2-core machine, several times that on a loaded one. */
const SLOW = 180_000;
const TYPES = ["application/pkix-cert", null, "application/octet-stream"] as const;

const dump = dumpTables;

/** Every object of the CERTS bucket: key → hex of its bytes and its content type. */
async function bucket(): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  let cursor: string | undefined;
  do {
    const page = await env.CERTS.list(cursor ? { cursor } : {});
    for (const o of page.objects) {
      const obj = await env.CERTS.get(o.key);
      out.set(o.key, obj ? `${hex(await obj.arrayBuffer())} ${obj.httpMetadata?.contentType ?? "-"}` : "");
    }
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return out;
}

async function emptyBucket(): Promise<void> {
  const keys = [...(await bucket()).keys()];
  for (let i = 0; i < keys.length; i += 1000) await env.CERTS.delete(keys.slice(i, i + 1000));
}

interface Counts {
  r2: Record<string, number>;
  io: Record<string, number>;
}

/** The real CERTS binding, each method call counted (a Proxy: still the binding to the code under test). */
function countedCerts(counts: Counts): R2Bucket {
  return new Proxy(env.CERTS, {
    get(target, prop) {
      const v: unknown = Reflect.get(target, prop);
      if (typeof v !== "function") return v;
      return (...args: unknown[]) => {
        counts.r2[String(prop)] = (counts.r2[String(prop)] ?? 0) + 1;
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/** The real SNAPSHOT_IO namespace, each call to an object counted; `fail` may throw instead of a call. */
function countedIo(counts: Counts, fail?: (method: string, n: number) => Error | null): DurableObjectNamespace<SnapshotIo> {
  const ns = env.SNAPSHOT_IO;
  const call = (stub: DurableObjectStub<SnapshotIo>, method: "list" | "read" | "write") => (...args: unknown[]) => {
    const n = (counts.io[method] = (counts.io[method] ?? 0) + 1);
    const error = fail?.(method, n);
    if (error) return Promise.reject(error);
    return (stub[method] as (...a: unknown[]) => Promise<unknown>)(...args);
  };
  return {
    idFromName: (name: string) => ns.idFromName(name),
    get: (id: DurableObjectId) => {
      const stub = ns.get(id);
      return { list: call(stub, "list"), read: call(stub, "read"), write: call(stub, "write") };
    },
  } as unknown as DurableObjectNamespace<SnapshotIo>;
}

const fresh = (): Counts => ({ r2: {}, io: {} });
const total = (r: Record<string, number>) => Object.values(r).reduce((a, b) => a + b, 0);

async function saveWith(bindings: Partial<Env>): Promise<Uint8Array> {
  const ctx = createExecutionContext();
  const res = await app.fetch(new Request("http://x/v1/sys/storage/raft/snapshot", { headers: { "x-service-token": ROOT } }), { ...env, ...bindings }, ctx);
  expect(res.status).toBe(200);
  const snap = new Uint8Array(await res.arrayBuffer());
  await waitOnExecutionContext(ctx);
  return snap;
}

async function restoreWith(snap: Uint8Array, bindings: Partial<Env>): Promise<{ status: number; text: string }> {
  const ctx = createExecutionContext();
  const res = await app.fetch(new Request("http://x/v1/sys/storage/raft/snapshot", { method: "POST", headers: { "x-service-token": ROOT }, body: snap }), { ...env, ...bindings }, ctx);
  const text = await res.text();
  await waitOnExecutionContext(ctx);
  return { status: res.status, text };
}

/** The snapshot's object items: key → hex of the body and its content type, as bucket() gives them. */
async function itemsOf(snap: Uint8Array): Promise<Map<string, string>> {
  const lines = new TextDecoder().decode(await gunzip(snap)).trimEnd().split("\n");
  const items = lines.filter((l) => l.startsWith('{"items"')).flatMap((l) => (JSON.parse(l) as { items: [string, string, string | null][] }).items);
  return new Map(items.map(([k, b, t]) => [k, `${hex(Uint8Array.from(atob(b), (c) => c.charCodeAt(0)))} ${t ?? "-"}`]));
}

let seeded: Map<string, string>;
let snap: Uint8Array;

describe("storage snapshots: R2 in batches through the SnapshotIo Durable Object", () => {
  it(`saves and restores ${N} bodies (2.5 batches) with no R2 call of the Worker's and one object call per batch`, async () => {
    await write("sys/mounts/kv-io", { type: "kv", options: { version: "2" } }, {}, 204);
    await write("kv-io/data/a", { data: { v: "before" } });
    for (let i = 0; i < N; i += 50) {
      await Promise.all(Array.from({ length: Math.min(50, N - i) }, (_, j) => {
        const n = i + j;
        const body = crypto.getRandomValues(new Uint8Array(200 + ((n * 37) % 1500)));
        const type = TYPES[n % TYPES.length] ?? null;
        return env.CERTS.put(`mount-${n % 3}/${n.toString(16).padStart(4, "0")}`, body, type === null ? {} : { httpMetadata: { contentType: type } });
      }));
    }
    seeded = await bucket();
    expect(seeded.size).toBe(N);

    const saving = fresh();
    snap = await saveWith({ CERTS: countedCerts(saving), SNAPSHOT_IO: countedIo(saving) });
    expect(saving.r2).toEqual({});
    expect(saving.io.read).toBe(Math.ceil(N / BATCH));
    expect(saving.io.list).toBe(Math.ceil(N / LIST_LIMIT));
    expect(total(saving.io)).toBeLessThanOrEqual(Math.ceil(N / BATCH) + Math.ceil(N / LIST_LIMIT));
    expect(await itemsOf(snap)).toEqual(seeded);

    const before = await dump();
    await emptyBucket();
    await write("kv-io/data/a", { data: { v: "after" } });
    const restoring = fresh();
    const r = await restoreWith(snap, { CERTS: countedCerts(restoring), SNAPSHOT_IO: countedIo(restoring) });
    expect(r.status, r.text).toBe(204);
    expect(restoring.r2).toEqual({});
    expect(restoring.io).toEqual({ write: Math.ceil(N / BATCH) });
    expect(await bucket()).toEqual(seeded);
    expect(await dump()).toEqual(before);
  }, SLOW);

  it("without the SNAPSHOT_IO binding the Worker makes the R2 calls itself, one get per body, and the snapshot is the same", async () => {
    const direct = fresh();
    const again = await saveWith({ CERTS: countedCerts(direct), SNAPSHOT_IO: undefined });
    expect(direct.r2.get).toBe(N);
    expect(direct.r2.list).toBe(Math.ceil(N / LIST_LIMIT));
    expect(direct.io).toEqual({});
    expect(await itemsOf(again)).toEqual(seeded);
  });

  it("a write call that fails mid-restore: 503, D1 as it was, staging dropped; restoring again completes", async () => {
    await emptyBucket();
    await write("kv-io/data/a", { data: { v: "late" } });
    const before = await dump();
    const counts = fresh();
    const failing = countedIo(counts, (method, n) => (method === "write" && n === 2 ? new Error("the object is unavailable") : null));
    const failed = await restoreWith(snap, { SNAPSHOT_IO: failing });
    expect(failed.status, failed.text).toBe(503);
    expect(failed.text).toMatch(/writing the bodies of CERTS.*the object is unavailable.*the database was not changed/);
    expect(counts.io.write).toBeLessThanOrEqual(Math.ceil(N / BATCH));
    expect(await dump()).toEqual(before);
    const left = await env.DB.prepare(String.raw`SELECT count(*) AS n FROM sqlite_master WHERE name LIKE 'lanyard\_restore\_%' ESCAPE '\'`).first<{ n: number }>();
    expect(left?.n).toBe(0);

    const r = await restoreWith(snap, {});
    expect(r.status, r.text).toBe(204);
    expect(await bucket()).toEqual(seeded);
  }, SLOW);
});
