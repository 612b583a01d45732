/**
 * Certificate bodies in R2 (docs/architecture.md "Certificate bodies", docs/storage-schema.md
 * "pki_certs"): an issued leaf leaves a slim D1 row (der '') and its DER as the CERTS object
 * `<mount id>/<serial>`; every read path answers the same bytes as before, for new rows and for
 * rows that still hold their body in D1; tidy and mount disable delete the bodies; a failed R2
 * put leaves the body in the row. Certificates are checked with @peculiar/asn1-x509, not the
 * library Lanyard signs with.
 */
import { env, SELF } from "cloudflare:test";
import { AsnConvert } from "@peculiar/asn1-schema";
import { Certificate } from "@peculiar/asn1-x509";
import { describe, expect, it } from "vitest";
import { openDb } from "../../src/core/db/client";
import { storeLeafCertificate, storeWithBody } from "../../src/engines/pki/issuance/cert-commit";
import { api, del, list, read, write } from "../helpers/api";
import { storedBody } from "../helpers/cert-body";
import { pkiWithRoot } from "../helpers/pki";

const pemDer = (pem: string): Uint8Array => Uint8Array.from(atob(pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "")), (c) => c.charCodeAt(0));
const b64 = (bytes: Uint8Array): string => btoa(String.fromCharCode(...bytes));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Bytes of values in one pki_certs row (index entries come on top: scripts/measure-cert-rows.sh
 * measured 164 bytes of table and 247 with every index per typical leaf row in the slim layout of
 * migration 0019, against 2,549 with the body in the row; test/integration/pki-cert-rows-slim.test.ts
 * holds that bound). A leaf with two names stays well under this bound without its body.
 */
const SLIM_ROW_BYTES = 400;

async function rowBytes(serial: string): Promise<{ der: string; bytes: number }> {
  const sql = `SELECT der, 8 + length(serial) + length(CAST(der AS BLOB)) + 8
    + 16 + ifnull(length(CAST(metadata AS BLOB)), 0) + ifnull(length(CAST(common_name AS BLOB)), 0) + ifnull(length(CAST(sans AS BLOB)), 0)
    + 8 + ifnull(length(CAST(role AS BLOB)), 0) AS bytes FROM pki_certs WHERE serial = unhex(replace(?, ':', ''))`;
  const row = await env.DB.prepare(sql).bind(serial).first<{ der: string; bytes: number }>();
  if (!row) throw new Error(`no row for ${serial}`);
  return row;
}

async function setup(maxTtl = "24h") {
  const ctx = await pkiWithRoot();
  await write(`${ctx.path}/roles/r`, { allow_any_name: true, allow_ip_sans: true, key_type: "ec", max_ttl: maxTtl });
  return ctx;
}

/** Every read form of cert/<serial> answers exactly `der`. */
async function expectReadsBack(path: string, serial: string, der: Uint8Array): Promise<void> {
  const json = await read(`${path}/cert/${serial}`, { token: null });
  expect(pemDer(json.body.data.certificate as string)).toEqual(der);
  const raw = await SELF.fetch(`http://lanyard.test/v1/${path}/cert/${serial}/raw`);
  expect(raw.status).toBe(200);
  expect(new Uint8Array(await raw.arrayBuffer())).toEqual(der);
  const pem = await api("GET", `${path}/cert/${serial}/raw/pem`, { token: null });
  expect(pemDer(pem.text)).toEqual(der);
}

