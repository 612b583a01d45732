/**
 * Privileged signing over HTTP (spec "Sign self-issued", "Sign verbatim"): what the signed
 * certificates contain (read back with @peculiar/x509, independent of the service's own DER
 * code), which requests are refused, and who may call the sudo path.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { api, mount, read, tokenWithPolicy, write } from "../helpers/api";
import { expectSignedBy, parseCert, pkiWithRoot, sans, x509 } from "../helpers/pki";

const F = x509.KeyUsageFlags;
const EKU_SERVER = "1.3.6.1.5.5.7.3.1";
const EKU_CLIENT = "1.3.6.1.5.5.7.3.2";

/** A CSR with chosen subject and extensions (EC P-256 unless RSA is asked for). */
async function csrWith(subject: string, extensions: x509.Extension[], alg: "ec" | "rsa" = "ec"): Promise<string> {
  const params =
    alg === "ec"
      ? { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" }
      : { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" };
  const keys = (await crypto.subtle.generateKey(params, true, ["sign", "verify"])) as CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({ name: subject, keys, signingAlgorithm: params, extensions });
  return csr.toString("pem");
}

const hex = (b: ArrayBuffer) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, "0")).join("");
const fromBase64 = (s: string) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
const skiOf = (c: x509.X509Certificate) => c.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId ?? "";
const akiOf = (c: x509.X509Certificate) => c.getExtension(x509.AuthorityKeyIdentifierExtension)?.keyId ?? "";

