/**
 * EC P-224 judged by openssl (Vault's `key_type` `ec` with `key_bits` 224, signed with ECDSA-SHA256
 * as Vault signs with a P-224 key). WebCrypto
 * has no P-224, so the service signs it in software; here openssl checks every signature, reads
 * the curve name, reads the exported keys, and makes the CSR and the imported CA itself.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keyMatchesCert, openssl, verify, x509Text } from "../helpers/openssl";
import { CA_NOT_AFTER, call, ok, pkiMount } from "./client";

let dir = "";
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "lanyard-p224-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function ossl(args: string[]): Promise<string> {
  const r = await openssl(args);
  expect(r.code, `openssl ${args.join(" ")}: ${r.stderr}`).toBe(0);
  return r.stdout;
}

async function file(name: string, body: string): Promise<string> {
  const p = path.join(dir, name);
  await writeFile(p, body.endsWith("\n") ? body : `${body}\n`);
  return p;
}

async function expectP224Ecdsa256(pem: string): Promise<void> {
  const text = await x509Text(pem);
  expect(text).toContain("ASN1 OID: secp224r1");
  expect(text).toContain("NIST CURVE: P-224");
  expect(text).toContain("Public-Key: (224 bit)");
  expect(text).toContain("Signature Algorithm: ecdsa-with-SHA256");
}

describe("EC P-224, judged by openssl", () => {
  let mount = "";
  let root = "";

  beforeAll(async () => {
    mount = await pkiMount();
    const r = await ok("POST", `${mount}/root/generate/exported`, { common_name: "P-224 Root", key_type: "ec", key_bits: 224, not_after: CA_NOT_AFTER });
    root = r.body.data.certificate;
    // openssl reads the exported SEC1 key and it matches the certificate.
    const keyPath = await file("root.key", r.body.data.private_key);
    expect(await ossl(["ec", "-in", keyPath, "-noout", "-text"])).toContain("ASN1 OID: secp224r1");
    expect(await keyMatchesCert(r.body.data.private_key, root)).toBe(true);
  });

  it("the root is a P-224 self-signed CA that openssl verifies", async () => {
    await expectP224Ecdsa256(root);
    const v = await verify(root, root);
    expect(v.ok, v.output).toBe(true);
  });

  it("issues P-224 leaves (role key_bits 224) that verify, with a key openssl reads", async () => {
    await ok("POST", `${mount}/roles/p224`, { allow_any_name: true, key_type: "ec", key_bits: 224, ttl: "1h" });
    for (const format of ["der", "pkcs8"] as const) {
      const r = await ok("POST", `${mount}/issue/p224`, { common_name: "leaf.example.com", private_key_format: format });
      const cert = r.body.data.certificate as string;
      await expectP224Ecdsa256(cert);
      const v = await verify(cert, root);
      expect(v.ok, v.output).toBe(true);
      const keyPath = await file(`leaf-${format}.key`, r.body.data.private_key);
      expect(await ossl(["pkey", "-in", keyPath, "-noout", "-text"])).toContain("ASN1 OID: secp224r1");
      expect(await keyMatchesCert(r.body.data.private_key, cert)).toBe(true);
    }
  });

  it("revokes a leaf: openssl verifies the P-224 root's CRL and finds the serial on it", async () => {
    await ok("POST", `${mount}/roles/crl`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
    const leaf = await ok("POST", `${mount}/issue/crl`, { common_name: "revoked.example.com" });
    await ok("POST", `${mount}/revoke`, { serial_number: leaf.body.data.serial_number });
    const crl = await call("GET", `${mount}/crl/pem`, undefined, null);
    expect(crl.status, crl.text).toBe(200);
    const crlPath = await file("root.crl", crl.text);
    const rootPath = await file("root-for-crl.pem", root);
    const r = await openssl(["crl", "-in", crlPath, "-CAfile", rootPath, "-noout", "-text"]);
    expect(r.code, r.stderr).toBe(0);
    expect(`${r.stdout}${r.stderr}`).toContain("verify OK");
    expect(r.stdout).toContain("Signature Algorithm: ecdsa-with-SHA256");
    const serial = (leaf.body.data.serial_number as string).replace(/:/g, "").toUpperCase().replace(/^0+/, "");
    expect(r.stdout.replace(/^0+/gm, "")).toContain(serial);
  });

  it("signs an openssl-made P-224 CSR", async () => {
    const keyPath = path.join(dir, "csr.key");
    await ossl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-224", "-out", keyPath]);
    const csrPath = path.join(dir, "csr.pem");
    await ossl(["req", "-new", "-key", keyPath, "-subj", "/CN=csr.example.com", "-addext", "subjectAltName=DNS:csr.example.com", "-out", csrPath]);
    await ok("POST", `${mount}/roles/web`, { allowed_domains: "example.com", allow_subdomains: true, key_type: "ec", key_bits: 224, ttl: "1h" });
    const r = await ok("POST", `${mount}/sign/web`, { csr: await readFile(csrPath, "utf8"), common_name: "csr.example.com" });
    const cert = r.body.data.certificate as string;
    await expectP224Ecdsa256(cert);
    expect(await x509Text(cert)).toContain("DNS:csr.example.com");
    const v = await verify(cert, root);
    expect(v.ok, v.output).toBe(true);
    expect(await keyMatchesCert(await readFile(keyPath, "utf8"), cert)).toBe(true);
  });

  it("a P-224 intermediate: CSR from the service, signed by the P-224 root, issues a chain openssl verifies", async () => {
    const int = await pkiMount();
    const csr = await ok("POST", `${int}/intermediate/generate/internal`, { common_name: "P-224 Int", key_type: "ec", key_bits: 224 });
    const csrPath = await file("int.csr", csr.body.data.csr);
    expect(await ossl(["req", "-in", csrPath, "-verify", "-noout", "-text"])).toContain("ASN1 OID: secp224r1");
    const signed = await ok("POST", `${mount}/root/sign-intermediate`, { csr: csr.body.data.csr, common_name: "P-224 Int", ttl: "700h" });
    const intPem = signed.body.data.certificate as string;
    await ok("POST", `${int}/intermediate/set-signed`, { certificate: intPem });
    await ok("POST", `${int}/roles/leaf`, { allow_any_name: true, key_type: "ec", key_bits: 256, ttl: "1h" });
    const leaf = await ok("POST", `${int}/issue/leaf`, { common_name: "deep.example.com" });
    const v = await verify(leaf.body.data.certificate, root, [intPem]);
    expect(v.ok, v.output).toBe(true);
    expect(await x509Text(leaf.body.data.certificate)).toContain("Signature Algorithm: ecdsa-with-SHA256");
  });

  it("imports an openssl-made P-224 CA with its key and issues from it", async () => {
    const keyPath = path.join(dir, "ca.key");
    await ossl(["ecparam", "-name", "secp224r1", "-genkey", "-noout", "-out", keyPath]);
    const caPath = path.join(dir, "ca.pem");
    await ossl(["req", "-x509", "-new", "-key", keyPath, "-subj", "/CN=OpenSSL P-224 CA", "-days", "30", "-sha256", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", caPath]);
    const caPem = await readFile(caPath, "utf8");
    const m = await pkiMount();
    await ok("POST", `${m}/issuers/import/bundle`, { pem_bundle: `${await readFile(keyPath, "utf8")}\n${caPem}` });
    await ok("POST", `${m}/roles/any`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
    const leaf = await ok("POST", `${m}/issue/any`, { common_name: "imported.example.com" });
    const v = await verify(leaf.body.data.certificate, caPem);
    expect(v.ok, v.output).toBe(true);
    // A key exported with keys/generate/exported is read by openssl ec.
    const k = await ok("POST", `${m}/keys/generate/exported`, { key_type: "ec", key_bits: 224 });
    const kPath = await file("gen.key", k.body.data.private_key);
    expect(await ossl(["ec", "-in", kPath, "-check", "-noout"])).toBe("");
  });
});
