/**
 * Mount and namespace lifecycle races (src/core/lifecycle.ts; docs/security.md, "Mount and
 * namespace lifecycle guarantees"). Each test fires the racing
 * requests concurrently through the Worker and then checks D1 directly: whatever interleaving
 * happened, no row may outlive the mount or namespace that owned it, and no race may answer 500.
 * The "marked" tests set the lifecycle state by hand, so they pin the behaviour of a write that
 * arrives while a disable or delete is in progress, whatever the timing.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, del, read, write, type ApiResult } from "../helpers/api";

const uid = () => crypto.randomUUID().slice(0, 6);
const statuses = (rs: ApiResult[]) => rs.map((r) => r.status).sort((a, b) => a - b);
const noServerErrors = (rs: ApiResult[]) => {
  for (const r of rs) expect(r.status, JSON.stringify(r.body)).toBeLessThan(500);
};

/** Every table with a column of that name (found from the schema, so new tables are covered too). */
async function tablesWith(column: string): Promise<string[]> {
  const tables = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite%' AND name NOT LIKE 'd1_%'").all<{ name: string }>();
  const out: string[] = [];
  for (const { name } of tables.results) {
    const cols = await env.DB.prepare(`PRAGMA table_info(${name})`).all<{ name: string }>();
    if (cols.results.some((c) => c.name === column)) out.push(name);
  }
  return out;
}

/** Rows of any table whose `column` holds `id`, as "table: n" for the failure message. */
async function rowsReferencing(column: string, id: string): Promise<string[]> {
  const found: string[] = [];
  for (const table of await tablesWith(column)) {
    const row = await env.DB.prepare(`SELECT count(*) AS n FROM ${table} WHERE ${column} = ?`).bind(id).first<{ n: number }>();
    if (row && row.n > 0) found.push(`${table}: ${row.n}`);
  }
  return found;
}

const mountId = async (path: string, namespace?: string): Promise<string> => (await read(`sys/mounts/${path}`, { namespace })).body.data.uuid as string;

describe("concurrent mount enables", () => {
  it("ten enables of one path: one 204, nine 400 naming the path, no 500", async () => {
    for (let round = 0; round < 8; round++) {
      const p = `race${uid()}`;
      // Bodies of different sizes and both spellings of the path spread the requests' timing, so
      // that several pass every read-only check before any of them inserts.
      const rs = await Promise.all(
        Array.from({ length: 10 }, (_, i) => api("POST", `sys/mounts/${p}${i % 2 ? "/" : ""}`, { body: { type: round % 2 ? "pki" : "kv", description: "d".repeat(i * 100) } })),
      );
      noServerErrors(rs);
      expect(statuses(rs)).toEqual([204, ...Array<number>(9).fill(400)]);
      for (const r of rs.filter((x) => x.status === 400)) expect(r.body.errors).toEqual([`path is already in use at ${p}/`]);
      const rows = await env.DB.prepare("SELECT count(*) AS n FROM mounts WHERE namespace_id = 'root' AND path = ?").bind(`${p}/`).first<{ n: number }>();
      expect(rows?.n).toBe(1);
    }
  });

  it("a mount and a mount below it, enabled together, never both exist", async () => {
    for (let round = 0; round < 12; round++) {
      const outer = `nx${uid()}`;
      const paths = round % 2 === 0 ? [outer, `${outer}/inner`] : [`${outer}/inner`, outer];
      const rs = await Promise.all(paths.map((p) => api("POST", `sys/mounts/${p}`, { body: { type: round % 3 === 0 ? "pki" : "kv" } })));
      noServerErrors(rs);
      expect(statuses(rs)).toEqual([204, 400]);
      const loser = rs.find((r) => r.status === 400);
      expect(loser?.body.errors[0]).toMatch(new RegExp(`^path is already in use at ${outer}/(inner/)?$`));
      const rows = await env.DB.prepare("SELECT path FROM mounts WHERE namespace_id = 'root' AND substr(path, 1, length(?)) = ?").bind(`${outer}/`, `${outer}/`).all<{ path: string }>();
      expect(rows.results).toHaveLength(1);
    }
  });

  it("a mount and a namespace of the same first segment, created together, never both exist", async () => {
    for (let round = 0; round < 6; round++) {
      const name = `sh${uid()}`;
      const rs = await Promise.all([api("POST", `sys/mounts/${name}/deep`, { body: { type: "kv" } }), api("POST", `sys/namespaces/${name}`, { body: {} })]);
      noServerErrors(rs);
      const ns = await env.DB.prepare("SELECT count(*) AS n FROM namespaces WHERE path = ?").bind(`${name}/`).first<{ n: number }>();
      const m = await env.DB.prepare("SELECT count(*) AS n FROM mounts WHERE namespace_id = 'root' AND path = ?").bind(`${name}/deep/`).first<{ n: number }>();
      expect((ns?.n ?? 0) + (m?.n ?? 0)).toBe(1);
    }
  });
});

