import { env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { onKvChange, type KvChangeEvent } from "../../src/engines/kv/events";
import { api, del, mount, patch, read, tokenWithPolicy, write } from "../helpers/api";

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const off of cleanups.splice(0)) off();
});

/** Collects the KV change events of one mount (listeners run via waitUntil, so tests poll). */
function recordEvents(mountPath: string): KvChangeEvent[] {
  const events: KvChangeEvent[] = [];
  cleanups.push(
    onKvChange((e) => {
      if (e.mountPath === `${mountPath}/`) events.push(e);
    }),
  );
  return events;
}

describe("kv data: write and read", () => {
  it("writes versions and reads the current one or a given one", async () => {
    const m = await mount("kv");
    const w1 = await write(`${m}/data/app/db`, { data: { user: "u", password: "hunter2" } });
    expect(w1.body.data).toEqual({
      version: 1,
      destroyed: false,
      deletion_time: "",
      custom_metadata: null,
      created_time: expect.any(String),
    });
    expect(new Date(w1.body.data.created_time).toISOString()).toBe(w1.body.data.created_time);
    // PUT is the same write as POST.
    const w2 = await api("PUT", `${m}/data/app/db`, { body: { data: { user: "u2" } } });
    expect(w2.status).toBe(200);
    expect(w2.body.data.version).toBe(2);

    const r = await read(`${m}/data/app/db`);
    expect(r.body.data.data).toEqual({ user: "u2" });
    expect(r.body.data.metadata).toEqual({
      version: 2,
      destroyed: false,
      deletion_time: "",
      custom_metadata: null,
      created_time: w2.body.data.created_time,
    });
    const r1 = await read(`${m}/data/app/db?version=1`);
    expect(r1.body.data.data).toEqual({ user: "u", password: "hunter2" });
    expect(r1.body.data.metadata.version).toBe(1);
    expect((await read(`${m}/data/app/db?version=0`)).body.data.metadata.version).toBe(2);
  });

  it("answers 404 with no errors for a missing key or version", async () => {
    const m = await mount("kv");
    expect((await read(`${m}/data/nope`, {}, 404)).body).toEqual({ errors: [] });
    await write(`${m}/data/k`, { data: { a: 1 } });
    expect((await read(`${m}/data/k?version=7`, {}, 404)).body).toEqual({ errors: [] });
  });

  it("keeps nested JSON values as written", async () => {
    const m = await mount("kv");
    const data = { s: "x", n: 1.5, b: false, nil: null, arr: [1, "two", { three: 3 }], obj: { deep: { er: "y" } } };
    await write(`${m}/data/json`, { data });
    expect((await read(`${m}/data/json`)).body.data.data).toEqual(data);
  });

  it("includes the key's custom metadata in write and read answers", async () => {
    const m = await mount("kv");
    await write(`${m}/metadata/cm`, { custom_metadata: { owner: "team-a" } }, {}, 204);
    const w = await write(`${m}/data/cm`, { data: { a: "b" } });
    expect(w.body.data.custom_metadata).toEqual({ owner: "team-a" });
    expect((await read(`${m}/data/cm`)).body.data.metadata.custom_metadata).toEqual({ owner: "team-a" });
  });
});

