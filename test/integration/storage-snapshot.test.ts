/**
 * Storage snapshots (Vault API: https://developer.hashicorp.com/vault/api-docs/system/storage/raft):
 * GET sys/storage/raft/snapshot saves the whole D1 database, POST restores it, snapshot-force
 * restores another deployment's. Checked against a full dump of every table: a restore brings
 * back exactly what was saved (KV versions, tokens, policies, issuers, certificates, revocations,
 * sync destinations and associations, an audit device), the CA then issues and revokes; a corrupt,
 * truncated, foreign-key or other-schema snapshot is refused with 400 and changes nothing; root
 * namespace and sudo only; the snapshot's bytes never reach the audit log.
 */
import { createExecutionContext, env, SELF, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { app } from "../../src/app/app";
import { snapshotStream } from "../../src/core/db/snapshot-stream";
import { api, del, patch, read, ROOT, tokenWithPolicy, write } from "../helpers/api";
import { pkiWithRoot } from "../helpers/pki";
import { BODIES, uid } from "../helpers/sync-bodies";
import { dumpTables } from "../helpers/db-dump";

const KEY_B = btoa(String.fromCharCode(...Array.from({ length: 32 }, (_, i) => 200 - i)));

const dump = dumpTables;

async function save(opts: { token?: string; namespace?: string } = {}): Promise<Response> {
  const headers: Record<string, string> = { "x-service-token": opts.token ?? ROOT };
  if (opts.namespace) headers["x-service-namespace"] = opts.namespace;
  return SELF.fetch("http://lanyard.test/v1/sys/storage/raft/snapshot", { headers });
}

async function restore(body: BodyInit, opts: { force?: boolean; token?: string } = {}): Promise<{ status: number; text: string }> {
  const res = await SELF.fetch(`http://lanyard.test/v1/sys/storage/raft/snapshot${opts.force ? "-force" : ""}`, {
    method: "POST",
    headers: { "x-service-token": opts.token ?? ROOT, "content-type": "application/octet-stream" },
    body,
  });
  return { status: res.status, text: await res.text() };
}

const bytesOf = async (s: ReadableStream<Uint8Array>) => new Uint8Array(await new Response(s).arrayBuffer());
const gunzip = (b: Uint8Array) => bytesOf(new Blob([b]).stream().pipeThrough(new DecompressionStream("gzip")));
const gzip = (b: Uint8Array) => bytesOf(new Blob([b]).stream().pipeThrough(new CompressionStream("gzip")));

/** What the test instance holds before the snapshot. */
async function populate() {
  await write("sys/mounts/secret", { type: "kv", options: { version: "2" } }, {}, 204);
  await write("secret/data/app", { data: { password: "v1" } });
  await write("secret/data/app", { data: { password: "plaintext-sentinel-v2", blob: "x".repeat(3000) } });
  const policyToken = await tokenWithPolicy(`path "secret/data/*" { capabilities = ["read"] }`);
  const ca = await pkiWithRoot();
  await write(`${ca.path}/roles/web`, { allowed_domains: "example.com", allow_subdomains: true, max_ttl: "72h" });
  const leaves = [];
  for (const cn of ["a.example.com", "b.example.com", "c.example.com"]) leaves.push((await write(`${ca.path}/issue/web`, { common_name: cn, ttl: "1h" })).body.data);
  await write(`${ca.path}/revoke`, { serial_number: leaves[0].serial_number });
  // Parked (sync disabled), so no provider call keeps rewriting the association's run state.
  await patch("sys/sync/config", { disabled: true });
  const dest = `d-${uid()}`;
  await write(`sys/sync/destinations/cloudone-sm/${dest}`, BODIES["cloudone-sm"]);
  await write(`sys/sync/destinations/cloudone-sm/${dest}/associations/set`, { mount: "secret", secret_name: "app" });
  await write("sys/audit/log", { type: "stdout" }, {}, 204);
  return { policyToken, ca, leaves, dest };
}

/** Waits until no background write (certificate group commit, sync runs) changes the tables. */
async function settled(): Promise<Record<string, unknown[]>> {
  let last = JSON.stringify(await dump());
  for (let i = 0; i < 20; i++) {
    await new Promise((r) => setTimeout(r, 150));
    const next = JSON.stringify(await dump());
    if (next === last) return JSON.parse(next) as Record<string, unknown[]>;
    last = next;
  }
  throw new Error("the tables never settled");
}

describe("storage snapshots", () => {
  it("save, change, restore: every table is back as it was, and the CA keeps working", async () => {
    const fixture = await populate();
    expect(Object.keys((await read(`sys/sync/destinations/cloudone-sm/${fixture.dest}/associations`)).body.data.associated_secrets)).toHaveLength(1);
    const before = await settled();
    const logged = vi.spyOn(console, "log");
    const res = await save();
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/octet-stream");
    const snap = new Uint8Array(await res.arrayBuffer());
    expect([snap[0], snap[1]]).toEqual([0x1f, 0x8b]);
    const lines = new TextDecoder().decode(await gunzip(snap)).trimEnd().split("\n");
    expect(JSON.parse(lines[0] ?? "")).toMatchObject({ format: "lanyard-snapshot", version: 2 });
    expect(JSON.parse(lines.at(-1) ?? "")).toMatchObject({ end: true });
    // Sealed values travel sealed: the secret's plaintext is nowhere in the snapshot.
    expect(lines.join("\n")).not.toContain("plaintext-sentinel");
    expect(lines.join("\n")).toContain('"table":"kv_versions"');

    // Change everything a restore must undo, then restore.
    await write("secret/data/app", { data: { password: "v3" } });
    await write("sys/policies/acl/extra", { policy: `path "x/*" { capabilities = ["read"] }` }, {}, 204);
    await del("sys/audit/log");
    await write(`${fixture.ca.path}/revoke`, { serial_number: fixture.leaves[1].serial_number });
    const r = await restore(snap);
    expect(r.status, r.text).toBe(204);
    expect(await dump()).toEqual(before);
    // Neither body reached the audit log (the stdout device logs through console.log).
    const auditLines = logged.mock.calls.map((c) => c.map(String).join(" ")).filter((l) => l.includes("storage/raft/snapshot"));
    expect(auditLines.length).toBeGreaterThan(0);
    for (const l of auditLines) expect(l).not.toMatch(/H4sI|lanyard-snapshot/);
    logged.mockRestore();

    // The restored state answers at once (this isolate's caches were dropped).
    expect((await read("secret/data/app")).body.data.data.password).toBe("plaintext-sentinel-v2");
    expect((await read("secret/data/app", { token: fixture.policyToken })).body.data.data.password).toBe("plaintext-sentinel-v2");
    await read("sys/policies/acl/extra", {}, 404);
    expect((await read("sys/audit")).body.data["log/"]).toMatchObject({ type: "stdout" });
    const got = await read(`${fixture.ca.path}/cert/${fixture.leaves[1].serial_number}`);
    expect(got.body.data.revocation_time).toBe(0);
    // The CA issues a new certificate and revokes an old one.
    const fresh = await write(`${fixture.ca.path}/issue/web`, { common_name: "d.example.com", ttl: "1h" });
    expect(fixture.leaves.map((l: { serial_number: string }) => l.serial_number)).not.toContain(fresh.body.data.serial_number);
    await write(`${fixture.ca.path}/revoke`, { serial_number: fixture.leaves[2].serial_number });
    expect((await read(`${fixture.ca.path}/cert/${fixture.leaves[2].serial_number}`)).body.data.revocation_time).toBeGreaterThan(0);
  });

  it("restores into an emptied database (every table wiped), a table a later migration adds and its BLOBs included", async () => {
    // A table no module names, with the value kinds D1 stores: it is found in sqlite_master.
    await env.DB.prepare("CREATE TABLE zz_later (id integer PRIMARY KEY, b blob, r real, t text)").run();
    const bytes = Uint8Array.from([0, 1, 0x7f, 0x80, 0xff, 0x0a, 0x22]);
    await env.DB.prepare("INSERT INTO zz_later (id, b, r, t) VALUES (1, ?, 2.5, ?), (2, NULL, -0.125, '')").bind(bytes, "a\nb\"c").run();
    const snap = new Uint8Array(await (await save()).arrayBuffer());
    const before = await dump();
    expect(before.zz_later?.[0]).toEqual([1, [...bytes], 2.5, "a\nb\"c"]);
    for (const name of Object.keys(before)) await env.DB.prepare(`DELETE FROM "${name}"`).run();
    const r = await restore(snap);
    expect(r.status, r.text).toBe(204);
    expect(await dump()).toEqual(before);
    await env.DB.prepare("DROP TABLE zz_later").run();
  });

  it("refuses a corrupt, truncated, foreign, other-schema or other-deployment snapshot, and changes nothing", async () => {
    const snap = new Uint8Array(await (await save()).arrayBuffer());
    const plain = await gunzip(snap);
    const before = await dump();
    const flipped = plain.slice();
    const at = new TextDecoder().decode(plain).indexOf('"rows"') + 12;
    flipped[at] = (flipped[at] ?? 0) ^ 0x01;
    const gzFlipped = snap.slice();
    gzFlipped[Math.floor(snap.length / 2)] = (gzFlipped[Math.floor(snap.length / 2)] ?? 0) ^ 0xff;
    const foreign = await bytesOf(await snapshotStream(env.DB, { current: KEY_B }));
    await env.DB.prepare("INSERT INTO d1_migrations (name, applied_at) VALUES ('9999_future_migration', CURRENT_TIMESTAMP)").run();
    const future = new Uint8Array(await (await save()).arrayBuffer());
    await env.DB.prepare("DELETE FROM d1_migrations WHERE name = '9999_future_migration'").run();
    const cases: [string, Uint8Array | string, RegExp][] = [
      ["a flipped byte", await gzip(flipped), /corrupt/],
      ["a flipped byte, plain", flipped, /corrupt/],
      ["a flipped byte in the gzip stream", gzFlipped, /corrupt/],
      ["truncated", snap.slice(0, Math.floor(snap.length * 0.6)), /truncated|corrupt/],
      ["truncated at a line", plain.slice(0, new TextDecoder().decode(plain).lastIndexOf('{"end"')), /truncated/],
      ["another seal key", foreign, /seal key this deployment does not have/],
      ["another schema version", future, /schema version is 9999_future_migration/],
      ["not a snapshot", "hello", /not a Lanyard storage snapshot/],
      ["empty", "", /empty|not a Lanyard/],
    ];
    for (const [what, body, message] of cases) {
      const r = await restore(typeof body === "string" ? body : new Blob([body]));
      expect(r.status, `${what}: ${r.text}`).toBe(400);
      expect(r.text, what).toMatch(message);
      expect(r.text, what).toMatch(/nothing was changed/);
      expect(await dump(), what).toEqual(before);
    }
    // Another deployment's: refused, unless forced; force skips nothing else.
    await env.DB.prepare("UPDATE deployment_identity SET deployment_id = 'another' WHERE id = 1").run();
    const other = await restore(snap);
    expect(other.status).toBe(400);
    expect(other.text).toMatch(/another deployment.*snapshot-force/);
    expect((await restore(foreign, { force: true })).status).toBe(400);
    expect((await restore(snap, { force: true })).status).toBe(204);
    expect(await dump()).toEqual(before);
    const left = await env.DB.prepare(String.raw`SELECT count(*) AS n FROM sqlite_master WHERE name LIKE 'lanyard\_restore\_%' ESCAPE '\'`).first<{ n: number }>();
    expect(left?.n).toBe(0);
  });

  it("root namespace and sudo only", async () => {
    const noSudo = await tokenWithPolicy(`path "sys/storage/raft/*" { capabilities = ["read", "update", "create"] }`);
    const sudo = await tokenWithPolicy(`path "sys/storage/raft/*" { capabilities = ["read", "update", "create", "sudo"] }`);
    expect((await save({ token: noSudo })).status).toBe(403);
    expect((await restore("x", { token: noSudo })).status).toBe(403);
    expect((await restore("x", { token: noSudo, force: true })).status).toBe(403);
    expect((await save({ token: sudo })).status).toBe(200);
    const ns = `ns${uid()}`;
    await write(`sys/namespaces/${ns}`, {});
    const child = await tokenWithPolicy(`path "sys/storage/raft/*" { capabilities = ["read", "update", "sudo"] }`, { namespace: ns });
    const r = await save({ token: child, namespace: ns });
    expect(r.status).toBe(404);
    expect(await r.text()).toMatch(/root namespace only/);
    expect((await api("GET", "sys/storage/raft/snapshot", { token: null })).status).toBe(403);
  });

  it("MAX_SNAPSHOT_BYTES bounds the upload (413, nothing changed); MAX_REQUEST_BYTES does not apply", async () => {
    const snap = new Uint8Array(await (await save()).arrayBuffer());
    const before = await dump();
    const post = async (vars: Partial<Env>, body: Uint8Array, chunked = false) => {
      const ctx = createExecutionContext();
      const stream = chunked ? new Blob([body]).stream() : body;
      const res = await app.fetch(new Request("http://x/v1/sys/storage/raft/snapshot", { method: "POST", headers: { "x-service-token": ROOT }, body: stream, ...(chunked ? { duplex: "half" } : {}) } as RequestInit), { ...env, ...vars }, ctx);
      await waitOnExecutionContext(ctx);
      return { status: res.status, text: await res.text() };
    };
    const small = String(Math.floor(snap.length / 2));
    for (const chunked of [false, true]) {
      const r = await post({ MAX_SNAPSHOT_BYTES: small }, snap, chunked);
      expect(r.status, r.text).toBe(413);
      expect(r.text).toMatch(/MAX_SNAPSHOT_BYTES/);
      expect(await dump()).toEqual(before);
    }
    const ok = await post({ MAX_REQUEST_BYTES: "64" }, snap);
    expect(ok.status, ok.text).toBe(204);
    expect((await post({ MAX_SNAPSHOT_BYTES: "lots" }, snap)).status).toBe(503);
  });
});
