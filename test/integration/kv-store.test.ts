/**
 * The CAS invariant of src/engines/kv/store.ts, exercised on the store directly: a writer that read a
 * stale current version changes nothing at all, whatever happened in between.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { openDb } from "../../src/core/db/client";
import { deleteKey, getMetadata, listVersions, writeVersion, type WriteVersionInput } from "../../src/engines/kv/store";

const keys = { current: "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=" };

/**
 * A KV mount row to write under: the store's tables accept rows only for an active mount
 * (migrations/0006_lifecycle_states.sql).
 */
async function newMount(): Promise<string> {
  const id = crypto.randomUUID();
  await env.DB.prepare(
    `INSERT INTO mounts (id, namespace_id, path, type, accessor, description, options, default_lease_ttl, max_lease_ttl, created_at)
     VALUES (?, 'root', ?, 'kv', ?, '', '{"version":"2"}', 0, 0, ?)`,
  )
    .bind(id, `kvstore-${id}/`, `kv_${id.slice(0, 8)}`, Date.now())
    .run();
  return id;
}

function input(mountId: string, expectedCurrent: number, oldestVersion = 0): WriteVersionInput {
  return { mountId, path: "k", expectedCurrent, data: { n: String(expectedCurrent + 1) }, createdTime: Date.now(), deletionTime: null, oldestVersion };
}

describe("kv store: versioned writes", () => {
  it("writes version N+1 only when the current version is still N", async () => {
    const db = openDb(env.DB);
    const mountId = await newMount();
    expect(await writeVersion(db, keys, input(mountId, 0))).toEqual({ ok: true, version: 1, extra: [] });
    // A second writer that also read "no key" loses and leaves no trace.
    expect(await writeVersion(db, keys, input(mountId, 0))).toEqual({ ok: false, conflict: true, extra: [] });
    expect(await writeVersion(db, keys, input(mountId, 1))).toEqual({ ok: true, version: 2, extra: [] });
    expect(await writeVersion(db, keys, input(mountId, 1))).toEqual({ ok: false, conflict: true, extra: [] });
    expect((await getMetadata(db, mountId, "k"))?.currentVersion).toBe(2);
    expect((await listVersions(db, mountId, "k")).map((v) => v.version)).toEqual([1, 2]);
  });

  it("does not resurrect a key deleted after the writer read it", async () => {
    const db = openDb(env.DB);
    const mountId = await newMount();
    await writeVersion(db, keys, input(mountId, 0));
    await writeVersion(db, keys, input(mountId, 1));
    await deleteKey(db, mountId, "k");
    // This writer read current_version 2 before the delete.
    expect(await writeVersion(db, keys, input(mountId, 2, 2))).toEqual({ ok: false, conflict: true, extra: [] });
    expect(await getMetadata(db, mountId, "k")).toBeNull();
    expect(await listVersions(db, mountId, "k")).toEqual([]);
  });

  it("prunes in the same batch, and a losing writer prunes nothing", async () => {
    const db = openDb(env.DB);
    const mountId = await newMount();
    for (let n = 0; n < 3; n++) await writeVersion(db, keys, input(mountId, n));
    // A stale writer asking to prune everything below 3 loses: versions 1-3 stay.
    expect(await writeVersion(db, keys, input(mountId, 1, 3))).toEqual({ ok: false, conflict: true, extra: [] });
    expect((await listVersions(db, mountId, "k")).map((v) => v.version)).toEqual([1, 2, 3]);
    expect(await writeVersion(db, keys, input(mountId, 3, 3))).toEqual({ ok: true, version: 4, extra: [] });
    expect((await listVersions(db, mountId, "k")).map((v) => v.version)).toEqual([3, 4]);
    expect((await getMetadata(db, mountId, "k"))?.oldestVersion).toBe(3);
  });

  it("runs a companion's extra statements in the write's batch, won or lost, and returns their results", async () => {
    const db = openDb(env.DB);
    const mountId = await newMount();
    const probe = () => env.DB.prepare("SELECT current_version AS v FROM kv_metadata WHERE mount_id = ? AND path = 'k'").bind(mountId);
    const won = await writeVersion(db, keys, input(mountId, 0), [probe()]);
    // The extra statement ran after the write, in the same batch: it sees version 1.
    expect(won).toMatchObject({ ok: true, version: 1 });
    expect(won.ok && won.extra.map((r) => r.results)).toEqual([[{ v: 1 }]]);
    // A losing write still runs them (the key unchanged), and says so.
    const lost = await writeVersion(db, keys, input(mountId, 0), [probe()]);
    expect(lost).toMatchObject({ ok: false, conflict: true });
    expect(lost.extra.map((r) => r.results)).toEqual([[{ v: 1 }]]);
    // A failing extra statement fails the whole batch: the write is not kept.
    await expect(writeVersion(db, keys, input(mountId, 1), [env.DB.prepare("SELECT * FROM no_such_table")])).rejects.toThrow();
    expect((await getMetadata(db, mountId, "k"))?.currentVersion).toBe(1);
  });
});
