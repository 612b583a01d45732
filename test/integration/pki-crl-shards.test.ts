/**
 * Sharded CRLs (docs/pki-revocation-crl.md "Sharded CRLs"), read back with @peculiar/x509 and
 * @peculiar/asn1-x509 (independent parsers): config/crl shard_count and its validation; the shard
 * a certificate names in its CDP is serial mod N and stored with its row; each shard CRL carries a
 * critical Issuing Distribution Point whose name is exactly that CDP URL, lists exactly its
 * shard's revocations, and has its own numbers; a revocation rebuilds only its shard (the other
 * shards' and the full CRL's numbers and thisUpdate unchanged); a certificate issued before
 * sharding goes on the full CRL at once; 1 → N → 1 keeps every shard ever used published; after a
 * restore-like rollback every shard's number still grows; bad shard paths are 400/404;
 * every CRL path with /shard/<n> appended serves that shard (a CDP may name any of them);
 * sign-verbatim names its shard, and a no_store certificate revoked by PEM lands on the shard its
 * CDP names.
 */
import { SELF, env, runInDurableObject } from "cloudflare:test";
import { AsnConvert } from "@peculiar/asn1-schema";
import { IssuingDistributionPoint } from "@peculiar/asn1-x509";
import { describe, expect, it } from "vitest";
import { api, read, write } from "../helpers/api";
import { makeCsr, pkiWithRoot, x509 } from "../helpers/pki";

const BASE = "http://crl.example/v1/pki/crl";

async function setup(shards: number) {
  const ctx = await pkiWithRoot();
  await write(`${ctx.path}/roles/ec`, { allow_any_name: true, key_type: "ec", max_ttl: "24h" });
  await write(`${ctx.path}/config/urls`, { crl_distribution_points: [BASE] });
  if (shards > 1) expect((await write(`${ctx.path}/config/crl`, { shard_count: shards })).status).toBe(200);
  return ctx;
}

interface Leaf {
  serial: string;
  cdp: string[];
}

async function issue(path: string, role = "ec"): Promise<Leaf & { pem: string }> {
  const r = await write(`${path}/issue/${role}`, { common_name: "leaf.example", ttl: "1h" });
  expect(r.status, r.text).toBe(200);
  return { ...leafOf(r.body.data.certificate as string, r.body.data.serial_number as string), pem: r.body.data.certificate as string };
}

function leafOf(pem: string, serial: string): Leaf {
  const cert = new x509.X509Certificate(pem);
  const cdp = cert.getExtension(x509.CRLDistributionPointsExtension);
  const urls = (cdp?.distributionPoints ?? []).flatMap((d) => (d.distributionPoint?.fullName ?? []).map((n) => n.uniformResourceIdentifier ?? ""));
  return { serial, cdp: urls };
}

const intOf = (b: ArrayBuffer) => new Uint8Array(b).slice(2).reduce((a, x) => a * 256 + x, 0);
const colon = (hex: string) => (hex.toLowerCase().match(/../g) ?? []).join(":").replace(/^(00:)+/, "");
const modOf = (serial: string, n: number) => Number(BigInt(`0x${serial.replaceAll(":", "")}`) % BigInt(n));

/** The PEM form of a CRL path (`crl`, `crl/shard/<n>`, `crl/shard/<n>/delta`), parsed. */
async function crlAt(path: string, which: string) {
  const r = await api("GET", `${path}/${which}/pem`, { token: null });
  expect(r.status, `${which}: ${r.text}`).toBe(200);
  const crl = new x509.X509Crl(r.text);
  const ext = (oid: string) => crl.extensions.find((e) => e.type === oid);
  const idpExt = ext("2.5.29.28");
  const idp = idpExt ? AsnConvert.parse(idpExt.value, IssuingDistributionPoint) : null;
  return {
    crl,
    number: intOf(ext("2.5.29.20")?.value ?? new ArrayBuffer(2)),
    thisUpdate: crl.thisUpdate.getTime(),
    serials: crl.entries.map((e) => colon(e.serialNumber)).sort(),
    idpCritical: idpExt?.critical ?? null,
    idpUrls: (idp?.distributionPoint?.fullName ?? []).map((n) => n.uniformResourceIdentifier ?? ""),
    onlyUser: idp?.onlyContainsUserCerts ?? null,
  };
}