describe("concurrent namespace creates", () => {
  it("ten creates of one namespace: one row, every answer the same namespace, no 500", async () => {
    for (let round = 0; round < 16; round++) {
      const name = `cn${uid()}`;
      const rs = await Promise.all(Array.from({ length: 10 }, (_, i) => api("POST", `sys/namespaces/${name}${i % 2 ? "/" : ""}`, { body: {} })));
      noServerErrors(rs);
      expect(new Set(rs.map((r) => r.status))).toEqual(new Set([200]));
      expect(new Set(rs.map((r) => r.body.data.id)).size).toBe(1);
      const rows = await env.DB.prepare("SELECT count(*) AS n FROM namespaces WHERE path = ?").bind(`${name}/`).first<{ n: number }>();
      expect(rows?.n).toBe(1);
    }
  });

  it("ten creates with custom metadata: one 200, the rest 400 as for an existing namespace", async () => {
    const name = `cm${uid()}`;
    const rs = await Promise.all(Array.from({ length: 10 }, (_, i) => api("POST", `sys/namespaces/${name}`, { body: { custom_metadata: { n: String(i).repeat(i * 100) } } })));
    noServerErrors(rs);
    expect(statuses(rs)).toEqual([200, ...Array<number>(9).fill(400)]);
    for (const r of rs.filter((x) => x.status === 400)) expect(r.body.errors[0]).toContain("already exists");
  });
});

