/**
 * The slim pki_certs of migration 0019 (docs/storage-schema.md "pki_certs", docs/architecture.md
 * "Certificate bodies"): what a stored certificate costs in D1, measured by D1 itself (the
 * database size each statement's meta reports: D1 offers no dbstat or page-count pragma), and
 * rows of the layout before 0019 (text ids and serials; bodies in the row or in R2) converted by
 * the migration and served as before.
 */
import { env } from "cloudflare:test";
import { AsnConvert } from "@peculiar/asn1-schema";
import { Certificate } from "@peculiar/asn1-x509";
import { describe, expect, it } from "vitest";
import { openDb } from "../../src/core/db/client";
import { insertCertRowsStmts, insertCertsBatch, type CertInsert } from "../../src/engines/pki/storage/store";
import { list, read, write } from "../helpers/api";
import { pkiWithRoot } from "../helpers/pki";

/** The bound: about ten times less than the 2,549 bytes a certificate cost with its body in the row. */
const MAX_BYTES_PER_CERT = 260;
const N = 2000;

const pemDer = (pem: string): Uint8Array => Uint8Array.from(atob(pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "")), (c) => c.charCodeAt(0));
const b64 = (bytes: Uint8Array): string => btoa(String.fromCharCode(...bytes));
const mountIdOf = async (path: string): Promise<string> =>
  (await env.DB.prepare("SELECT id FROM mounts WHERE path = ?").bind(`${path}/`).first<{ id: string }>())?.id ?? "";
/** D1's database size in bytes (every statement's meta carries it). */
const dbSize = async (): Promise<number> => Number((await env.DB.prepare("SELECT 1").run()).meta.size_after);

/** A 20-octet serial as issuance makes them (positive: the first octet below 0x80), colon hex. */
function randomSerial(): string {
  const b = crypto.getRandomValues(new Uint8Array(20));
  b[0] = ((b[0] ?? 0) & 0x7f) | 0x01;
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join(":");
}

