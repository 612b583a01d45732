/** issue/:role and sign/:role: name policy, TTL rules, formats and errors (Vault API /pki/issue/:name). */
import { beforeAll, describe, expect, it } from "vitest";
import { api, list, patch, read, write } from "../helpers/api";
import { expectSignedBy, makeCsr, parseCert, pkiWithRoot, sans, x509 } from "../helpers/pki";

let path = "";
let root = "";
beforeAll(async () => {
  ({ path, root } = await pkiWithRoot({ ttl: "700h" }));
});

async function issue(role: string, body: Record<string, unknown>, status = 200) {
  return write(`${path}/issue/${role}`, body, {}, status);
}

describe("name policy through the API", () => {
  beforeAll(async () => {
    await write(`${path}/roles/strict`, { allowed_domains: ["example.com"], allow_subdomains: true, key_type: "ec", ttl: "1h", max_ttl: "2h" });
  });

  it("denies the whole request when any name is outside the role", async () => {
    const r = await issue("strict", { common_name: "a.example.com", alt_names: "b.example.com,evil.org" }, 400);
    expect(r.body.errors).toEqual(["subject alternate name evil.org not allowed by this role"]);
    expect((await issue("strict", { common_name: "example.org" }, 400)).body.errors).toEqual(["common name example.org not allowed by this role"]);
    expect((await issue("strict", { common_name: "example.com" }, 400)).body.errors[0]).toContain("not allowed"); // bare needs allow_bare_domains
    expect((await issue("strict", { common_name: "a.example.com", alt_names: "x@evil.org" }, 400)).body.errors).toEqual([
      "email address x@evil.org not allowed by this role",
    ]);
  });

  it("requires a CN unless require_cn is false", async () => {
    const r = await issue("strict", {}, 400);
    expect(r.body.errors[0]).toContain("the common_name field is required");
    await write(`${path}/roles/nocn`, { allowed_domains: "example.com", allow_subdomains: true, require_cn: false, key_type: "ec", ttl: "1h" });
    const ok = await issue("nocn", { alt_names: "x.example.com" });
    const cert = parseCert(ok.body.data.certificate);
    expect(cert.subject).toBe("");
    expect(sans(cert)).toEqual(["dns:x.example.com"]);
    // RFC 5280 §4.2.1.6: with an empty subject the SAN extension is critical.
    expect(cert.getExtension(x509.SubjectAlternativeNameExtension)?.critical).toBe(true);
  });

  it("wildcards, localhost, globs, any_name, exclude_cn_from_sans, hostname shape", async () => {
    const w = await issue("strict", { common_name: "*.example.com" });
    expect(sans(parseCert(w.body.data.certificate))).toEqual(["dns:*.example.com"]);
    await write(`${path}/roles/nowild`, { allowed_domains: "example.com", allow_subdomains: true, allow_wildcard_certificates: false, key_type: "ec", ttl: "1h" });
    await issue("nowild", { common_name: "*.example.com" }, 400);
    expect((await issue("strict", { common_name: "localhost" })).status).toBe(200);
    await write(`${path}/roles/glob`, { allowed_domains: "x*x.foo", allow_glob_domains: true, key_type: "ec", ttl: "1h" });
    await issue("glob", { common_name: "xylophone.files.pyrex.foo" });
    await issue("glob", { common_name: "*.xyx.foo" }, 400);
    await write(`${path}/roles/any`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
    const excl = await issue("any", { common_name: "svc.internal", alt_names: "other.internal", exclude_cn_from_sans: true });
    expect(sans(parseCert(excl.body.data.certificate))).toEqual(["dns:other.internal"]);
    // A CN that is not hostname-shaped stays out of the SANs (cn_validations disabled lets it through).
    await write(`${path}/roles/free`, { allow_any_name: true, enforce_hostnames: false, cn_validations: "disabled", key_type: "ec", ttl: "1h" });
    const free = await issue("free", { common_name: "my service" });
    expect(parseCert(free.body.data.certificate).subject).toBe("CN=my service");
    expect(sans(parseCert(free.body.data.certificate))).toEqual([]);
    // enforce_hostnames refuses bad labels.
    expect((await issue("any", { common_name: "bad_label.example" }, 400)).body.errors[0]).toContain("not allowed");
    // IDN names are punycoded (IDNA ToASCII).
    const idn = await issue("any", { common_name: "bücher.example" });
    expect(sans(parseCert(idn.body.data.certificate))).toEqual(["dns:xn--bcher-kva.example"]);
  });

  it("IP SANs, CIDR limits and URI SANs", async () => {
    await write(`${path}/roles/ip`, {
      allow_any_name: true,
      key_type: "ec",
      ttl: "1h",
      allowed_ip_sans_cidr: "10.0.0.0/8",
      allowed_uri_sans: "spiffe://cluster/*",
    });
    const ok = await issue("ip", { common_name: "h.example", ip_sans: "10.1.2.3", uri_sans: "spiffe://cluster/ns/a" });
    expect(sans(parseCert(ok.body.data.certificate))).toEqual(["dns:h.example", "url:spiffe://cluster/ns/a", "ip:10.1.2.3"]);
    // A URI SAN is an IA5String (RFC 5280 §4.2.1.6): non-ASCII goes in percent-encoded.
    const idn = await issue("ip", { common_name: "h.example", uri_sans: "spiffe://cluster/é" });
    expect(sans(parseCert(idn.body.data.certificate))).toContain("url:spiffe://cluster/%C3%A9");
    expect((await issue("ip", { common_name: "h.example", ip_sans: "192.168.0.1" }, 400)).body.errors).toEqual([
      'the IP address "192.168.0.1" is not allowed in this role',
    ]);
    expect((await issue("ip", { common_name: "h.example", ip_sans: "300.1.1.1" }, 400)).body.errors).toEqual(['the value "300.1.1.1" is not a valid IP address']);
    expect((await issue("ip", { common_name: "h.example", uri_sans: "https://elsewhere" }, 400)).body.errors[0]).toContain(
      "URI Subject Alternative Names were provided via the API which are not valid for this role",
    );
    await write(`${path}/roles/noip`, { allow_any_name: true, allow_ip_sans: false, key_type: "ec", ttl: "1h" });
    expect((await issue("noip", { common_name: "h.example", ip_sans: "10.0.0.1" }, 400)).body.errors[0]).toBe(
      "IP Subject Alternative Names are not allowed in this role, but was provided via the API",
    );
    expect((await issue("noip", { common_name: "h.example", uri_sans: "spiffe://x" }, 400)).body.errors[0]).toContain(
      "URI Subject Alternative Names are not allowed in this role",
    );
  });

  it("other SANs, user ids and subject serial numbers follow their allow-lists", async () => {
    await write(`${path}/roles/extra`, {
      allow_any_name: true,
      key_type: "ec",
      ttl: "1h",
      allowed_other_sans: "1.3.6.1.4.1.311.20.2.3;UTF8:*@corp.example",
      allowed_user_ids: "alice,svc-*",
      allowed_serial_numbers: "SN-*",
    });
    const ok = await issue("extra", {
      common_name: "h.example",
      other_sans: ["1.3.6.1.4.1.311.20.2.3;UTF8:bob@corp.example"],
      user_ids: "ALICE,svc-build",
      serial_number: "SN-42",
    });
    const cert = parseCert(ok.body.data.certificate);
    expect(cert.subject).toContain("CN=h.example");
    expect(cert.subject).toContain("2.5.4.5=SN-42");
    expect(cert.subject).toContain("0.9.2342.19200300.100.1.1=ALICE");
    expect((await issue("extra", { common_name: "h.example", other_sans: "1.2.3.4;UTF8:x" }, 400)).body.errors).toEqual([
      "other SAN OID 1.2.3.4 not allowed by this role",
    ]);
    expect((await issue("extra", { common_name: "h.example", other_sans: "1.3.6.1.4.1.311.20.2.3;UTF8:x@evil" }, 400)).body.errors).toEqual([
      "other SAN x@evil not allowed for OID 1.3.6.1.4.1.311.20.2.3 by this role",
    ]);
    expect((await issue("extra", { common_name: "h.example", other_sans: "garbage" }, 400)).body.errors[0]).toContain("could not parse requested other SAN");
    expect((await issue("extra", { common_name: "h.example", user_ids: "mallory" }, 400)).body.errors).toEqual(["user_id mallory is not allowed by this role"]);
    expect((await issue("extra", { common_name: "h.example", serial_number: "XX" }, 400)).body.errors).toEqual(["serial_number XX not allowed by this role"]);
    expect((await issue("any", { common_name: "h.example", serial_number: "SN-1" }, 400)).body.errors).toEqual(["serial_number SN-1 not allowed by this role"]);
  });
});

describe("validity", () => {
  it("uses the role ttl, refuses a ttl above max_ttl, and backdates by not_before_duration", async () => {
    const r = await issue("strict", { common_name: "t.example.com" });
    const c = parseCert(r.body.data.certificate);
    expect((c.notAfter.getTime() - c.notBefore.getTime()) / 1000).toBe(3600 + 30);
    expect(Number(r.body.data.expiration)).toBe(c.notAfter.getTime() / 1000);
    const over = await issue("strict", { common_name: "t.example.com", ttl: "3h" }, 400);
    expect(over.body.errors[0]).toContain("ttl");
    expect(over.body.errors[0]).toContain("2h0m0s");
    const both = await issue("strict", { common_name: "t.example.com", ttl: "1h", not_after: "2026-12-31T00:00:00Z" }, 400);
    expect(both.body.errors[0]).toBe("Either ttl or not_after should be provided. Both should not be provided in the same request.");
    expect((await issue("strict", { common_name: "t.example.com", not_after: "someday" }, 400)).body.errors[0]).toContain("not_after");
  });

  it("a notAfter beyond the issuer is an error by default, truncated or permitted per leaf_not_after_behavior", async () => {
    await write(`${path}/roles/long`, { allow_any_name: true, key_type: "ec" });
    const far = new Date(Date.now() + 720 * 3600 * 1000).toISOString().replace(/\.\d+Z$/, "Z");
    const err = await issue("long", { common_name: "l.example", not_after: far }, 400);
    expect(err.body.errors[0]).toMatch(/^cannot satisfy request, as TTL would result in notAfter of .* that is beyond the expiration of the CA certificate at /);
    await patch(`${path}/issuer/default`, { leaf_not_after_behavior: "truncate" });
    const truncated = await issue("long", { common_name: "l.example", not_after: far });
    expect(parseCert(truncated.body.data.certificate).notAfter.getTime()).toBe(parseCert(root).notAfter.getTime());
    await patch(`${path}/issuer/default`, { leaf_not_after_behavior: "permit" });
    const permitted = await issue("long", { common_name: "l.example", not_after: far });
    expect(parseCert(permitted.body.data.certificate).notAfter.toISOString().replace(/\.\d+Z$/, "Z")).toBe(far);
    await patch(`${path}/issuer/default`, { leaf_not_after_behavior: "err" });
  });

  it("a role's not_after wins, and not_after_bound=forbid refuses a request not_after", async () => {
    await write(`${path}/roles/fixed`, { allow_any_name: true, key_type: "ec", not_after: "2026-12-01T00:00:00Z", not_after_bound: "forbid" });
    const r = await issue("fixed", { common_name: "f.example" });
    expect(parseCert(r.body.data.certificate).notAfter.toISOString()).toBe("2026-12-01T00:00:00.000Z");
    await write(`${path}/roles/forbid`, { allow_any_name: true, key_type: "ec", not_after_bound: "forbid" });
    expect((await issue("forbid", { common_name: "f.example", not_after: "2026-12-01T00:00:00Z" }, 400)).body.errors[0]).toBe(
      "not_after_bound is set to forbid. not_after cannot be provided.",
    );
  });
});

describe("keys, formats and storage", () => {
  it("issues RSA, EC (P-384 and the software P-224) and Ed25519 keys per the role", async () => {
    for (const [keyType, keyBits, label] of [
      ["rsa", 2048, "RSA PRIVATE KEY"],
      ["ec", 384, "EC PRIVATE KEY"],
      ["ec", 224, "EC PRIVATE KEY"],
      ["ed25519", 0, "PRIVATE KEY"],
    ] as const) {
      await write(`${path}/roles/k-${keyType}${keyBits}`, { allow_any_name: true, key_type: keyType, key_bits: keyBits, ttl: "1h" });
      const r = await issue(`k-${keyType}${keyBits}`, { common_name: "k.example" });
      expect(r.body.data.private_key_type).toBe(keyType);
      expect(r.body.data.private_key.startsWith(`-----BEGIN ${label}-----`)).toBe(true);
      await expectSignedBy(r.body.data.certificate, root);
    }
    await write(`${path}/roles/anykey`, { allow_any_name: true, key_type: "any", ttl: "1h" });
    expect((await issue("anykey", { common_name: "k.example" }, 400)).body.errors[0]).toContain("any");
  });

  it("formats: der is base64 DER, pkcs8 keys, pem_bundle; bad format is 400", async () => {
    const der = await issue("strict", { common_name: "f.example.com", format: "der", private_key_format: "pkcs8" });
    expect(() => new x509.X509Certificate(Uint8Array.from(atob(der.body.data.certificate), (c) => c.charCodeAt(0)))).not.toThrow();
    expect(der.body.data.issuing_ca).not.toContain("BEGIN");
    expect(der.body.data.private_key).not.toContain("BEGIN");
    const p8 = await issue("strict", { common_name: "f.example.com", private_key_format: "pkcs8" });
    expect(p8.body.data.private_key).toContain("-----BEGIN PRIVATE KEY-----");
    // Signed by a self-signed root: the bundle is key + leaf only (Vault API /pki/issue/:name, format).
    const bundle = await issue("strict", { common_name: "f.example.com", format: "pem_bundle" });
    expect(bundle.body.data.certificate.match(/-----BEGIN [A-Z ]+-----/g)).toEqual(["-----BEGIN EC PRIVATE KEY-----", "-----BEGIN CERTIFICATE-----"]);
    expect(bundle.body.data.certificate).not.toContain(root.split("\n")[1]);
    expect(bundle.body.data.issuing_ca).toBe(root);
    expect((await issue("strict", { common_name: "f.example.com", format: "json" }, 400)).body.errors[0]).toContain("format");
    expect((await issue("strict", { common_name: "f.example.com", private_key_format: "pem" }, 400)).body.errors[0]).toContain("private_key_format");
  });

  it("the response has the documented fields; no_store keeps the certificate out of the store", async () => {
    const r = await issue("strict", { common_name: "s.example.com" });
    expect(Object.keys(r.body.data).sort()).toEqual(["ca_chain", "certificate", "expiration", "issuing_ca", "private_key", "private_key_type", "serial_number"]);
    expect(r.body.data.ca_chain).toEqual([root]);
    expect(typeof r.body.data.expiration).toBe("string");
    expect(r.body).toMatchObject({ lease_id: "", renewable: false, lease_duration: 0, auth: null });
    expect((await read(`${path}/cert/${r.body.data.serial_number}`, { token: null })).body.data.certificate).toBe(r.body.data.certificate);
    await write(`${path}/roles/nostore`, { allow_any_name: true, key_type: "ec", ttl: "1h", no_store: true });
    const ns = await issue("nostore", { common_name: "n.example" });
    await read(`${path}/cert/${ns.body.data.serial_number}`, { token: null }, 404);
    expect((await list(`${path}/certs`)).body.data.keys).not.toContain(ns.body.data.serial_number);
  });

  it("key usage and EKU come from the role", async () => {
    await write(`${path}/roles/ku`, {
      allow_any_name: true,
      key_type: "ec",
      ttl: "1h",
      key_usage: "DigitalSignature",
      server_flag: false,
      client_flag: true,
      code_signing_flag: true,
      ext_key_usage_oids: "1.2.3.4.5",
      policy_identifiers: "1.3.6.1.4.1.99999.1",
    });
    const c = parseCert((await issue("ku", { common_name: "ku.example" })).body.data.certificate);
    expect(c.getExtension(x509.KeyUsagesExtension)?.usages).toBe(x509.KeyUsageFlags.digitalSignature);
    expect(c.getExtension(x509.ExtendedKeyUsageExtension)?.usages).toEqual(["1.3.6.1.5.5.7.3.2", "1.3.6.1.5.5.7.3.3", "1.2.3.4.5"]);
    expect(c.getExtension(x509.CertificatePolicyExtension)?.policies).toEqual(["1.3.6.1.4.1.99999.1"]);
    expect(c.getExtension(x509.BasicConstraintsExtension)).toBeNull();
  });
});

describe("errors name the reason", () => {
  it("unknown role, unknown issuer, no default issuer", async () => {
    expect((await issue("ghost", { common_name: "x" }, 400)).body.errors).toEqual(["unknown role: ghost"]);
    const r = await write(`${path}/issuer/ghost/issue/strict`, { common_name: "a.example.com" }, {}, 400);
    expect(r.body.errors[0]).toContain("unable to find PKI issuer for reference: ghost");
    const ok = await write(`${path}/issuer/root-ca/issue/strict`, { common_name: "a.example.com" });
    await expectSignedBy(ok.body.data.certificate, root);
    await write(`${path}/roles/wrongref`, { allow_any_name: true, key_type: "ec", issuer_ref: "ghost", ttl: "1h" });
    expect((await issue("wrongref", { common_name: "a.example" }, 400)).body.errors[0]).toContain("could not fetch the CA certificate");
  });

  it("sign: garbage CSR, tampered CSR, wrong key type or size, missing CSR", async () => {
    const sign = (role: string, body: Record<string, unknown>, status = 200) => write(`${path}/sign/${role}`, body, {}, status);
    expect((await sign("strict", { csr: "garbage" }, 400)).body.errors[0]).toContain("csr");
    expect((await sign("strict", {}, 400)).body.errors[0]).toContain("csr");
    const { pem } = await makeCsr("a.example.com", ["b.example.com"]);
    const body = pem.split("\n").slice(1, -1).join("");
    const bytes = Uint8Array.from(atob(body), (c) => c.charCodeAt(0));
    bytes[bytes.length - 5] = (bytes[bytes.length - 5] ?? 0) ^ 0xff;
    const tampered = `-----BEGIN CERTIFICATE REQUEST-----\n${btoa(String.fromCharCode(...bytes))}\n-----END CERTIFICATE REQUEST-----`;
    expect((await sign("strict", { csr: tampered }, 400)).body.errors[0]).toMatch(/csr: certificate request (signature is invalid|could not be parsed)/);
    const ok = await sign("strict", { csr: pem });
    expect(sans(parseCert(ok.body.data.certificate))).toEqual(["dns:a.example.com", "dns:b.example.com"]);
    expect(ok.body.data.private_key).toBeUndefined();
    const rsa = await makeCsr("a.example.com", [], "rsa");
    expect((await sign("strict", { csr: rsa.pem }, 400)).body.errors[0]).toContain("key_type: role requires keys of type ec");
    await write(`${path}/roles/big`, { allowed_domains: "example.com", allow_subdomains: true, key_type: "rsa", key_bits: 4096, ttl: "1h" });
    expect((await sign("big", { csr: rsa.pem }, 400)).body.errors[0]).toContain("key_bits: role requires a minimum of 4096 bits");
    const outside = await makeCsr("a.example.com", ["evil.org"]);
    expect((await sign("strict", { csr: outside.pem }, 400)).body.errors).toEqual(["subject alternate name evil.org not allowed by this role"]);
  });

  it("use_csr_common_name=false and use_csr_sans=false take names from the request", async () => {
    await write(`${path}/roles/reqnames`, {
      allowed_domains: "example.com",
      allow_subdomains: true,
      key_type: "ec",
      ttl: "1h",
      use_csr_common_name: false,
      use_csr_sans: false,
    });
    const { pem } = await makeCsr("csr.example.com", ["csr-alt.example.com"]);
    const r = await write(`${path}/sign/reqnames`, { csr: pem, common_name: "req.example.com", alt_names: "req-alt.example.com" });
    const c = parseCert(r.body.data.certificate);
    expect(c.subject).toBe("CN=req.example.com");
    expect(sans(c)).toEqual(["dns:req.example.com", "dns:req-alt.example.com"]);
  });

  it("refuses issue without a token and with a token lacking the path", async () => {
    expect((await api("POST", `${path}/issue/strict`, { token: null, body: { common_name: "a.example.com" } })).status).toBe(403);
  });
});