describe("kv data: patch", () => {
  it("merge-patches the current version into a new one", async () => {
    const m = await mount("kv");
    await write(`${m}/data/p`, { data: { a: "1", b: "2", nested: { x: "1", y: "2" } } });
    const p = await patch(`${m}/data/p`, { data: { b: null, c: "3", nested: { y: null, z: "3" } } });
    expect(p.body.data.version).toBe(2);
    expect((await read(`${m}/data/p`)).body.data.data).toEqual({ a: "1", c: "3", nested: { x: "1", z: "3" } });
  });

  it("answers 404 without a live current version and 415 without the merge-patch type", async () => {
    const m = await mount("kv");
    await patch(`${m}/data/missing`, { data: { a: "1" } }, {}, 404);
    await write(`${m}/metadata/only-meta`, { max_versions: 3 }, {}, 204);
    await patch(`${m}/data/only-meta`, { data: { a: "1" } }, {}, 404);
    await write(`${m}/data/gone`, { data: { a: "1" } });
    await del(`${m}/data/gone`);
    await patch(`${m}/data/gone`, { data: { a: "2" } }, {}, 404);
    const r = await api("PATCH", `${m}/data/gone`, { body: { data: { a: "2" } }, contentType: "application/json" });
    expect(r.status).toBe(415);
  });

  it("honours cas on patch", async () => {
    const m = await mount("kv");
    await write(`${m}/data/pc`, { data: { a: "1" } });
    const bad = await patch(`${m}/data/pc`, { data: { a: "2" }, options: { cas: 5 } }, {}, 400);
    expect(bad.body.errors).toEqual(["check-and-set parameter did not match the current version"]);
    await patch(`${m}/data/pc`, { data: { a: "2" }, options: { cas: 1 } });
    expect((await read(`${m}/data/pc`)).body.data.data).toEqual({ a: "2" });
  });
});

describe("kv data: check-and-set", () => {
  it("allows cas 0 only for a new key and requires cas to match the current version", async () => {
    const m = await mount("kv");
    await write(`${m}/data/c`, { data: { v: "1" }, options: { cas: 0 } });
    const again = await write(`${m}/data/c`, { data: { v: "x" }, options: { cas: 0 } }, {}, 400);
    expect(again.body.errors).toEqual(["check-and-set parameter did not match the current version"]);
    await write(`${m}/data/c`, { data: { v: "x" }, options: { cas: 2 } }, {}, 400);
    const ok = await write(`${m}/data/c`, { data: { v: "2" }, options: { cas: 1 } });
    expect(ok.body.data.version).toBe(2);
    expect((await read(`${m}/data/c`)).body.data.data).toEqual({ v: "2" });
  });

  it("lets exactly one of 50 concurrent writers with the same cas win", async () => {
    const m = await mount("kv");
    await write(`${m}/data/race`, { data: { n: "0" } });
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => api("POST", `${m}/data/race`, { body: { data: { n: String(i + 1) }, options: { cas: 1 } } })),
    );
    const winners = results.filter((r) => r.status === 200);
    const losers = results.filter((r) => r.status !== 200);
    expect(winners).toHaveLength(1);
    for (const l of losers) {
      expect(l.status).toBe(400);
      expect(l.body.errors).toEqual(["check-and-set parameter did not match the current version"]);
    }
    const meta = await read(`${m}/metadata/race`);
    expect(meta.body.data.current_version).toBe(2);
    expect(Object.keys(meta.body.data.versions)).toEqual(["1", "2"]);
    const winner = results.findIndex((r) => r.status === 200);
    expect((await read(`${m}/data/race`)).body.data.data).toEqual({ n: String(winner + 1) });
  });

  it("gives 50 concurrent writers without cas distinct consecutive versions", async () => {
    const m = await mount("kv");
    await write(`${m}/config`, { max_versions: 100 }, {}, 204);
    await write(`${m}/data/many`, { data: { n: "0" } });
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => api("POST", `${m}/data/many`, { body: { data: { n: String(i + 1) } } })),
    );
    for (const r of results) expect(r.status, JSON.stringify(r.body)).toBe(200);
    const versions = results.map((r) => r.body.data.version as number).sort((a, b) => a - b);
    expect(versions).toEqual(Array.from({ length: 50 }, (_, i) => i + 2));
    const meta = await read(`${m}/metadata/many`);
    expect(meta.body.data.current_version).toBe(51);
    expect(Object.keys(meta.body.data.versions)).toHaveLength(51);
    // Every version holds the data of the writer that got that version number.
    for (const r of results.slice(0, 5)) {
      const v = r.body.data.version as number;
      const data = (await read(`${m}/data/many?version=${v}`)).body.data.data;
      expect(data.n).toBe(String(results.indexOf(r) + 1));
    }
  });

  it("requires cas when the mount config or the key's metadata says so", async () => {
    const m = await mount("kv");
    await write(`${m}/config`, { cas_required: true }, {}, 204);
    const r = await write(`${m}/data/x`, { data: { a: "1" } }, {}, 400);
    expect(r.body.errors).toEqual(["check-and-set parameter required for this call"]);
    await write(`${m}/data/x`, { data: { a: "1" }, options: { cas: 0 } });
    await patch(`${m}/data/x`, { data: { a: "2" } }, {}, 400);

    const m2 = await mount("kv");
    await write(`${m2}/metadata/y`, { cas_required: true }, {}, 204);
    await write(`${m2}/data/y`, { data: { a: "1" } }, {}, 400);
    await write(`${m2}/data/y`, { data: { a: "1" }, options: { cas: 0 } });
    await write(`${m2}/data/other`, { data: { a: "1" } });
  });
});