/** The CRL a path answers (JSON {crl} or {certificate}, PEM text, or DER bytes), as base64 DER. */
const derAt = async (at: string) => new x509.X509Crl(await crlBody(at)).toString("base64");
const crlBody = async (at: string): Promise<string | Uint8Array> => {
  const res = await SELF.fetch(`http://lanyard.test/v1/${at}`);
  expect(res.status, at).toBe(200);
  const type = res.headers.get("content-type") ?? "";
  if (type.includes("pkix-crl")) return new Uint8Array(await res.arrayBuffer());
  if (type.includes("json")) {
    const data = ((await res.json()) as { data: { crl?: string; certificate?: string } }).data;
    return String(data.crl ?? data.certificate).trim();
  }
  return (await res.text()).trim();
};

/** One certificate in each of the shards `wanted`, issuing until each has one. */
async function onePerShard(path: string, n: number, wanted: number[]): Promise<Map<number, Leaf>> {
  const got = new Map<number, Leaf>();
  for (let i = 0; i < 200 && got.size < wanted.length; i++) {
    const leaf = await issue(path);
    const s = modOf(leaf.serial, n);
    if (wanted.includes(s) && !got.has(s)) got.set(s, leaf);
  }
  expect(got.size).toBe(wanted.length);
  return got;
}

describe("config/crl shard_count", () => {
  it("defaults to 1, reads back, refuses bad values naming the field; bad shard paths are 400 and 404", async () => {
    const { path } = await setup(1);
    const before = await read(`${path}/config/crl`);
    expect(before.body.data.shard_count).toBe(1);
    for (const bad of [0, -1, 257]) {
      const r = await write(`${path}/config/crl`, { shard_count: bad }, {}, 400);
      expect(r.status, r.text).toBe(400);
      expect(r.body.errors[0]).toContain("shard_count");
    }
    await write(`${path}/config/crl`, { shard_count: "many" }, {}, 400);
    expect((await read(`${path}/config/crl`)).body.data.shard_count).toBe(1);
    // One shard publishes none: every shard path is 404, never 500.
    expect((await api("GET", `${path}/crl/shard/0`, { token: null })).status).toBe(404);
    expect((await write(`${path}/config/crl`, { shard_count: 4 })).body.data.shard_count).toBe(4);
    expect((await read(`${path}/config/crl`)).body.data).toMatchObject({ shard_count: 4, published_shards: 4 });
    expect((await api("GET", `${path}/crl/shard/4`, { token: null })).status).toBe(404);
    for (const bad of ["x", "01", "1.5", "99999999"]) expect((await api("GET", `${path}/crl/shard/${bad}`, { token: null })).status, bad).toBe(400);
    expect((await api("GET", `${path}/crl/shard/3`, { token: null })).status).toBe(200);
  });
});

