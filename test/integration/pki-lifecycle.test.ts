/** Mount lifecycle, ACLs, namespaces, conditional GETs, key-type imports and sign-intermediate. */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, del, list, mount, read, tokenWithPolicy, write } from "../helpers/api";
import { expectSignedBy, parseCert, pkiWithRoot, x509 } from "../helpers/pki";

describe("mount lifecycle", () => {
  it("disabling a PKI mount removes its rows and its Authority's serials", async () => {
    const { path } = await pkiWithRoot();
    await write(`${path}/roles/r`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
    await write(`${path}/issue/r`, { common_name: "a.example" });
    const mounts = await read("sys/mounts");
    const { uuid: mountId, accessor } = mounts.body.data[`${path}/`];
    // pki_certs names its mount by number (pki_ids, migration 0019).
    const mountColumn = (table: string) => (table === "pki_certs" ? "mount_no = (SELECT no FROM pki_ids WHERE id = ?)" : "mount_id = ?");
    const count = async (table: string) =>
      (await env.DB.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE ${mountColumn(table)}`).bind(mountId).first<{ n: number }>())?.n;
    expect(await count("pki_certs")).toBe(2);
    // Serials are reserved in batches per isolate (src/engines/pki/issuance/serials.ts): at least the two used.
    expect(await env.AUTHORITY.getByName(accessor).reservedCount()).toBeGreaterThanOrEqual(2);
    await del(`sys/mounts/${path}`);
    for (const t of ["pki_certs", "pki_roles", "pki_issuers", "pki_keys", "pki_config"]) expect(await count(t), t).toBe(0);
    expect(await env.AUTHORITY.getByName(accessor).reservedCount()).toBe(0);
  });

  it("works inside a namespace, isolated from the root namespace", async () => {
    await write("sys/namespaces/team-pki", {});
    const path = `pki-${crypto.randomUUID().slice(0, 8)}`;
    await write(`sys/mounts/${path}`, { type: "pki" }, { namespace: "team-pki" }, 204);
    await write(`${path}/root/generate/internal`, { common_name: "Team Root", key_type: "ec" }, { namespace: "team-pki" });
    expect((await list(`${path}/issuers`, { namespace: "team-pki", token: null })).body.data.keys).toHaveLength(1);
    expect((await api("GET", `team-pki/${path}/ca/pem`, { token: null })).text).toContain("BEGIN CERTIFICATE");
    // In the root namespace the path does not exist: without a token that is 403 (docs/http-conventions.md).
    expect((await api("GET", `${path}/ca/pem`, { token: null })).status).toBe(403);
    expect((await api("GET", `${path}/ca/pem`)).status).toBe(404);
  });
});

describe("ACL", () => {
  it("a token allowed only issue/web can issue and nothing else", async () => {
    const { path } = await pkiWithRoot();
    await write(`${path}/roles/web`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
    await write(`${path}/roles/admin`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
    const token = await tokenWithPolicy(`path "${path}/issue/web" { capabilities = ["update"] }`);
    expect((await api("POST", `${path}/issue/web`, { token, body: { common_name: "a.example" } })).status).toBe(200);
    expect((await api("POST", `${path}/issue/admin`, { token, body: { common_name: "a.example" } })).status).toBe(403);
    expect((await api("POST", `${path}/root/generate/internal`, { token, body: { common_name: "x" } })).status).toBe(403);
    expect((await api("GET", `${path}/roles/web`, { token })).status).toBe(403);
    // Public paths need no capability at all.
    expect((await api("GET", `${path}/ca/pem`, { token })).status).toBe(200);
  });
});

describe("conditional GET (If-Modified-Since)", () => {
  it("answers 304 on CA paths when nothing changed since the given time", async () => {
    const { path } = await pkiWithRoot();
    const later = new Date(Date.now() + 60_000).toUTCString();
    const earlier = new Date(Date.now() - 3600_000).toUTCString();
    for (const p of ["ca", "ca/pem", "cert/ca/raw", "issuer/default/pem", "issuer/default/der", "issuer/default/json"]) {
      const fresh = await api("GET", `${path}/${p}`, { token: null, headers: { "if-modified-since": later } });
      expect(fresh.status, p).toBe(304);
      expect(fresh.headers.get("last-modified"), p).toBeTruthy();
      expect((await api("GET", `${path}/${p}`, { token: null, headers: { "if-modified-since": earlier } })).status, p).toBe(200);
    }
  });
});

describe("imports of every key type", () => {
  for (const [keyType, keyBits] of [
    ["rsa", 2048],
    ["ed25519", 0],
    ["ec", 521],
  ] as const) {
    it(`${keyType}: an exported root and its key import into another mount and issue`, async () => {
      const src = await mount("pki");
      const root = await write(`${src}/root/generate/exported`, { common_name: `Root ${keyType}`, key_type: keyType, key_bits: keyBits });
      const dst = await mount("pki");
      const imp = await write(`${dst}/config/ca`, { pem_bundle: `${root.body.data.certificate}\n${root.body.data.private_key}` });
      expect(imp.body.data.imported_keys).toHaveLength(1);
      const keyId = imp.body.data.imported_keys[0];
      expect((await read(`${dst}/key/${keyId}`)).body.data.key_type).toBe(keyType);
      await write(`${dst}/roles/r`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
      const leaf = await write(`${dst}/issue/r`, { common_name: "leaf.example" });
      await expectSignedBy(leaf.body.data.certificate, root.body.data.certificate);
    });
  }

  it("pkcs8 private keys import too", async () => {
    const src = await mount("pki");
    const root = await write(`${src}/root/generate/exported`, { common_name: "P8", key_type: "ec", private_key_format: "pkcs8" });
    expect(root.body.data.private_key).toContain("BEGIN PRIVATE KEY");
    const dst = await mount("pki");
    const imp = await write(`${dst}/issuers/import/bundle`, { pem_bundle: `${root.body.data.private_key}\n${root.body.data.certificate}` });
    expect(Object.values(imp.body.data.mapping)).toEqual(imp.body.data.imported_keys);
  });
});

describe("sign-intermediate", () => {
  it("derives the path length from the signer, honours max_path_length, name constraints and use_csr_values", async () => {
    const rootMount = await mount("pki");
    const root = await write(`${rootMount}/root/generate/internal`, { common_name: "PL Root", key_type: "ec", max_path_length: 2, not_after: "2030-01-01T00:00:00Z" });
    const intMount = await mount("pki");
    const csr = await write(`${intMount}/intermediate/generate/exported`, {
      common_name: "From CSR",
      key_type: "ec",
      add_basic_constraints: true,
      alt_names: "int.example",
      format: "pem_bundle",
    });
    expect(csr.body.data.csr.startsWith("-----BEGIN EC PRIVATE KEY-----")).toBe(true);
    const csrPem = (csr.body.data.csr as string).slice((csr.body.data.csr as string).indexOf("-----BEGIN CERTIFICATE REQUEST-----"));
    const signed = await write(`${rootMount}/root/sign-intermediate`, {
      csr: csrPem,
      common_name: "Int CA",
      ttl: "24h",
      permitted_dns_domains: "example.com,.example.org",
    });
    const cert = parseCert(signed.body.data.certificate);
    expect(cert.subject).toBe("CN=Int CA");
    expect(cert.getExtension(x509.BasicConstraintsExtension)).toMatchObject({ ca: true, pathLength: 1 });
    expect(cert.getExtension("2.5.29.30")?.critical).toBe(true);
    expect(signed.body.data.ca_chain).toEqual([root.body.data.certificate]);
    expect(typeof signed.body.data.expiration).toBe("string");
    await expectSignedBy(signed.body.data.certificate, root.body.data.certificate);
    expect((await list(`${rootMount}/certs`)).body.data.keys).toContain(signed.body.data.serial_number);

    const kept = await write(`${rootMount}/root/sign-intermediate`, { csr: csrPem, use_csr_values: true, max_path_length: 0, ttl: "24h" });
    const c2 = parseCert(kept.body.data.certificate);
    expect(c2.subject).toBe("CN=From CSR");
    expect(c2.getExtension(x509.SubjectAlternativeNameExtension)?.names.items.map((n) => n.value)).toEqual(["int.example"]);
    expect(c2.getExtension(x509.BasicConstraintsExtension)).toMatchObject({ ca: true, pathLength: 0 });

    // An intermediate with pathlen 0 cannot sign another CA.
    await write(`${intMount}/intermediate/set-signed`, { certificate: kept.body.data.certificate });
    const sub = await mount("pki");
    const subCsr = await write(`${sub}/intermediate/generate/internal`, { common_name: "Sub", key_type: "ec" });
    const refused = await write(`${intMount}/root/sign-intermediate`, { csr: subCsr.body.data.csr, common_name: "Sub", ttl: "1h" }, {}, 400);
    expect(refused.body.errors[0]).toContain("path length");
  });

  it("intermediate/cross-sign makes a CSR for an existing key, which another root signs", async () => {
    const { path, issuerId } = await pkiWithRoot();
    const keyId = (await read(`${path}/issuer/${issuerId}`)).body.data.key_id;
    const csr = await write(`${path}/intermediate/cross-sign`, { common_name: "Test Root CA", key_ref: keyId });
    expect(csr.body.data.key_id).toBe(keyId);
    const other = await pkiWithRoot({ cn: "Other Root" });
    const cross = await write(`${other.path}/root/sign-intermediate`, { csr: csr.body.data.csr, use_csr_values: true, ttl: "1h" });
    await expectSignedBy(cross.body.data.certificate, other.root);
    expect(parseCert(cross.body.data.certificate).publicKey.rawData).toEqual(parseCert((await read(`${path}/issuer/${issuerId}`)).body.data.certificate).publicKey.rawData);
    expect((await write(`${path}/intermediate/cross-sign`, { key_type: "ec" }, {}, 400)).body.errors[0]).toContain("key_type nor key_bits");
  });

  it("adds requested key usages to CertSign/CRLSign and truncates notAfter to the signer's (Vault's docs)", async () => {
    const rootMount = await mount("pki");
    const root = await write(`${rootMount}/root/generate/internal`, { common_name: "Short Root", key_type: "ec", ttl: "48h" });
    const intMount = await mount("pki");
    const csr = await write(`${intMount}/intermediate/generate/internal`, { common_name: "I", key_type: "ec" });
    const signed = await write(`${rootMount}/root/sign-intermediate`, {
      csr: csr.body.data.csr,
      common_name: "I",
      ttl: "700h",
      key_usage: "DigitalSignature,KeyEncipherment",
    });
    const cert = parseCert(signed.body.data.certificate);
    const F = x509.KeyUsageFlags;
    expect(cert.getExtension(x509.KeyUsagesExtension)?.usages).toBe(F.digitalSignature | F.keyEncipherment | F.keyCertSign | F.cRLSign);
    expect(cert.notAfter.getTime()).toBe(parseCert(root.body.data.certificate).notAfter.getTime());
  });

  it("refuses a missing CSR or CN and a ttl above the mount maximum", async () => {
    const { path } = await pkiWithRoot();
    expect((await write(`${path}/root/sign-intermediate`, { common_name: "x" }, {}, 400)).body.errors[0]).toContain("csr");
    const other = await mount("pki");
    const csr = await write(`${other}/intermediate/generate/internal`, { common_name: "I", key_type: "ec" });
    expect((await write(`${path}/root/sign-intermediate`, { csr: csr.body.data.csr }, {}, 400)).body.errors[0]).toContain("common_name");
    expect((await write(`${path}/root/sign-intermediate`, { csr: csr.body.data.csr, common_name: "I", ttl: "10000h" }, {}, 400)).body.errors[0]).toContain("ttl");
    expect((await write(`${path}/issuer/ghost/sign-intermediate`, { csr: csr.body.data.csr, common_name: "I" }, {}, 400)).body.errors[0]).toContain(
      "unable to find PKI issuer for reference: ghost",
    );
  });
});