describe("kv data: version pruning", () => {
  it("keeps max_versions versions (mount config) and moves oldest_version", async () => {
    const m = await mount("kv");
    await write(`${m}/config`, { max_versions: 3 }, {}, 204);
    for (let i = 1; i <= 5; i++) await write(`${m}/data/pr`, { data: { i: String(i) } });
    const meta = (await read(`${m}/metadata/pr`)).body.data;
    expect(meta.current_version).toBe(5);
    expect(meta.oldest_version).toBe(3);
    expect(Object.keys(meta.versions)).toEqual(["3", "4", "5"]);
    await read(`${m}/data/pr?version=2`, {}, 404);
    expect((await read(`${m}/data/pr?version=3`)).body.data.data).toEqual({ i: "3" });
    const rows = await env.DB.prepare("SELECT version FROM kv_versions WHERE path = 'pr' ORDER BY version").all<{ version: number }>();
    expect(rows.results.map((r) => r.version)).toEqual([3, 4, 5]);
  });

  it("uses the key's max_versions over the mount's and the default of 10", async () => {
    const m = await mount("kv");
    await write(`${m}/metadata/two`, { max_versions: 2 }, {}, 204);
    for (let i = 1; i <= 4; i++) await write(`${m}/data/two`, { data: { i: String(i) } });
    expect(Object.keys((await read(`${m}/metadata/two`)).body.data.versions)).toEqual(["3", "4"]);
    for (let i = 1; i <= 12; i++) await write(`${m}/data/ten`, { data: { i: String(i) } });
    const ten = (await read(`${m}/metadata/ten`)).body.data;
    expect(Object.keys(ten.versions)).toHaveLength(10);
    expect(ten.oldest_version).toBe(3);
  });
});