describe("a stored leaf", () => {
  it("keeps a slim D1 row and its DER in R2, read back byte-identical by every form", async () => {
    const { path } = await setup();
    const r = await write(`${path}/issue/r`, { common_name: "a.example.com", alt_names: "b.example.com", ttl: "1h" });
    const serial = r.body.data.serial_number as string;
    const der = pemDer(r.body.data.certificate as string);
    const row = await rowBytes(serial);
    expect(row.der).toBe("");
    expect(row.bytes).toBeLessThan(SLIM_ROW_BYTES);
    const body = await storedBody(serial);
    expect(body.inRow).toBe(false);
    const obj = await env.CERTS.get(`${body.mountId}/${serial}`);
    const stored = new Uint8Array(await (obj as R2ObjectBody).arrayBuffer());
    expect(stored).toEqual(der);
    const parsed = AsnConvert.parse(stored, Certificate);
    expect(Array.from(new Uint8Array(parsed.tbsCertificate.serialNumber), (b) => b.toString(16).padStart(2, "0")).join(":").replace(/^(00:)+/, "")).toBe(serial);
    await expectReadsBack(path, serial, der);
    expect((await list(`${path}/certs`)).body.data.keys).toContain(serial);
  });

  it("with 200 SANs (the most a request may ask for) round-trips through R2", async () => {
    const { path } = await setup();
    const names = Array.from({ length: 100 }, (_, i) => `host-${i}.${"a-rather-long-label-".repeat(3)}x.example.com`);
    const ips = Array.from({ length: 100 }, (_, i) => `10.1.${i}.1`);
    const r = await write(`${path}/issue/r`, { common_name: "big.example.com", alt_names: names.join(","), ip_sans: ips.join(","), ttl: "1h" });
    const serial = r.body.data.serial_number as string;
    const der = pemDer(r.body.data.certificate as string);
    expect(der.length).toBeGreaterThan(8_000);
    expect((await rowBytes(serial)).der).toBe("");
    const parsed = AsnConvert.parse(der, Certificate);
    expect(parsed.tbsCertificate.extensions?.length).toBeGreaterThan(0);
    await expectReadsBack(path, serial, der);
  });

  it("is revoked by serial and by certificate, and the revocation keeps its DER", async () => {
    const { path } = await setup();
    const a = await write(`${path}/issue/r`, { common_name: "rev-a.example.com", ttl: "1h" });
    const b = await write(`${path}/issue/r`, { common_name: "rev-b.example.com", ttl: "1h" });
    await write(`${path}/revoke`, { serial_number: a.body.data.serial_number });
    await write(`${path}/revoke`, { certificate: b.body.data.certificate });
    for (const r of [a, b]) {
      const serial = r.body.data.serial_number as string;
      const revoked = await env.DB.prepare("SELECT der FROM pki_revoked WHERE serial = ?").bind(serial).first<{ der: string }>();
      expect(revoked?.der).toBe(b64(pemDer(r.body.data.certificate as string)));
      expect((await read(`${path}/cert/${serial}`)).body.data.revocation_time).toBeGreaterThan(0);
    }
    expect((await list(`${path}/certs/revoked`)).body.data.keys).toEqual(expect.arrayContaining([a.body.data.serial_number, b.body.data.serial_number]));
  });
});

describe("rows stored before bodies moved to R2", () => {
  it("are read from their D1 body, and revoked by certificate", async () => {
    const { path } = await setup();
    const r = await write(`${path}/issue/r`, { common_name: "legacy.example.com", ttl: "1h" });
    const serial = r.body.data.serial_number as string;
    const der = pemDer(r.body.data.certificate as string);
    const { mountId, der: body } = await storedBody(serial);
    // The layout before: the body in the row, no object.
    await env.DB.prepare("UPDATE pki_certs SET der = ? WHERE serial = unhex(replace(?, ':', ''))").bind(body, serial).run();
    await env.CERTS.delete(`${mountId}/${serial}`);
    await expectReadsBack(path, serial, der);
    await write(`${path}/revoke`, { certificate: r.body.data.certificate });
    expect((await read(`${path}/cert/${serial}`)).body.data.revocation_time).toBeGreaterThan(0);
  });
});