describe("four shards", () => {
  it("each certificate names shard serial mod 4; each shard CRL has a critical IDP naming exactly that URL and lists only its shard", async () => {
    const { path, root } = await setup(4);
    const leaves = await onePerShard(path, 4, [0, 1, 2]);
    const id = (await env.DB.prepare("SELECT id FROM mounts WHERE path = ?").bind(`${path}/`).first<{ id: string }>())?.id;
    for (const [s, leaf] of leaves) {
      expect(leaf.cdp).toEqual([`${BASE}/shard/${s}`]);
      const row = await env.DB.prepare("SELECT crl_shard FROM pki_certs WHERE mount_no = (SELECT no FROM pki_ids WHERE id = ?) AND serial = unhex(replace(?, ':', ''))").bind(id, leaf.serial).first<{ crl_shard: number }>();
      expect(row?.crl_shard).toBe(s);
    }
    for (const leaf of leaves.values()) expect((await write(`${path}/revoke`, { serial_number: leaf.serial })).status).toBe(200);
    const rootKey = new x509.X509Certificate(root).publicKey;
    for (let s = 0; s < 4; s++) {
      const c = await crlAt(path, `crl/shard/${s}`);
      expect(await c.crl.verify({ publicKey: rootKey })).toBe(true);
      expect(c.idpCritical).toBe(true);
      expect(c.idpUrls).toEqual([`${BASE}/shard/${s}`]);
      expect(c.onlyUser).toBe(true);
      expect(c.serials).toEqual(s === 3 ? [] : [leaves.get(s)?.serial]);
      // The per-issuer forms are the same CRL; the delta names this shard's number and scope.
      const pem = await api("GET", `${path}/crl/shard/${s}/pem`, { token: null });
      expect((await api("GET", `${path}/issuer/default/crl/shard/${s}/pem`, { token: null })).text).toBe(`${pem.text}\n`);
      const der = await api("GET", `${path}/issuer/default/crl/der/shard/${s}`, { token: null });
      expect([der.status, der.headers.get("content-type")]).toEqual([200, "application/pkix-crl"]);
      const delta = await crlAt(path, `crl/shard/${s}/delta`);
      expect(intOf(delta.crl.extensions.find((e) => e.type === "2.5.29.27")?.value ?? new ArrayBuffer(2))).toBe(c.number);
      expect(delta.idpUrls).toEqual(c.idpUrls);
    }
  });

  it("a revocation rebuilds only its shard; the full CRL follows on crl/rotate and lists every revocation", async () => {
    const { path } = await setup(4);
    const leaves = await onePerShard(path, 4, [1, 2]);
    await read(`${path}/crl/rotate`);
    const snap = async () => Object.fromEntries(await Promise.all(["crl", "crl/shard/0", "crl/shard/1", "crl/shard/2", "crl/shard/3"].map(async (w) => [w, await crlAt(path, w)] as const)));
    const before = await snap();
    await new Promise((r) => setTimeout(r, 1100)); // a rebuilt CRL gets a later thisUpdate (whole seconds)
    await write(`${path}/revoke`, { serial_number: leaves.get(1)?.serial });
    const after = await snap();
    expect(after["crl/shard/1"]?.number).toBeGreaterThan(before["crl/shard/1"]?.number ?? Infinity);
    expect(after["crl/shard/1"]?.serials).toEqual([leaves.get(1)?.serial]);
    for (const w of ["crl", "crl/shard/0", "crl/shard/2", "crl/shard/3"]) {
      expect(after[w]?.number, w).toBe(before[w]?.number);
      expect(after[w]?.thisUpdate, w).toBe(before[w]?.thisUpdate);
    }
    await write(`${path}/revoke`, { serial_number: leaves.get(2)?.serial });
    await read(`${path}/crl/rotate`);
    const full = await crlAt(path, "crl");
    expect(full.idpCritical).toBeNull();
    expect(full.serials).toEqual([leaves.get(1)?.serial, leaves.get(2)?.serial].sort());
  });
});

describe("every CRL path with /shard/<n> appended", () => {
  it("serves that shard, whichever CRL path the configured distribution point names", async () => {
    const { path, root } = await setup(1);
    const local = `http://crl.example/v1/${path}/issuer/default/crl/pem`;
    await write(`${path}/config/urls`, { crl_distribution_points: [local] });
    expect((await write(`${path}/config/crl`, { shard_count: 2 })).status).toBe(200);
    const leaf = (await onePerShard(path, 2, [1])).get(1);
    expect(leaf?.cdp).toEqual([`${local}/shard/1`]);
    expect((await write(`${path}/revoke`, { serial_number: leaf?.serial })).status).toBe(200);
    // The URL the certificate names, fetched as a relying party would (its path on this mount).
    const named = await api("GET", (leaf?.cdp[0] ?? "").replace(`http://crl.example/v1/`, ""), { token: null });
    expect(named.status, named.text).toBe(200);
    const crl = new x509.X509Crl(named.text.trim());
    expect(await crl.verify({ publicKey: new x509.X509Certificate(root).publicKey })).toBe(true);
    expect(crl.entries.map((e) => colon(e.serialNumber))).toEqual([leaf?.serial]);
    const complete = await derAt(`${path}/crl/shard/1/pem`);
    const delta = await derAt(`${path}/crl/shard/1/delta/pem`);
    expect(crl.toString("base64")).toBe(complete);
    const forms: [string, string][] = [
      ["crl/pem", complete], ["crl/delta/pem", delta], ["cert/crl", complete], ["cert/delta-crl", delta],
      ["issuer/default/crl/pem", complete], ["issuer/default/crl/delta", delta], ["issuer/default/crl/delta/pem", delta],
      ["crl", complete], ["crl/delta", delta], ["issuer/default/crl", complete], ["issuer/default/crl/der", complete], ["issuer/default/crl/delta/der", delta],
    ];
    for (const [base, want] of forms) expect(await derAt(`${path}/${base}/shard/1`), base).toBe(want);
  });
});