describe("kv data: delete, undelete, destroy", () => {
  it("soft-deletes the latest version with DELETE and answers 404 with metadata", async () => {
    const m = await mount("kv");
    const events = recordEvents(m);
    await write(`${m}/data/d`, { data: { a: "1" } });
    await write(`${m}/data/d`, { data: { a: "2" } });
    await del(`${m}/data/d`);
    const r = await read(`${m}/data/d`, {}, 404);
    expect(r.body.data.data).toBeNull();
    expect(r.body.data.metadata).toMatchObject({ version: 2, destroyed: false });
    expect(r.body.data.metadata.deletion_time).not.toBe("");
    expect((await read(`${m}/data/d?version=1`)).body.data.data).toEqual({ a: "1" });
    // Deleting again changes nothing and emits nothing more; a missing key is a 204 too.
    await del(`${m}/data/d`);
    await del(`${m}/data/never`);
    await vi.waitFor(() => expect(events.map((e) => e.kind)).toEqual(["written", "written", "deleted"]));
    expect(events[2]).toMatchObject({ kind: "deleted", path: "d", version: 2 });
  });

  it("deletes, undeletes and destroys given versions", async () => {
    const m = await mount("kv");
    const events = recordEvents(m);
    for (let i = 1; i <= 3; i++) await write(`${m}/data/v`, { data: { i: String(i) } });
    await write(`${m}/delete/v`, { versions: [1, 2] }, {}, 204);
    await read(`${m}/data/v?version=1`, {}, 404);
    await read(`${m}/data/v?version=2`, {}, 404);
    await read(`${m}/data/v`);
    await write(`${m}/undelete/v`, { versions: [2] }, {}, 204);
    expect((await read(`${m}/data/v?version=2`)).body.data.data).toEqual({ i: "2" });

    await write(`${m}/destroy/v`, { versions: [2, 3] }, {}, 204);
    const d = await read(`${m}/data/v?version=3`, {}, 404);
    expect(d.body.data).toMatchObject({ data: null, metadata: { version: 3, destroyed: true } });
    // Undelete cannot bring back destroyed data.
    await write(`${m}/undelete/v`, { versions: [3] }, {}, 204);
    await read(`${m}/data/v?version=3`, {}, 404);
    const meta = (await read(`${m}/metadata/v`)).body.data;
    expect(meta.versions["2"].destroyed).toBe(true);
    expect(meta.versions["1"].deletion_time).not.toBe("");
    const row = await env.DB.prepare("SELECT sealed_data FROM kv_versions WHERE path = 'v' AND version = 2").first<{ sealed_data: string | null }>();
    expect(row?.sealed_data).toBeNull();

    // The undelete of a destroyed version changed nothing, so it emitted nothing.
    await vi.waitFor(() => expect(events).toHaveLength(6));
    expect(events.slice(3)).toEqual([
      expect.objectContaining({ kind: "deleted", path: "v", versions: [1, 2] }),
      expect.objectContaining({ kind: "undeleted", path: "v", versions: [2] }),
      expect.objectContaining({ kind: "destroyed", path: "v", versions: [2, 3] }),
    ]);
  });

  it("refuses a missing versions list", async () => {
    const m = await mount("kv");
    await write(`${m}/data/nv`, { data: { a: "1" } });
    for (const verb of ["delete", "undelete", "destroy"]) {
      const r = await write(`${m}/${verb}/nv`, {}, {}, 400);
      expect(r.body.errors[0]).toContain("versions");
    }
    await write(`${m}/delete/nv`, { versions: ["x"] }, {}, 400);
  });
});

describe("kv data: delete_version_after", () => {
  it("sets deletion_time at write time and treats the version as deleted afterwards", async () => {
    const m = await mount("kv");
    await write(`${m}/metadata/ttl`, { delete_version_after: "1s" }, {}, 204);
    const w = await write(`${m}/data/ttl`, { data: { a: "1" } });
    const created = Date.parse(w.body.data.created_time);
    expect(Date.parse(w.body.data.deletion_time)).toBe(created + 1000);
    expect((await read(`${m}/data/ttl`)).body.data.data).toEqual({ a: "1" });
    await new Promise((r) => setTimeout(r, 1100));
    const gone = await read(`${m}/data/ttl`, {}, 404);
    expect(gone.body.data.data).toBeNull();
  });

  it("uses the smaller of the mount's and the key's setting", async () => {
    const m = await mount("kv");
    await write(`${m}/config`, { delete_version_after: "1h" }, {}, 204);
    await write(`${m}/metadata/short`, { delete_version_after: "30m" }, {}, 204);
    const a = await write(`${m}/data/short`, { data: { a: "1" } });
    expect(Date.parse(a.body.data.deletion_time) - Date.parse(a.body.data.created_time)).toBe(30 * 60 * 1000);
    const b = await write(`${m}/data/plain`, { data: { a: "1" } });
    expect(Date.parse(b.body.data.deletion_time) - Date.parse(b.body.data.created_time)).toBe(3600 * 1000);
  });
});