describe("bodies leave with their rows", () => {
  it("tidy deletes the bodies of the expired certificates it removes", async () => {
    const { path } = await setup();
    const gone = await write(`${path}/issue/r`, { common_name: "short.example.com", ttl: "2s" });
    const kept = await write(`${path}/issue/r`, { common_name: "long.example.com", ttl: "1h" });
    const goneBody = await storedBody(gone.body.data.serial_number);
    const keptBody = await storedBody(kept.body.data.serial_number);
    await sleep(4_000);
    await write(`${path}/tidy`, { tidy_cert_store: true, safety_buffer: "1s" }, {}, 202);
    await expect.poll(async () => (await read(`${path}/tidy-status`)).body.data.state, { timeout: 20_000, interval: 100 }).toBe("Finished");
    expect(await env.CERTS.head(`${goneBody.mountId}/${gone.body.data.serial_number}`)).toBeNull();
    expect(await env.CERTS.head(`${keptBody.mountId}/${kept.body.data.serial_number}`)).not.toBeNull();
    expect((await api("GET", `${path}/cert/${gone.body.data.serial_number}`)).status).toBe(404);
  });

  it("disabling the mount deletes every body under its prefix", async () => {
    const { path } = await setup();
    let mountId = "";
    for (let i = 0; i < 3; i++) mountId = (await storedBody((await write(`${path}/issue/r`, { common_name: `m${i}.example.com`, ttl: "1h" })).body.data.serial_number)).mountId;
    expect((await env.CERTS.list({ prefix: `${mountId}/` })).objects.length).toBe(3);
    await del(`sys/mounts/${path}`);
    expect((await env.CERTS.list({ prefix: `${mountId}/` })).objects).toEqual([]);
  });
});

describe("storeLeafCertificate", () => {
  it("keeps the body in the row when the R2 put fails after the row committed", async () => {
    const { path } = await setup();
    const r = await write(`${path}/issue/r`, { common_name: "template.example.com", ttl: "1h" });
    const { mountId } = await storedBody(r.body.data.serial_number);
    const row = await env.DB.prepare("SELECT (SELECT id FROM pki_ids WHERE no = issuer_no) AS issuer_id, not_after, not_before FROM pki_certs WHERE serial = unhex(replace(?, ':', ''))").bind(r.body.data.serial_number).first<Record<string, string | number | null>>();
    const der = pemDer(r.body.data.certificate as string);
    const serial = "7f:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:01";
    // R2 refusing the put (an outage): the bucket's other methods are the real ones.
    const failing = new Proxy(env.CERTS, { get: (t, k) => (k === "put" ? () => Promise.reject(new Error("R2 unavailable")) : Reflect.get(t, k, t).bind(t)) });
    await storeLeafCertificate(openDb(env.DB), failing, {
      mountId, serial, der: b64(der), issuerId: String(row?.issuer_id), notAfter: Number(row?.not_after), createdAt: Date.now(),
      metadata: null, commonName: "template.example.com", sans: "template.example.com", notBefore: Number(row?.not_before), role: "r",
    }, der);
    expect((await storedBody(serial)).inRow).toBe(true);
    expect(await env.CERTS.head(`${mountId}/${serial}`)).toBeNull();
    await expectReadsBack(path, serial, der);
  });

  it("takes the body back out of R2 when the row fails after the put succeeded", async () => {
    const { path } = await setup();
    const r = await write(`${path}/issue/r`, { common_name: "orphan.example.com", ttl: "1h" });
    const { mountId } = await storedBody(r.body.data.serial_number);
    const der = pemDer(r.body.data.certificate as string);
    const serial = "7f:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:02";
    const row = {
      mountId, serial, der: b64(der), issuerId: "unused", notAfter: Date.now() + 3_600_000, createdAt: Date.now(),
      metadata: null, commonName: "orphan.example.com", sans: "orphan.example.com", notBefore: Date.now(), role: "r",
    };
    // D1 refusing the row's batch (an outage) while R2 took the body.
    let putSeen = false;
    const watched = new Proxy(env.CERTS, { get: (t, k) => (k === "put" ? (...a: Parameters<R2Bucket["put"]>) => ((putSeen = true), t.put(...a)) : Reflect.get(t, k, t).bind(t)) });
    await expect(storeWithBody(openDb(env.DB), watched, row, der, () => sleep(20).then(() => Promise.reject(new Error("D1 unavailable"))))).rejects.toThrow("D1 unavailable");
    expect(putSeen).toBe(true);
    expect(await env.CERTS.head(`${mountId}/${serial}`)).toBeNull();
    // No row either: the certificate was never stored.
    expect(await env.DB.prepare("SELECT count(*) AS n FROM pki_certs WHERE serial = unhex(replace(?, ':', ''))").bind(serial).first<{ n: number }>()).toEqual({ n: 0 });
    // The certificate issued through the API keeps its body.
    expect(await env.CERTS.head(`${mountId}/${r.body.data.serial_number}`)).not.toBeNull();
  });
});