describe("changing the shard count", () => {
  it("a certificate from before sharding names the full CRL, which a revocation rebuilds at once; 1 → 4 → 1 keeps shards published", async () => {
    const { path } = await setup(1);
    const old = await issue(path);
    expect(old.cdp).toEqual([BASE]);
    await write(`${path}/config/crl`, { shard_count: 4 });
    const sharded = (await onePerShard(path, 4, [3])).get(3);
    await write(`${path}/config/crl`, { shard_count: 1 });
    expect((await read(`${path}/config/crl`)).body.data).toMatchObject({ shard_count: 1, published_shards: 4 });
    const later = await issue(path);
    expect(later.cdp).toEqual([BASE]);

    await write(`${path}/revoke`, { serial_number: old.serial });
    expect((await crlAt(path, "crl")).serials).toEqual([old.serial]);
    expect((await crlAt(path, "crl/shard/3")).serials).toEqual([]);
    // Shard 3 is still published and still takes its certificates' revocations.
    await write(`${path}/revoke`, { serial_number: sharded?.serial });
    expect((await crlAt(path, "crl/shard/3")).serials).toEqual([sharded?.serial]);
    await write(`${path}/config/crl`, { shard_count: 2 });
    expect((await read(`${path}/config/crl`)).body.data.published_shards).toBe(4);
    expect((await api("GET", `${path}/crl/shard/3/pem`, { token: null })).status).toBe(200);
  });
});

describe("CRL shard numbers after a restore", () => {
  it("every shard's next number is above every number it published, with D1 rolled back and the counters lost", async () => {
    const { path } = await setup(2);
    const leaves = await onePerShard(path, 2, [0, 1]);
    await read(`${path}/crl/rotate`);
    const early = await crlAt(path, "crl/shard/0");
    const highest: Record<string, number> = {};
    for (const [s, leaf] of leaves) {
      await write(`${path}/revoke`, { serial_number: leaf.serial });
      highest[s] = (await crlAt(path, `crl/shard/${s}/delta`)).number;
    }
    const id = (await env.DB.prepare("SELECT id FROM mounts WHERE path = ?").bind(`${path}/`).first<{ id: string }>())?.id;
    await env.DB.prepare("UPDATE pki_crls SET number = ? WHERE mount_id = ?").bind(early.number, id).run();
    const accessor = (await read(`sys/mounts/${path}`)).body.data.accessor as string;
    await runInDurableObject(env.AUTHORITY.getByName(accessor), async (_o, state: DurableObjectState) => {
      for (const key of (await state.storage.list({ prefix: "crl:number:" })).keys()) await state.storage.delete(key);
    });
    await read(`${path}/crl/rotate`);
    for (const s of [0, 1]) expect((await crlAt(path, `crl/shard/${s}`)).number).toBeGreaterThan(highest[s] ?? Infinity);
  });
});

describe("other issuance paths", () => {
  it("sign-verbatim names its shard; a no_store certificate revoked by PEM goes on the shard its CDP names", async () => {
    const { path } = await setup(4);
    const { pem: csr } = await makeCsr("verbatim.example");
    const v = await write(`${path}/sign-verbatim`, { csr, ttl: "1h" });
    const verbatim = leafOf(v.body.data.certificate as string, v.body.data.serial_number as string);
    expect(verbatim.cdp).toEqual([`${BASE}/shard/${modOf(verbatim.serial, 4)}`]);

    await write(`${path}/roles/nostore`, { allow_any_name: true, key_type: "ec", max_ttl: "24h", no_store: true });
    const unstored = await issue(path, "nostore");
    const shard = modOf(unstored.serial, 4);
    expect(unstored.cdp).toEqual([`${BASE}/shard/${shard}`]);
    await write(`${path}/revoke`, { certificate: unstored.pem });
    expect((await crlAt(path, `crl/shard/${shard}`)).serials).toEqual([unstored.serial]);
  });
});