describe("kv data: subkeys", () => {
  it("returns the key structure without values, to a depth", async () => {
    const m = await mount("kv");
    await write(`${m}/data/sk`, { data: { a: "1", b: { c: "2", d: { e: "3" } }, f: [1, 2] } });
    const r = await read(`${m}/subkeys/sk`);
    expect(r.body.data.subkeys).toEqual({ a: null, b: { c: null, d: { e: null } }, f: null });
    expect(r.body.data.metadata).toMatchObject({ version: 1, destroyed: false });
    expect((await read(`${m}/subkeys/sk?depth=1`)).body.data.subkeys).toEqual({ a: null, b: null, f: null });
    expect(JSON.stringify(r.body)).not.toContain('"1"');
    await write(`${m}/data/sk`, { data: { only: "x" } });
    expect((await read(`${m}/subkeys/sk?version=1&depth=2`)).body.data.subkeys).toEqual({ a: null, b: { c: null, d: null }, f: null });
    await del(`${m}/data/sk`);
    const gone = await read(`${m}/subkeys/sk`, {}, 404);
    expect(gone.body.data.subkeys).toBeNull();
    await read(`${m}/subkeys/missing`, {}, 404);
  });
});

describe("kv data: security and input", () => {
  it("stores secret data sealed", async () => {
    const m = await mount("kv");
    await write(`${m}/data/sealed`, { data: { password: "correct-horse-battery-staple" } });
    const rows = await env.DB.prepare("SELECT * FROM kv_versions WHERE path = 'sealed'").all<Record<string, unknown>>();
    expect(rows.results).toHaveLength(1);
    const text = JSON.stringify(rows.results);
    expect(text).not.toContain("correct-horse");
    expect(text).not.toContain("password");
    expect(String(rows.results[0]?.sealed_data)).toMatch(/^v1:[0-9a-f]{8}:/);
  });

  it("refuses bad input with 400 naming the field, and writes nothing", async () => {
    const m = await mount("kv");
    const cases: Array<[unknown, string]> = [
      [{}, "data"],
      [{ data: "not an object" }, "data"],
      [{ data: [1, 2] }, "data"],
      [{ data: { a: "1" }, options: { cas: "abc" } }, "cas"],
      [{ data: { a: "1" }, options: { cas: -1 } }, "cas"],
      [{ data: { a: "1" }, options: "x" }, "options"],
    ];
    for (const [body, field] of cases) {
      const r = await write(`${m}/data/bad`, body, {}, 400);
      expect(r.body.errors[0], JSON.stringify(body)).toContain(field);
    }
    await read(`${m}/metadata/bad`, {}, 404);
    expect((await read(`${m}/data/bad?version=-1`, {}, 400)).body.errors[0]).toContain("version");
    expect((await read(`${m}/data/bad?version=abc`, {}, 400)).body.errors[0]).toContain("version");
    expect((await write(`${m}/data/`, { data: { a: "1" } }, {}, 400)).body.errors[0]).toContain("path");
    expect((await read(`${m}/data`, {}, 400)).body.errors[0]).toContain("path");
    expect((await api("POST", `${m}/data/a%2F..%2Fb`, { body: { data: { a: "1" } } })).status).toBe(400);
    expect((await api("POST", `${m}/data/a//b`, { body: { data: { a: "1" } } })).status).toBe(400);
    expect((await api("POST", `${m}/data/a%00b`, { body: { data: { a: "1" } } })).status).toBe(400);
    const rows = await env.DB.prepare("SELECT count(*) AS n FROM kv_metadata m JOIN mounts t ON t.id = m.mount_id WHERE t.path = ?")
      .bind(`${m}/`)
      .first<{ n: number }>();
    expect(rows?.n).toBe(0);
  });

  it("never echoes secret values in errors", async () => {
    const m = await mount("kv");
    await write(`${m}/data/s`, { data: { a: "super-secret-value" } });
    const r = await write(`${m}/data/s`, { data: { a: "super-secret-value" }, options: { cas: 9 } }, {}, 400);
    expect(r.text).not.toContain("super-secret-value");
  });

  it("lets a read-only policy read but not write", async () => {
    const m = await mount("kv");
    await write(`${m}/data/x`, { data: { a: "1" } });
    const token = await tokenWithPolicy(`path "${m}/data/x" { capabilities = ["read"] }`);
    expect((await read(`${m}/data/x`, { token })).body.data.data).toEqual({ a: "1" });
    await write(`${m}/data/x`, { data: { a: "2" } }, { token }, 403);
    await patch(`${m}/data/x`, { data: { a: "2" } }, { token }, 403);
    await del(`${m}/data/x`, { token }, 403);
    await read(`${m}/data/y`, { token }, 403);
    expect((await read(`${m}/data/x`)).body.data.data).toEqual({ a: "1" });
  });

  it("distinguishes create from update for the ACL", async () => {
    const m = await mount("kv");
    const token = await tokenWithPolicy(`path "${m}/data/*" { capabilities = ["create", "read"] }`);
    await write(`${m}/data/new`, { data: { a: "1" } }, { token });
    await write(`${m}/data/new`, { data: { a: "2" } }, { token }, 403);
  });

  it("removes the data when the mount is disabled", async () => {
    const m = await mount("kv");
    await write(`${m}/config`, { max_versions: 4 }, {}, 204);
    await write(`${m}/data/a`, { data: { a: "1" } });
    await write(`${m}/metadata/b`, { max_versions: 2 }, {}, 204);
    await del(`sys/mounts/${m}`);
    await write(`sys/mounts/${m}`, { type: "kv", options: { version: "2" } }, {}, 204);
    await read(`${m}/data/a`, {}, 404);
    await read(`${m}/metadata/b`, {}, 404);
    expect((await read(`${m}/config`)).body.data.max_versions).toBe(0);
    const n = await env.DB.prepare("SELECT count(*) AS n FROM kv_versions WHERE path = 'a' AND mount_id NOT IN (SELECT id FROM mounts)").first<{ n: number }>();
    expect(n?.n).toBe(0);
  });
});