describe("writes racing a mount disable", () => {
  it("KV: no row of any table outlives the mount, and no write answers 500", async () => {
    for (let round = 0; round < 4; round++) {
      const p = `orph${uid()}`;
      await write(`sys/mounts/${p}`, { type: "kv" }, {}, 204);
      const id = await mountId(p);
      await write(`${p}/data/seed`, { data: { v: "0" } });
      await write(`${p}/config`, { max_versions: 3 }, {}, 204);
      const writes = Array.from({ length: 30 }, (_, i) =>
        i % 3 === 2 ? api("POST", `${p}/metadata/m${i}`, { body: { custom_metadata: { i: String(i) } } }) : api("POST", `${p}/data/k${i}`, { body: { data: { i: String(i) } } }),
      );
      const [disable, ...rs] = await Promise.all([api("DELETE", `sys/mounts/${p}`), ...writes]);
      expect(disable.status).toBe(204);
      noServerErrors(rs);
      for (const r of rs) if (r.status >= 400) expect([404, 409]).toContain(r.status);
      expect(await rowsReferencing("mount_id", id)).toEqual([]);
      expect(await env.DB.prepare("SELECT count(*) AS n FROM mounts WHERE id = ?").bind(id).first<{ n: number }>()).toEqual({ n: 0 });
    }
  });

  it("PKI: keys/generate racing the disable leaves no sealed key behind", async () => {
    for (let round = 0; round < 3; round++) {
      const p = `pkirace${uid()}`;
      await write(`sys/mounts/${p}`, { type: "pki" }, {}, 204);
      const id = await mountId(p);
      const accessor = (await read(`sys/mounts/${p}`)).body.data.accessor as string;
      await write(`${p}/root/generate/internal`, { common_name: "race.example", key_type: "ec", ttl: "1h" });
      await write(`${p}/roles/web`, { allow_any_name: true, key_type: "ec" });
      const writes = Array.from({ length: 24 }, (_, i) =>
        i % 4 === 3 ? api("POST", `${p}/issue/web`, { body: { common_name: `h${i}.example` } }) : api("POST", `${p}/keys/generate/internal`, { body: { key_type: "ec" } }),
      );
      const [disable, ...rs] = await Promise.all([api("DELETE", `sys/mounts/${p}`), ...writes]);
      expect(disable.status).toBe(204);
      noServerErrors(rs);
      expect(await rowsReferencing("mount_id", id)).toEqual([]);
      // The mount's Authority object is retired: a serial reservation or tidy that arrives after
      // its purge is refused instead of leaving state behind in it.
      const authority = env.AUTHORITY.getByName(accessor);
      expect(await authority.isRetired()).toBe(true);
      const refused = await Promise.resolve(authority.reserveSerials(accessor, 1)).then(
        () => null,
        (e: unknown) => (e instanceof Error ? e.message : String(e)),
      );
      expect(refused).toBe("mount is being disabled");
      expect(await authority.reservedCount()).toBe(0);
    }
  });

  it("a write to a mount marked as being disabled answers 409 and stores nothing", async () => {
    const kv = `mk${uid()}`;
    const pki = `mp${uid()}`;
    await write(`sys/mounts/${kv}`, { type: "kv" }, {}, 204);
    await write(`sys/mounts/${pki}`, { type: "pki" }, {}, 204);
    await write(`${kv}/data/before`, { data: { v: "1" } });
    const kvId = await mountId(kv);
    const pkiId = await mountId(pki);
    await env.DB.prepare("UPDATE mounts SET state = 'disabling' WHERE id IN (?, ?)").bind(kvId, pkiId).run();

    const refused = [
      await api("POST", `${kv}/data/after`, { body: { data: { v: "1" } } }),
      await api("POST", `${kv}/data/before`, { body: { data: { v: "2" } } }),
      await api("POST", `${kv}/metadata/before`, { body: { max_versions: 2 } }),
      await api("POST", `${kv}/delete/before`, { body: { versions: [1] } }),
      await api("POST", `${kv}/config`, { body: { max_versions: 4 } }),
      await api("POST", `${pki}/keys/generate/internal`, { body: { key_type: "ec" } }),
      await api("POST", `${pki}/roles/r`, { body: { allow_any_name: true } }),
      await api("POST", `sys/mounts/${kv}/tune`, { body: { description: "x" } }),
    ];
    for (const r of refused) expect([r.status, r.body.errors]).toEqual([409, ["mount is being disabled"]]);
    // Secrets sync: an intent to sync a secret of the mount is refused; one to unsync is cleanup
    // (the engine removes provider copies after the mount is gone) and stays possible.
    const assoc = env.DB.prepare(
      `INSERT INTO sync_associations (id, namespace_id, destination_type, destination_name, mount_accessor, secret_name, sync_status, updated_at, mount_id, desired)
       VALUES (?, 'root', 'cloudone-sm', 'gone', 'kv_gone', 's', 'PENDING', 0, ?, ?)`,
    );
    await expect(assoc.bind(crypto.randomUUID(), kvId, "synced").run()).rejects.toThrow(/mount is being disabled/);
    const unsync = crypto.randomUUID();
    await assoc.bind(unsync, kvId, "unsynced").run();
    await env.DB.prepare("DELETE FROM sync_associations WHERE id = ?").bind(unsync).run();
    expect(await rowsReferencing("mount_id", pkiId)).toEqual([]);
    const kept = await env.DB.prepare("SELECT count(*) AS n FROM kv_versions WHERE mount_id = ?").bind(kvId).first<{ n: number }>();
    expect(kept?.n).toBe(1);
    // A disabled path is still taken until the disable finishes; finishing it frees everything.
    expect((await write(`sys/mounts/${kv}`, { type: "kv" }, {}, 400)).body.errors).toEqual([`path is already in use at ${kv}/`]);
    await del(`sys/mounts/${kv}`);
    await del(`sys/mounts/${pki}`);
    expect(await rowsReferencing("mount_id", kvId)).toEqual([]);
    await write(`sys/mounts/${kv}`, { type: "kv" }, {}, 204);
  });
});