describe("sign-verbatim", () => {
  let path = "";
  let root = "";
  beforeAll(async () => {
    ({ path, root } = await pkiWithRoot());
  });

  it("takes subject and SANs from the CSR, defaults key usage, and stores the certificate", async () => {
    const csr = await csrWith("CN=verbatim.example, O=Acme, OU=Ops, C=DE", [
      new x509.SubjectAlternativeNameExtension([
        { type: "dns", value: "verbatim.example" },
        { type: "dns", value: "other.test" },
        { type: "ip", value: "10.0.0.7" },
      ]),
    ]);
    const r = await write(`${path}/sign-verbatim`, { csr, ttl: "1h" });
    const d = r.body.data;
    expect(Object.keys(d).sort()).toEqual(["ca_chain", "certificate", "expiration", "issuing_ca", "serial_number"]);
    const cert = parseCert(d.certificate);
    expect(cert.subject).toBe("CN=verbatim.example, O=Acme, OU=Ops, C=DE");
    expect(sans(cert)).toEqual(["dns:verbatim.example", "dns:other.test", "ip:10.0.0.7"]);
    // Spec: DigitalSignature, KeyAgreement, KeyEncipherment when the CSR has no key usage.
    expect(cert.getExtension(x509.KeyUsagesExtension)?.usages).toBe(F.digitalSignature | F.keyAgreement | F.keyEncipherment);
    expect(cert.getExtension(x509.ExtendedKeyUsageExtension)).toBeNull();
    expect(cert.getExtension(x509.BasicConstraintsExtension)).toBeNull();
    expect(akiOf(cert)).toBe(skiOf(parseCert(root)));
    await expectSignedBy(d.certificate, root);
    expect(d.issuing_ca).toBe(root.trim());
    expect(d.ca_chain).toEqual([root.trim()]);
    expect(d.expiration).toBe(String(cert.notAfter.getTime() / 1000));
    expect(Math.abs(cert.notAfter.getTime() - Date.now() - 3600_000)).toBeLessThan(60_000);
    expect(d.serial_number).toBe(cert.serialNumber.replace(/(..)(?!$)/g, "$1:"));
    const stored = await read(`${path}/cert/${d.serial_number}`);
    expect(stored.body.data.certificate.trim()).toBe(d.certificate.trim());
  });

  it("keeps the CSR's key usage and extended key usage; the request's are only defaults", async () => {
    const csr = await csrWith("CN=ku.example", [
      new x509.KeyUsagesExtension(F.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([EKU_CLIENT]),
    ]);
    const r = await write(`${path}/sign-verbatim`, { csr, ttl: "1h", key_usage: ["KeyEncipherment"], ext_key_usage: ["ServerAuth"] });
    const cert = parseCert(r.body.data.certificate);
    expect(cert.getExtension(x509.KeyUsagesExtension)?.usages).toBe(F.digitalSignature);
    expect(cert.getExtension(x509.ExtendedKeyUsageExtension)?.usages).toEqual([EKU_CLIENT]);
    // Every extension appears once (RFC 5280 §4.2).
    const oids = cert.extensions.map((e) => e.type);
    expect(new Set(oids).size).toBe(oids.length);
  });

  it("applies key_usage (case-insensitive, empty = none), ext_key_usage and ext_key_usage_oids when the CSR has none", async () => {
    const csr = await csrWith("CN=defaults.example", []);
    const a = parseCert((await write(`${path}/sign-verbatim`, { csr, ttl: "1h", key_usage: "digitalsignature,CONTENTCOMMITMENT", ext_key_usage: "serverauth", ext_key_usage_oids: "1.2.3.4.5" })).body.data.certificate);
    expect(a.getExtension(x509.KeyUsagesExtension)?.usages).toBe(F.digitalSignature | F.nonRepudiation);
    expect(a.getExtension(x509.ExtendedKeyUsageExtension)?.usages).toEqual([EKU_SERVER, "1.2.3.4.5"]);
    const b = parseCert((await write(`${path}/sign-verbatim`, { csr, ttl: "1h", key_usage: [] })).body.data.certificate);
    expect(b.getExtension(x509.KeyUsagesExtension)).toBeNull();
    const bad = await write(`${path}/sign-verbatim`, { csr, ext_key_usage_oids: "1.2.x" }, {}, 400);
    expect(bad.body.errors[0]).toContain("ext_key_usage_oids");
  });

  it("refuses CA requests, bad CSRs and a ttl above the engine maximum", async () => {
    const ca = await csrWith("CN=sneaky CA", [new x509.BasicConstraintsExtension(true, undefined, true)]);
    const r = await write(`${path}/sign-verbatim`, { csr: ca }, {}, 400);
    expect(r.body.errors[0]).toMatch(/^csr: .*CA/);
    expect((await write(`${path}/sign-verbatim`, { csr: ca.replace(/[A-Za-z]{8}\n/, "AAAAAAAA\n") }, {}, 400)).body.errors[0]).toContain("csr");
    expect((await write(`${path}/sign-verbatim`, {}, {}, 400)).body.errors[0]).toContain("csr");
    expect((await write(`${path}/sign-verbatim`, { csr: "garbage" }, {}, 400)).body.errors[0]).toContain("csr");
    const leaf = await csrWith("CN=long.example", []);
    expect((await write(`${path}/sign-verbatim`, { csr: leaf, ttl: "800h" }, {}, 400)).body.errors[0]).toContain("ttl");
    expect((await write(`${path}/sign-verbatim`, { csr: leaf, ttl: "1h", not_after: "2030-01-01T00:00:00Z" }, {}, 400)).body.errors[0]).toContain("ttl or not_after");
    expect((await write(`${path}/sign-verbatim`, { csr: leaf, format: "txt" }, {}, 400)).body.errors[0]).toContain("format");
    expect((await write(`${path}/sign-verbatim/ghost`, { csr: leaf }, {}, 400)).body.errors[0]).toBe("unknown role: ghost");
    expect((await write(`${path}/issuer/ghost/sign-verbatim`, { csr: leaf }, {}, 400)).body.errors[0]).toContain("ghost");
  });

  it("adds user_ids to the subject without checking them, and honours not_after and der", async () => {
    const csr = await csrWith("CN=uid.example", []);
    const r = await write(`${path}/sign-verbatim`, { csr, user_ids: "alice,bob", not_after: "2031-06-01T00:00:00Z", format: "der" });
    const cert = new x509.X509Certificate(fromBase64(r.body.data.certificate));
    expect(cert.subject).toBe("CN=uid.example, 0.9.2342.19200300.100.1.1=alice, 0.9.2342.19200300.100.1.1=bob");
    expect(cert.notAfter.toISOString()).toBe("2031-06-01T00:00:00.000Z");
    expect(r.body.data.ca_chain[0]).not.toContain("BEGIN");
  });

  it("a named role contributes ttl, max_ttl, issuer_ref, no_store and not_before_duration", async () => {
    const second = await write(`${path}/root/generate/internal`, { common_name: "Second Root", key_type: "ec", issuer_name: "second", not_after: "2034-01-01T00:00:00Z" });
    await write(`${path}/roles/vb`, { ttl: "2h", max_ttl: "3h", issuer_ref: "second", no_store: true, not_before_duration: "1h", allowed_domains: "nothing.invalid" });
    const csr = await csrWith("CN=role.example", []);
    const r = await write(`${path}/sign-verbatim/vb`, { csr });
    const cert = parseCert(r.body.data.certificate);
    expect(Math.abs(cert.notAfter.getTime() - Date.now() - 2 * 3600_000)).toBeLessThan(60_000);
    expect(Math.abs(Date.now() - cert.notBefore.getTime() - 3600_000)).toBeLessThan(60_000);
    await expectSignedBy(r.body.data.certificate, second.body.data.certificate);
    // Role name policy does not apply: the role allows nothing.invalid only.
    expect(cert.subject).toBe("CN=role.example");
    expect((await api("GET", `${path}/cert/${r.body.data.serial_number}`)).status).toBe(404);
    expect((await write(`${path}/sign-verbatim/vb`, { csr, ttl: "4h" }, {}, 400)).body.errors[0]).toContain("ttl");
    // The body field "name" names the role as well (spec "Sign verbatim").
    await expectSignedBy((await write(`${path}/sign-verbatim`, { csr, name: "vb" })).body.data.certificate, second.body.data.certificate);
    // The per-issuer path overrides the role's issuer.
    await expectSignedBy((await write(`${path}/issuer/root-ca/sign-verbatim/vb`, { csr })).body.data.certificate, root);
  });

  it("truncates to the issuer's notAfter unless enforce_leaf_not_after_behavior defers to the issuer", async () => {
    const short = await pkiWithRoot({ ttl: "2h" });
    const csr = await csrWith("CN=trunc.example", []);
    const r = await write(`${short.path}/sign-verbatim`, { csr, ttl: "5h" });
    expect(parseCert(r.body.data.certificate).notAfter.getTime()).toBe(parseCert(short.root).notAfter.getTime());
    const refused = await write(`${short.path}/sign-verbatim`, { csr, ttl: "5h", enforce_leaf_not_after_behavior: true }, {}, 400);
    expect(refused.body.errors[0]).toContain("beyond the expiration of the CA certificate");
    await write(`${short.path}/issuer/root-ca`, { leaf_not_after_behavior: "permit" });
    const permitted = await write(`${short.path}/sign-verbatim`, { csr, ttl: "5h", enforce_leaf_not_after_behavior: true });
    expect(parseCert(permitted.body.data.certificate).notAfter.getTime()).toBeGreaterThan(parseCert(short.root).notAfter.getTime());
  });

  it("signature_bits and use_pss choose the RSA signature; a bad size is refused", async () => {
    const rsa = await pkiWithRoot({ keyType: "rsa", keyBits: 2048 });
    const csr = await csrWith("CN=rsa.example", []);
    const c384 = parseCert((await write(`${rsa.path}/sign-verbatim`, { csr, ttl: "1h", signature_bits: 384 })).body.data.certificate);
    expect(c384.signatureAlgorithm).toMatchObject({ name: "RSASSA-PKCS1-v1_5", hash: { name: "SHA-384" } });
    const pss = await write(`${rsa.path}/sign-verbatim`, { csr, ttl: "1h", use_pss: true });
    expect(parseCert(pss.body.data.certificate).signatureAlgorithm.name).toBe("RSA-PSS");
    await expectSignedBy(pss.body.data.certificate, rsa.root);
    expect((await write(`${rsa.path}/sign-verbatim`, { csr, signature_bits: 100 }, {}, 400)).body.errors[0]).toContain("signature_bits");
    // EC issuers ignore both (spec).
    const ec = parseCert((await write(`${path}/sign-verbatim`, { csr, ttl: "1h", signature_bits: 512, use_pss: true })).body.data.certificate);
    expect(ec.signatureAlgorithm).toMatchObject({ name: "ECDSA", hash: { name: "SHA-256" } });
  });
});

describe("sign-self-issued", () => {
  let signer: Awaited<ReturnType<typeof pkiWithRoot>>;
  let newRoot = "";
  beforeAll(async () => {
    signer = await pkiWithRoot({ cn: "Old Root" });
    newRoot = (await pkiWithRoot({ cn: "New Root" })).root;
  });

  it("re-signs a self-issued CA: only issuer, AKI and signature change", async () => {
    const r = await write(`${signer.path}/root/sign-self-issued`, { certificate: newRoot });
    expect(Object.keys(r.body.data).sort()).toEqual(["certificate", "issuing_ca"]);
    expect(r.body.data.issuing_ca).toBe(signer.root.trim());
    const before = parseCert(newRoot);
    const after = parseCert(r.body.data.certificate);
    expect(after.issuer).toBe("CN=Old Root");
    expect(after.subject).toBe(before.subject);
    expect(after.serialNumber).toBe(before.serialNumber);
    expect(after.notBefore.getTime()).toBe(before.notBefore.getTime());
    expect(after.notAfter.getTime()).toBe(before.notAfter.getTime());
    expect(hex(after.publicKey.rawData)).toBe(hex(before.publicKey.rawData));
    expect(skiOf(after)).toBe(skiOf(before));
    expect(akiOf(after)).toBe(skiOf(parseCert(signer.root)));
    expect(after.getExtension(x509.BasicConstraintsExtension)?.ca).toBe(true);
    expect(after.extensions.map((e) => e.type)).toEqual(before.extensions.map((e) => e.type));
    await expectSignedBy(r.body.data.certificate, signer.root);
    // The per-issuer path works the same.
    const p = await write(`${signer.path}/issuer/root-ca/sign-self-issued`, { certificate: newRoot });
    await expectSignedBy(p.body.data.certificate, signer.root);
  });

  it("needs sudo on the root path only", async () => {
    const updateOnly = await tokenWithPolicy(`path "${signer.path}/*" { capabilities = ["update"] }`);
    const denied = await api("POST", `${signer.path}/root/sign-self-issued`, { token: updateOnly, body: { certificate: newRoot } });
    expect(denied.status).toBe(403);
    expect((await api("POST", `${signer.path}/issuer/root-ca/sign-self-issued`, { token: updateOnly, body: { certificate: newRoot } })).status).toBe(200);
    const sudo = await tokenWithPolicy(`path "${signer.path}/root/sign-self-issued" { capabilities = ["update", "sudo"] }`);
    expect((await api("POST", `${signer.path}/root/sign-self-issued`, { token: sudo, body: { certificate: newRoot } })).status).toBe(200);
  });

  it("refuses a non-CA, a certificate that is not self-issued, and malformed input", async () => {
    await write(`${signer.path}/roles/leaf`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
    const leaf = (await write(`${signer.path}/issue/leaf`, { common_name: "leaf.example" })).body.data.certificate;
    expect((await write(`${signer.path}/root/sign-self-issued`, { certificate: leaf }, {}, 400)).body.errors).toEqual(["certificate: given certificate is not a CA certificate"]);
    const intMount = await mount("pki");
    const csr = await write(`${intMount}/intermediate/generate/internal`, { common_name: "Int", key_type: "ec" });
    const int = (await write(`${signer.path}/root/sign-intermediate`, { csr: csr.body.data.csr, common_name: "Int", ttl: "2h" })).body.data.certificate;
    expect((await write(`${signer.path}/root/sign-self-issued`, { certificate: int }, {}, 400)).body.errors).toEqual(["certificate: given certificate is not self-issued"]);
    for (const bad of ["", "garbage", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----", "-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----", `${newRoot}\n${signer.root}`]) {
      const r = await write(`${signer.path}/root/sign-self-issued`, { certificate: bad }, {}, 400);
      expect(r.body.errors[0]).toMatch(/^certificate: /);
    }
    expect((await write(`${signer.path}/issuer/ghost/sign-self-issued`, { certificate: newRoot }, {}, 400)).body.errors[0]).toContain("ghost");
  });

  it("require_matching_certificate_algorithms refuses a different key type; without it the signer's algorithm is used", async () => {
    const rsaRoot = (await pkiWithRoot({ keyType: "rsa", keyBits: 2048, cn: "RSA New" })).root;
    const r = await write(`${signer.path}/root/sign-self-issued`, { certificate: rsaRoot, require_matching_certificate_algorithms: true }, {}, 400);
    expect(r.body.errors[0]).toContain("require_matching_certificate_algorithms");
    const ok = await write(`${signer.path}/root/sign-self-issued`, { certificate: rsaRoot });
    expect(parseCert(ok.body.data.certificate).signatureAlgorithm.name).toBe("ECDSA");
    await expectSignedBy(ok.body.data.certificate, signer.root);
  });

  it("an RSA signer keeps the certificate's own hash and PSS choice", async () => {
    const rsaSigner = await pkiWithRoot({ keyType: "rsa", keyBits: 2048, cn: "RSA Old" });
    const m = await mount("pki");
    const pssRoot = (await write(`${m}/root/generate/internal`, { common_name: "PSS New", key_type: "rsa", signature_bits: 384, use_pss: true, ttl: "24h" })).body.data.certificate;
    const r = await write(`${rsaSigner.path}/root/sign-self-issued`, { certificate: pssRoot });
    const cert = parseCert(r.body.data.certificate);
    expect(cert.signatureAlgorithm).toMatchObject({ name: "RSA-PSS", hash: { name: "SHA-384" } });
    await expectSignedBy(r.body.data.certificate, rsaSigner.root);
  });

  it("replaces the distribution points and AIA when URLs are configured", async () => {
    const s = await pkiWithRoot({ cn: "URL Root" });
    await write(`${s.path}/config/urls`, { crl_distribution_points: "http://crl.example/root.crl", issuing_certificates: "http://aia.example/root.der", ocsp_servers: "http://ocsp.example" });
    const r = await write(`${s.path}/root/sign-self-issued`, { certificate: newRoot });
    const cert = parseCert(r.body.data.certificate);
    const dp = cert.getExtension(x509.CRLDistributionPointsExtension);
    expect(dp?.distributionPoints[0]?.distributionPoint?.fullName?.[0]?.uniformResourceIdentifier).toBe("http://crl.example/root.crl");
    const aia = cert.getExtension(x509.AuthorityInfoAccessExtension);
    expect(aia?.caIssuers.map((g) => g.value)).toEqual(["http://aia.example/root.der"]);
    expect(aia?.ocsp.map((g) => g.value)).toEqual(["http://ocsp.example"]);
    await expectSignedBy(r.body.data.certificate, s.root);
  });
});
