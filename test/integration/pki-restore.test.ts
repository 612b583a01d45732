/**
 * A restore of D1 (with the CERTS bucket's certificate bodies) gives a working CA (docs/operations.md "Backup", "Restore"): CRL numbers
 * keep growing after the rows go back to an earlier point and the mount's Authority has lost its
 * counter, and a PKI mount disabled after the restore point comes back into service although its
 * Authority had retired. The restore is simulated on the rows themselves: the CRL rows rolled back,
 * the Authority's storage wiped, a disabled mount's rows put back as they were. CRL numbers are
 * read with @peculiar/x509, an independent parser.
 */
import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, read, write } from "../helpers/api";
import { pkiWithRoot, x509 } from "../helpers/pki";

async function crlNumber(path: string, which = "crl"): Promise<number> {
  const r = await api("GET", `${path}/${which}/pem`, { token: null });
  expect(r.status).toBe(200);
  const ext = new x509.X509Crl(r.text).extensions.find((e) => e.type === "2.5.29.20");
  const bytes = ext ? new Uint8Array(ext.value).slice(2) : new Uint8Array();
  return bytes.reduce((a, b) => a * 256 + b, 0);
}

const accessorOf = async (path: string) => (await read(`sys/mounts/${path}`)).body.data.accessor as string;
const mountIdOf = async (path: string) =>
  (await env.DB.prepare("SELECT id FROM mounts WHERE path = ?").bind(`${path}/`).first<{ id: string }>())?.id ?? "";

/** Every row of every table that names the mount, as it is now (what a backup of that moment holds). */
async function rowsOfMount(id: string): Promise<{ table: string; rows: Record<string, unknown>[] }[]> {
  const tables = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%'").all<{ name: string }>();
  const out: { table: string; rows: Record<string, unknown>[] }[] = [];
  for (const { name } of tables.results) {
    const cols = await env.DB.prepare(`SELECT name FROM pragma_table_info('${name}')`).all<{ name: string }>();
    // pki_certs names its mount by number (pki_ids, migration 0019), which stays after a disable.
    const names = (c: string) => cols.results.some((x) => x.name === c);
    const where = name === "mounts" ? "id = ?" : names("mount_id") ? "mount_id = ?" : names("mount_no") ? "mount_no = (SELECT no FROM pki_ids WHERE id = ?)" : null;
    if (!where) continue;
    const rows = await env.DB.prepare(`SELECT * FROM "${name}" WHERE ${where}`).bind(id).all<Record<string, unknown>>();
    out.push({ table: name, rows: rows.results });
  }
  // The mount's row first: the engine rows refer to it.
  return out.sort((a, b) => (a.table === "mounts" ? -1 : b.table === "mounts" ? 1 : 0));
}

async function putBack(snapshot: { table: string; rows: Record<string, unknown>[] }[]): Promise<void> {
  for (const { table, rows } of snapshot) {
    for (const row of rows) {
      const cols = Object.keys(row);
      // D1 hands BLOBs (pki_certs.serial) back as arrays of numbers.
      const values = cols.map((c) => { const v = row[c] ?? null; return Array.isArray(v) ? new Uint8Array(v as number[]) : v; });
      await env.DB.prepare(`INSERT OR REPLACE INTO "${table}" (${cols.map((c) => `"${c}"`).join(", ")}) VALUES (${cols.map(() => "?").join(", ")})`)
        .bind(...values)
        .run();
    }
  }
}

/** The mount's certificate bodies in the CERTS bucket (backed up beside D1: docs/operations.md "Backup"). */
async function bodiesOfMount(id: string): Promise<{ key: string; bytes: ArrayBuffer }[]> {
  const listed = await env.CERTS.list({ prefix: `${id}/` });
  return Promise.all(listed.objects.map(async (o) => ({ key: o.key, bytes: await ((await env.CERTS.get(o.key)) as R2ObjectBody).arrayBuffer() })));
}

