/**
 * End-to-end PKI checks with openssl as the independent judge: every certificate the service
 * returns is verified with `openssl verify` against the chain it came with, and its contents
 * (SANs, key usage, basic constraints, validity, serial) are read back with `openssl x509`.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { keyMatchesCert, openssl, opensslCsr, verify, x509Field, x509Text } from "../helpers/openssl";
import { CA_NOT_AFTER, call, ok, pkiMount } from "./client";

describe("roots, judged by openssl", () => {
  for (const [keyType, keyBits, sigAlg] of [
    ["rsa", 2048, "sha256WithRSAEncryption"],
    ["ec", 256, "ecdsa-with-SHA256"],
    ["ec", 384, "ecdsa-with-SHA384"],
    ["ec", 521, "ecdsa-with-SHA512"],
    ["ed25519", 0, "ED25519"],
  ] as const) {
    it(`${keyType} ${keyBits}: self-signed CA with the profile of RFC 5280 §4.2.1.9`, async () => {
      const path = await pkiMount();
      const r = await ok("POST", `${path}/root/generate/exported`, {
        common_name: `Root ${keyType}`,
        key_type: keyType,
        key_bits: keyBits,
        not_after: CA_NOT_AFTER,
        max_path_length: 2,
        organization: "Lanyard Test",
      });
      const pem = r.body.data.certificate as string;
      const v = await verify(pem, pem);
      expect(v.ok, v.output).toBe(true);
      const text = await x509Text(pem);
      expect(text).toContain(`Signature Algorithm: ${sigAlg}`);
      expect(text).toMatch(/X509v3 Basic Constraints: critical\s+CA:TRUE, pathlen:2/);
      expect(text).toMatch(/X509v3 Key Usage: critical\s+Certificate Sign, CRL Sign/);
      expect(text).toContain("X509v3 Subject Key Identifier");
      expect(await x509Field(pem, "-subject")).toBe(`subject=O = Lanyard Test, CN = Root ${keyType}`);
      const serial = (await x509Field(pem, "-serial")).replace("serial=", "").toLowerCase();
      expect(r.body.data.serial_number.replace(/:/g, "")).toBe(serial.replace(/^0+/, "").padStart(serial.replace(/^0+/, "").length + (serial.replace(/^0+/, "").length % 2), "0"));
      expect(await keyMatchesCert(r.body.data.private_key, pem)).toBe(true);
      // The key is in its traditional encoding, as Vault returns it (RSA: PKCS#1, EC: SEC1, Ed25519:
      // PKCS#8), and openssl reads it.
      const label = keyType === "rsa" ? "RSA PRIVATE KEY" : keyType === "ec" ? "EC PRIVATE KEY" : "PRIVATE KEY";
      expect(r.body.data.private_key).toContain(`-----BEGIN ${label}-----`);
      const notAfter = new Date((await x509Field(pem, "-enddate")).replace("notAfter=", "")).getTime() / 1000;
      // spec "Certificate response": expiration is Unix seconds as a decimal string.
      expect(String(notAfter)).toBe(r.body.data.expiration);
    });
  }

  it("not_after 9999-12-31T23:59:59Z is a GeneralizedTime (RFC 5280 §4.1.2.5) openssl reads", async () => {
    const path = await pkiMount();
    const r = await ok("POST", `${path}/root/generate/internal`, { common_name: "Forever", key_type: "ec", not_after: "9999-12-31T23:59:59Z" });
    const pem = r.body.data.certificate as string;
    expect(await x509Field(pem, "-enddate")).toBe("notAfter=Dec 31 23:59:59 9999 GMT");
    expect((await verify(pem, pem)).ok).toBe(true);
    expect(r.body.data.expiration).toBe("253402300799");
  });

  it("RSA-PSS and SHA-512 signatures (use_pss, signature_bits)", async () => {
    const path = await pkiMount();
    const r = await ok("POST", `${path}/root/generate/internal`, { common_name: "PSS Root", key_type: "rsa", signature_bits: 512, use_pss: true });
    const pem = r.body.data.certificate as string;
    expect((await verify(pem, pem)).ok).toBe(true);
    const text = await x509Text(pem);
    expect(text).toContain("Signature Algorithm: rsassaPss");
    expect(text).toContain("Hash Algorithm: sha512");
  });
});

describe("a two-level chain: root mount signs an intermediate mount", () => {
  let rootPem = "";
  let intPem = "";
  let intMount = "";

  beforeAll(async () => {
    const rootMount = await pkiMount("root");
    intMount = await pkiMount("int");
    rootPem = (await ok("POST", `${rootMount}/root/generate/internal`, { common_name: "Chain Root", key_type: "rsa", not_after: CA_NOT_AFTER })).body.data.certificate;
    const csr = await ok("POST", `${intMount}/intermediate/generate/internal`, { common_name: "Chain Intermediate", key_type: "ec", key_bits: 384 });
    const signed = await ok("POST", `${rootMount}/root/sign-intermediate`, { csr: csr.body.data.csr, common_name: "Chain Intermediate", not_after: "2035-01-01T00:00:00Z" });
    intPem = signed.body.data.certificate;
    const v = await verify(intPem, rootPem);
    expect(v.ok, v.output).toBe(true);
    const set = await ok("POST", `${intMount}/intermediate/set-signed`, { certificate: `${intPem}\n${rootPem}` });
    expect(set.body.data.imported_issuers).toHaveLength(2);
    await ok("POST", `${intMount}/roles/svc`, {
      allowed_domains: ["svc.internal"],
      allow_subdomains: true,
      allow_bare_domains: true,
      key_type: "ec",
      ext_key_usage: ["TimeStamping"],
      allowed_uri_sans: ["spiffe://svc.internal/*"],
      allowed_other_sans: ["1.3.6.1.4.1.311.20.2.3;utf8:*@svc.internal"],
      organization: ["Lanyard"],
      basic_constraints_valid_for_non_ca: true,
    });
  });

  it("the intermediate has CA:TRUE and the root as issuer", async () => {
    const text = await x509Text(intPem);
    expect(text).toMatch(/CA:TRUE/);
    expect(text).toContain("Issuer: CN = Chain Root");
  });

  it("issues a leaf that verifies through the chain, with every requested name", async () => {
    const r = await ok("POST", `${intMount}/issue/svc`, {
      common_name: "api.svc.internal",
      alt_names: "svc.internal,ops@svc.internal",
      ip_sans: "10.0.0.1,2001:db8::1",
      uri_sans: "spiffe://svc.internal/api",
      other_sans: "1.3.6.1.4.1.311.20.2.3;UTF8:api@svc.internal",
      ttl: "72h",
    });
    const d = r.body.data;
    expect(d.ca_chain).toHaveLength(2);
    expect(d.issuing_ca.trim()).toBe(intPem.trim());
    const v = await verify(d.certificate, rootPem, [intPem]);
    expect(v.ok, v.output).toBe(true);
    const text = await x509Text(d.certificate);
    expect(text).toContain("DNS:api.svc.internal");
    expect(text).toContain("DNS:svc.internal");
    expect(text).toContain("email:ops@svc.internal");
    expect(text).toContain("IP Address:10.0.0.1");
    expect(text).toContain("IP Address:2001:DB8:0:0:0:0:0:1");
    expect(text).toContain("URI:spiffe://svc.internal/api");
    expect(text).toMatch(/othername: (UPN|msUPN|1\.3\.6\.1\.4\.1\.311\.20\.2\.3)[^\n]*api@svc\.internal/);
    expect(text).toMatch(/X509v3 Key Usage: critical\s+Digital Signature, Key Encipherment, Key Agreement/);
    expect(text).toMatch(/X509v3 Extended Key Usage:\s+TLS Web Server Authentication, TLS Web Client Authentication, Time Stamping/);
    expect(text).toMatch(/X509v3 Basic Constraints: critical\s+CA:FALSE/);
    expect(text).toContain("Subject: O = Lanyard, CN = api.svc.internal");
    const start = new Date((await x509Field(d.certificate, "-startdate")).replace("notBefore=", "")).getTime();
    const end = new Date((await x509Field(d.certificate, "-enddate")).replace("notAfter=", "")).getTime();
    expect((end - start) / 1000).toBe(72 * 3600 + 30);
    expect(Number(d.expiration)).toBe(end / 1000);
    const serial = (await x509Field(d.certificate, "-serial")).replace("serial=", "").toLowerCase().replace(/^0+/, "");
    expect(d.serial_number.replace(/:/g, "").replace(/^0+/, "")).toBe(serial);
    expect(await keyMatchesCert(d.private_key, d.certificate)).toBe(true);
  });

  it("pem_bundle carries key, leaf and the chain, and openssl reads each part", async () => {
    const r = await ok("POST", `${intMount}/issue/svc`, { common_name: "b.svc.internal", format: "pem_bundle", private_key_format: "pkcs8" });
    const d = r.body.data;
    expect(d.private_key).toContain("BEGIN PRIVATE KEY");
    const blocks = (d.certificate as string).match(/-----BEGIN [A-Z ]+-----/g);
    expect(blocks).toEqual(["-----BEGIN EC PRIVATE KEY-----", "-----BEGIN CERTIFICATE-----", "-----BEGIN CERTIFICATE-----", "-----BEGIN CERTIFICATE-----"]);
    const leaf = (d.certificate as string).match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/)?.[0] ?? "";
    expect((await verify(leaf, rootPem, [intPem])).ok).toBe(true);
  });

  it("remove_roots_from_chain drops the self-signed root", async () => {
    const r = await ok("POST", `${intMount}/issue/svc`, { common_name: "c.svc.internal", remove_roots_from_chain: true });
    expect(r.body.data.ca_chain).toHaveLength(1);
    expect(r.body.data.ca_chain[0].trim()).toBe(intPem.trim());
  });

  it("signs CSRs made by openssl (EC, RSA, Ed25519 keys)", async () => {
    await ok("POST", `${intMount}/roles/any`, { allowed_domains: ["svc.internal"], allow_subdomains: true, key_type: "any" });
    for (const alg of ["ec", "rsa", "ed25519"] as const) {
      const { key, csr } = await opensslCsr(`/CN=${alg}.svc.internal`, alg, ["DNS:alt.svc.internal"]);
      const r = await ok("POST", `${intMount}/sign/any`, { csr, common_name: "ignored.svc.internal", ttl: "1h" });
      const v = await verify(r.body.data.certificate, rootPem, [intPem]);
      expect(v.ok, v.output).toBe(true);
      expect(r.body.data.private_key).toBeUndefined();
      expect(await keyMatchesCert(key, r.body.data.certificate)).toBe(true);
      const text = await x509Text(r.body.data.certificate);
      // use_csr_common_name and use_csr_sans default to true.
      expect(text).toContain(`Subject: CN = ${alg}.svc.internal`);
      expect(text).toContain("DNS:alt.svc.internal");
    }
  });

  it("DER output is base64 DER that openssl parses", async () => {
    const r = await ok("POST", `${intMount}/issue/svc`, { common_name: "d.svc.internal", format: "der" });
    const der = Buffer.from(r.body.data.certificate, "base64");
    const fs = await import("node:fs/promises");
    const os = await import("node:os");
    const p = `${os.tmpdir()}/lanyard-der-${crypto.randomUUID()}.der`;
    await fs.writeFile(p, der);
    const out = await openssl(["x509", "-inform", "DER", "-in", p, "-noout", "-subject"]);
    await fs.rm(p);
    expect(out.stdout).toContain("CN = d.svc.internal");
  });
});

describe("AIA and CRL distribution points from config/urls", () => {
  it("appear in issued certificates", async () => {
    const path = await pkiMount();
    await ok("POST", `${path}/config/urls`, {
      issuing_certificates: ["http://pki.example/v1/pki/ca"],
      crl_distribution_points: ["http://pki.example/v1/pki/crl"],
      ocsp_servers: ["http://pki.example/v1/pki/ocsp"],
    });
    const root = (await ok("POST", `${path}/root/generate/internal`, { common_name: "AIA Root", key_type: "ec", not_after: CA_NOT_AFTER })).body.data.certificate;
    await ok("POST", `${path}/roles/r`, { allow_any_name: true, key_type: "ec" });
    const leaf = (await ok("POST", `${path}/issue/r`, { common_name: "x.example" })).body.data.certificate;
    expect((await verify(leaf, root)).ok).toBe(true);
    const text = await x509Text(leaf);
    expect(text).toContain("CA Issuers - URI:http://pki.example/v1/pki/ca");
    expect(text).toContain("OCSP - URI:http://pki.example/v1/pki/ocsp");
    expect(text).toMatch(/X509v3 CRL Distribution Points:\s+Full Name:\s+URI:http:\/\/pki\.example\/v1\/pki\/crl/);
  });
});

describe("200 concurrent issues on one mount", () => {
  it("give 200 distinct serials, all verifying", async () => {
    const path = await pkiMount();
    const root = (await ok("POST", `${path}/root/generate/internal`, { common_name: "Load Root", key_type: "ec", not_after: CA_NOT_AFTER })).body.data.certificate;
    await ok("POST", `${path}/roles/load`, { allow_any_name: true, key_type: "ec", no_store: false });
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => call("POST", `${path}/issue/load`, { common_name: `host-${i}.example`, ttl: "1h" })));
    for (const r of results) expect(r.status, r.text).toBe(200);
    const serials = new Set(results.map((r) => r.body.data.serial_number as string));
    expect(serials.size).toBe(200);
    // One openssl verify over all 200 files: it prints "<file>: OK" per certificate.
    const fs = await import("node:fs/promises");
    const os = await import("node:os");
    const dir = await fs.mkdtemp(`${os.tmpdir()}/lanyard-load-`);
    await fs.writeFile(`${dir}/root.pem`, `${root}\n`);
    const files: string[] = [];
    for (const [i, r] of results.entries()) {
      files.push(`${dir}/leaf-${i}.pem`);
      await fs.writeFile(`${dir}/leaf-${i}.pem`, `${r.body.data.certificate}\n`);
    }
    const v = await openssl(["verify", "-CAfile", `${dir}/root.pem`, ...files]);
    await fs.rm(dir, { recursive: true, force: true });
    expect(v.code, v.stderr).toBe(0);
    expect(v.stdout.trim().split("\n").filter((l) => l.endsWith(": OK"))).toHaveLength(200);
    const listed = await ok("GET", `${path}/certs?list=true`);
    for (const s of serials) expect(listed.body.data.keys).toContain(s);
  });
});