describe("namespace deletion racing writes into it", () => {
  it("a deleted namespace leaves no policy, token, mount or child behind; no 500", async () => {
    for (let round = 0; round < 5; round++) {
      const name = `nd${uid()}`;
      const id = (await write(`sys/namespaces/${name}`)).body.data.id as string;
      const o = { namespace: name };
      // Odd rounds only add policies and tokens, which do not keep a namespace alive, so the
      // delete must win; even rounds also create mounts and children, which may get in first.
      const blockers = round % 2 === 0;
      const writes = Array.from({ length: 24 }, (_, i) => {
        if (blockers && i === 5) return api("POST", "sys/mounts/m", { ...o, body: { type: "kv" } });
        if (blockers && i === 11) return api("POST", "sys/namespaces/child", { ...o, body: {} });
        if (i % 2 === 0) return api("POST", `sys/policies/acl/p${i}`, { ...o, body: { policy: 'path "x/*" { capabilities = ["read"] }' } });
        return api("POST", "auth/token/create", { ...o, body: { policies: ["default"] } });
      });
      const [gone, ...rs] = await Promise.all([api("DELETE", `sys/namespaces/${name}`), ...writes]);
      noServerErrors([gone, ...rs]);
      const still = await env.DB.prepare("SELECT state FROM namespaces WHERE id = ?").bind(id).first<{ state: string }>();
      if (!blockers) expect(gone.status).toBe(204);
      if (gone.status === 204) {
        expect(still).toBeNull();
        expect(await rowsReferencing("namespace_id", id)).toEqual([]);
        expect(await rowsReferencing("parent_id", id)).toEqual([]);
      } else {
        // Something got in before the delete began: the namespace stays, usable.
        expect(gone.status).toBe(400);
        expect(still?.state).toBe("active");
      }
    }
  });

  it("writes into a namespace marked as being deleted answer 409 and store nothing", async () => {
    const name = `nm${uid()}`;
    const id = (await write(`sys/namespaces/${name}`)).body.data.id as string;
    const o = { namespace: name };
    await env.DB.prepare("UPDATE namespaces SET state = 'deleting' WHERE id = ?").bind(id).run();
    const refused = [
      await api("POST", "sys/policies/acl/p", { ...o, body: { policy: 'path "x" { capabilities = ["read"] }' } }),
      await api("POST", "sys/mounts/kv", { ...o, body: { type: "kv" } }),
      await api("POST", "sys/namespaces/child", { ...o, body: {} }),
      await api("POST", "auth/token/create", { ...o, body: {} }),
      await api("POST", `sys/namespaces/${name}`, { body: {} }),
    ];
    for (const r of refused) expect([r.status, r.body.errors]).toEqual([409, ["namespace is being deleted"]]);
    expect(await rowsReferencing("namespace_id", id)).toEqual([]);
    expect(await rowsReferencing("parent_id", id)).toEqual([]);
    await del(`sys/namespaces/${name}`);
    await read(`sys/namespaces/${name}`, {}, 404);
  });

  it("a delete refused because the namespace is not empty leaves it usable", async () => {
    const name = `nr${uid()}`;
    await write(`sys/namespaces/${name}`);
    await write("sys/mounts/kv", { type: "kv" }, { namespace: name }, 204);
    expect((await del(`sys/namespaces/${name}`, {}, 400)).body.errors[0]).toContain("has mounts");
    await write("sys/policies/acl/p", { policy: 'path "x" { capabilities = ["read"] }' }, { namespace: name }, 204);
  });
});