describe("CRL numbers after a restore", () => {
  it("are numbered from the clock, and the next CRL after a rollback of D1 and a lost counter is higher than any published", async () => {
    const { path } = await pkiWithRoot();
    await write(`${path}/roles/web`, { allow_any_name: true, key_type: "ec", max_ttl: "24h" });
    const before = Date.now();
    await read(`${path}/crl/rotate`);
    const early = await crlNumber(path);
    expect(early).toBeGreaterThanOrEqual(before - 5_000);
    // More CRLs published after the backup point.
    const published: number[] = [early];
    for (let i = 0; i < 3; i++) {
      const leaf = await write(`${path}/issue/web`, { common_name: `r${i}.example`, ttl: "1h" });
      await write(`${path}/revoke`, { serial_number: leaf.body.data.serial_number });
      published.push(await crlNumber(path), await crlNumber(path, "crl/delta"));
    }
    const highest = Math.max(...published);
    expect(highest).toBeGreaterThan(early);

    // Restore to the backup point: the CRL rows carry the early numbers again, and the mount's
    // Authority is a new one (its counter gone), as after a restore into a fresh deployment.
    const id = await mountIdOf(path);
    await env.DB.prepare("UPDATE pki_crls SET number = ? WHERE mount_id = ?").bind(early, id).run();
    await runInDurableObject(env.AUTHORITY.getByName(await accessorOf(path)), async (_o, state: DurableObjectState) => {
      for (const key of (await state.storage.list({ prefix: "crl:number:" })).keys()) await state.storage.delete(key);
    });

    await read(`${path}/crl/rotate`);
    const next = await crlNumber(path);
    expect(next).toBeGreaterThan(highest);
    expect(await crlNumber(path, "crl/delta")).toBeGreaterThan(next);
  });
});

describe("a PKI mount restored after its disable", () => {
  it("issues, revokes and publishes CRLs again: its retired Authority returns to service", async () => {
    const { path, root } = await pkiWithRoot();
    await write(`${path}/roles/web`, { allow_any_name: true, key_type: "ec", max_ttl: "24h" });
    const old = await write(`${path}/issue/web`, { common_name: "old.example", ttl: "1h" });
    const accessor = await accessorOf(path);
    const backup = await rowsOfMount(await mountIdOf(path));
    const bodies = await bodiesOfMount(await mountIdOf(path));

    expect((await api("DELETE", `sys/mounts/${path}`)).status).toBe(204);
    expect(await env.AUTHORITY.getByName(accessor).isRetired()).toBe(true);

    await putBack(backup);
    for (const b of bodies) await env.CERTS.put(b.key, b.bytes);
    // The read model sees rows changed behind its back within 1 s (docs/architecture.md).
    await new Promise((r) => setTimeout(r, 1_100));
    expect((await read(`${path}/cert/ca`)).body.data.certificate.trim()).toBe(root.trim());
    const fresh = await write(`${path}/issue/web`, { common_name: "new.example", ttl: "1h" });
    expect(fresh.body.data.serial_number).not.toBe(old.body.data.serial_number);
    const revoked = await write(`${path}/revoke`, { serial_number: old.body.data.serial_number });
    expect(revoked.body.data.revocation_time).toBeGreaterThan(0);
    const crl = new x509.X509Crl((await api("GET", `${path}/crl/pem`, { token: null })).text);
    const onCrl = crl.entries.map((e) => (e.serialNumber.match(/../g) ?? []).join(":").toLowerCase());
    expect(onCrl).toContain(old.body.data.serial_number.toLowerCase().replace(/^(00:)+/, ""));
    expect(await env.AUTHORITY.getByName(accessor).isRetired()).toBe(false);
  });

  it("stays retired while the mount's row is being disabled or gone", async () => {
    const { path } = await pkiWithRoot();
    const accessor = await accessorOf(path);
    const id = await mountIdOf(path);
    const backup = await rowsOfMount(id);
    expect((await api("DELETE", `sys/mounts/${path}`)).status).toBe(204);
    const authority = env.AUTHORITY.getByName(accessor);
    const refusal = () => Promise.resolve(authority.reserveSerials(accessor, 1)).then(() => "served", (e: unknown) => (e instanceof Error ? e.message : String(e)));
    expect(await refusal()).toBe("mount is being disabled");
    // Put back as "disabling" (the state a disable leaves while it runs): still refused.
    await putBack(backup.filter((t) => t.table === "mounts").map((t) => ({ ...t, rows: t.rows.map((r) => ({ ...r, state: "disabling" })) })));
    expect(await refusal()).toBe("mount is being disabled");
    // Another mount's accessor revives nothing.
    const other = await pkiWithRoot();
    expect(await Promise.resolve(authority.reserveSerials(await accessorOf(other.path), 1)).then(() => "served", () => "refused")).toBe("refused");
    expect(await authority.isRetired()).toBe(true);
  });
});