describe("kv data: change events", () => {
  it("emits exactly one typed event per change", async () => {
    const m = await mount("kv");
    const events = recordEvents(m);
    await write(`${m}/data/e`, { data: { a: "1" } });
    await patch(`${m}/data/e`, { data: { b: "2" } });
    await del(`${m}/data/e`);
    await write(`${m}/undelete/e`, { versions: [2] }, {}, 204);
    await write(`${m}/destroy/e`, { versions: [1] }, {}, 204);
    await del(`${m}/metadata/e`);
    await vi.waitFor(() => expect(events).toHaveLength(6));
    const base = { namespaceId: "root", mountPath: `${m}/`, path: "e" };
    expect(events).toEqual([
      expect.objectContaining({ ...base, kind: "written", version: 1 }),
      expect.objectContaining({ ...base, kind: "written", version: 2 }),
      expect.objectContaining({ ...base, kind: "deleted", version: 2 }),
      expect.objectContaining({ ...base, kind: "undeleted", versions: [2] }),
      expect.objectContaining({ ...base, kind: "destroyed", versions: [1] }),
      expect.objectContaining({ ...base, kind: "metadata-deleted" }),
    ]);
    expect(typeof events[0]?.mountId).toBe("string");
    expect(JSON.stringify(events)).not.toContain('"a"');
  });

  it("keeps a failing listener from affecting the write", async () => {
    const m = await mount("kv");
    const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
    cleanups.push(() => errors.mockRestore());
    cleanups.push(
      onKvChange(() => {
        throw new Error("listener exploded");
      }),
    );
    const events = recordEvents(m);
    await write(`${m}/data/f`, { data: { a: "1" } });
    await vi.waitFor(() => expect(events).toHaveLength(1));
    await vi.waitFor(() => expect(errors).toHaveBeenCalled());
  });
});