describe("the slim pki_certs", () => {
  it(`stores a certificate in at most ${MAX_BYTES_PER_CERT} bytes of D1, row and indexes (${N} leaves)`, async () => {
    const { path, issuerId } = await pkiWithRoot();
    const mountId = await mountIdOf(path);
    const db = openDb(env.DB);
    const now = Date.now();
    // Rows shaped like issued leaves (scripts/measure-cert-rows.sh): two DNS names, a role,
    // not_after in issuance order, the body in R2 (der '').
    const rows: CertInsert[] = Array.from({ length: N }, (_, i) => {
      const cn = `app-${i}.internal.example.com`;
      return {
        mountId, serial: randomSerial(), der: "", issuerId, notAfter: Math.floor(now / 1000) + 30 * 86400 + i, createdAt: now + i,
        metadata: null, commonName: cn, sans: `${cn}\nwww.${cn}`, notBefore: Math.floor(now / 1000) + i, role: "web-server", crlShard: null,
      };
    });
    const before = await dbSize();
    for (let i = 0; i < N; i += 400) await insertCertsBatch(db, insertCertRowsStmts(db, rows.slice(i, i + 400)));
    const perCert = ((await dbSize()) - before) / N;
    expect(perCert).toBeGreaterThan(100);
    expect(perCert).toBeLessThanOrEqual(MAX_BYTES_PER_CERT);
    // Stored as written: one of them read back through the API's LIST.
    const keys = (await list(`${path}/certs`)).body.data.keys as string[];
    expect(keys).toHaveLength(N + 1);
    expect(keys).toContain(rows[7]?.serial);
    expect([...keys].sort()).toEqual(keys);
  });

  it("migration 0019 converts rows of the layout before it, which keep serving: bodies in the row or in R2", async () => {
    const { path } = await pkiWithRoot();
    await write(`${path}/roles/r`, { allow_any_name: true, key_type: "ec", max_ttl: "24h" });
    const inRow = await write(`${path}/issue/r`, { common_name: "in-row.example.com", ttl: "1h" });
    const inR2 = await write(`${path}/issue/r`, { common_name: "in-r2.example.com", ttl: "1h" });
    const mountId = await mountIdOf(path);
    const serialA = inRow.body.data.serial_number as string;
    const serialB = inR2.body.data.serial_number as string;
    const listed = (await list(`${path}/certs`)).body.data.keys as string[];

    // Back to the layout of migrations 0000-0018: the same rows with text ids and colon-hex
    // serials; the first leaf with its body in the row (as before bodies moved to R2), the second in R2.
    const old = await env.DB.prepare(
      `SELECT (SELECT id FROM pki_ids WHERE no = mount_no) AS mount_id, lower(hex(serial)) AS hex, der, (SELECT id FROM pki_ids WHERE no = issuer_no) AS issuer_id,
              not_after, created_at, metadata, common_name, sans, not_before, role, revoked_at, crl_shard FROM pki_certs`,
    ).all<Record<string, string | number | null> & { hex: string }>();
    const migrations = env.TEST_MIGRATIONS;
    const at = migrations.findIndex((m) => m.name.startsWith("0019"));
    expect(at).toBeGreaterThan(0);
    const ddl = migrations
      .slice(0, at)
      .flatMap((m) => m.queries)
      .filter((q) => q.includes("`pki_certs`") && /^(CREATE|ALTER)/.test(q.replace(/^(\s*--[^\n]*\n)*\s*/, "")));
    const colonHex = (hex: string) => (hex.match(/../g) ?? []).join(":");
    const bodyA = b64(pemDer(inRow.body.data.certificate as string));
    const insertOld = (r: (typeof old.results)[number]) =>
      env.DB.prepare(
        `INSERT INTO pki_certs (mount_id, serial, der, issuer_id, not_after, created_at, metadata, common_name, sans, not_before, role, revoked_at, crl_shard)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ).bind(r.mount_id, colonHex(r.hex), colonHex(r.hex) === serialA ? bodyA : r.der, r.issuer_id, r.not_after, r.created_at, r.metadata, r.common_name, r.sans, r.not_before, r.role, r.revoked_at, r.crl_shard);
    await env.DB.batch([
      env.DB.prepare("DROP TRIGGER pki_certs_inv_revoked_mark"),
      env.DB.prepare("DROP TABLE pki_certs"),
      env.DB.prepare("DROP TABLE pki_ids"),
      ...ddl.map((q) => env.DB.prepare(q)),
      ...old.results.map(insertOld),
    ]);
    await env.CERTS.delete(`${mountId}/${serialA}`);
    expect((await env.DB.prepare("SELECT typeof(serial) AS t FROM pki_certs WHERE serial = ?").bind(serialA).first<{ t: string }>())?.t).toBe("text");

    await env.DB.batch((migrations[at]?.queries ?? []).map((q) => env.DB.prepare(q)));

    const a = await env.DB.prepare("SELECT typeof(serial) AS t, der FROM pki_certs WHERE serial = unhex(replace(?, ':', ''))").bind(serialA).first<{ t: string; der: string }>();
    expect(a).toEqual({ t: "blob", der: bodyA });
    // Served as before: each read form, LIST in the same order, the inventory with its facts.
    for (const [serial, r] of [[serialA, inRow], [serialB, inR2]] as const) {
      const got = await read(`${path}/cert/${serial}`, { token: null });
      expect(pemDer(got.body.data.certificate as string)).toEqual(pemDer(r.body.data.certificate as string));
      const parsed = AsnConvert.parse(pemDer(got.body.data.certificate as string), Certificate);
      expect(Array.from(new Uint8Array(parsed.tbsCertificate.serialNumber), (b) => b.toString(16).padStart(2, "0")).join(":").replace(/^(00:)+/, "")).toBe(serial);
    }
    expect((await list(`${path}/certs`)).body.data.keys).toEqual(listed);
    const inventory = await list(`${path}/certs/detailed?sort=serial`);
    expect(inventory.body.data.keys).toEqual(listed);
    expect(inventory.body.data.key_info[serialA].common_name).toBe("in-row.example.com");
    // The recreated trigger marks a revocation on the converted row; issuance goes on.
    await write(`${path}/revoke`, { serial_number: serialA });
    expect((await list(`${path}/certs/detailed?state=revoked`)).body.data.keys).toEqual([serialA]);
    await write(`${path}/revoke`, { certificate: inR2.body.data.certificate });
    expect(((await list(`${path}/certs/detailed?state=revoked`)).body.data.keys as string[]).sort()).toEqual([serialA, serialB].sort());
    const fresh = await write(`${path}/issue/r`, { common_name: "after.example.com", ttl: "1h" });
    expect((await read(`${path}/cert/${fresh.body.data.serial_number}`, { token: null })).body.data.certificate).toBe(fresh.body.data.certificate);
  });
});
