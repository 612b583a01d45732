/**
 * Privileged signing over HTTP (Vault API /pki/root/sign-self-issued, /pki/sign-verbatim): what the signed
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
    // The body field "name" names the role as well.
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
    expect(parseCert(pss.body.data.certificate).signatureAlgorithm).toMatchObject({ name: "RSA-PSS" });
    await expectSignedBy(pss.body.data.certificate, rsa.root);
    expect((await write(`${rsa.path}/sign-verbatim`, { csr, signature_bits: 100 }, {}, 400)).body.errors[0]).toContain("signature_bits");
    // EC issuers ignore both (Vault API /pki/root/sign-intermediate).
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
    expect(parseCert(ok.body.data.certificate).signatureAlgorithm).toMatchObject({ name: "ECDSA" });
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

describe("cert_metadata (issue, sign, sign-verbatim) and cert-metadata reads", () => {
  let path = "";
  let issuerId = "";
  beforeAll(async () => {
    ({ path, issuerId } = await pkiWithRoot());
    await write(`${path}/roles/meta`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
    await write(`${path}/roles/nometa`, { allow_any_name: true, key_type: "ec", ttl: "1h", no_store_metadata: true });
    await write(`${path}/roles/nostore`, { allow_any_name: true, key_type: "ec", ttl: "1h", no_store: true });
  });

  it("LIST cert-metadata is 404 while nothing carries metadata", async () => {
    await write(`${path}/issue/meta`, { common_name: "plain.example" });
    expect((await api("GET", `${path}/cert-metadata?list=true`)).status).toBe(404);
  });

  it("round-trips metadata given to issue, sign and sign-verbatim", async () => {
    const value = btoa("owner=team-a; ticket=42");
    const issued = (await write(`${path}/issue/meta`, { common_name: "a.example", cert_metadata: value })).body.data;
    const csr = await csrWith("CN=b.example", []);
    const signed = (await write(`${path}/sign/meta`, { csr, common_name: "b.example", cert_metadata: "" })).body.data;
    const verbatim = (await write(`${path}/sign-verbatim/meta`, { csr, cert_metadata: btoa("v") })).body.data;

    const m = await read(`${path}/cert-metadata/${issued.serial_number}`);
    expect(m.body.data).toEqual({
      issuer_id: issuerId,
      role: "meta",
      serial_number: issued.serial_number,
      expiration: new Date(Number(issued.expiration) * 1000).toISOString().replace(".000Z", "Z"),
      cert_metadata: value,
    });
    // Hyphenated serials address the same entry (Vault accepts either form).
    expect((await read(`${path}/cert-metadata/${signed.serial_number.replace(/:/g, "-")}`)).body.data.cert_metadata).toBe("");
    expect((await read(`${path}/cert-metadata/${verbatim.serial_number}`)).body.data).toMatchObject({ role: "meta", cert_metadata: btoa("v") });
    const keys = (await api("GET", `${path}/cert-metadata?list=true`)).body.data.keys as string[];
    expect([...keys].sort()).toEqual([issued.serial_number, signed.serial_number, verbatim.serial_number].sort());
    // The certificate itself is still served as before.
    expect((await read(`${path}/cert/${issued.serial_number}`)).body.data.certificate.trim()).toBe(issued.certificate.trim());
  });

  it("stores the metadata sealed, never in the clear", async () => {
    const marker = btoa("very-recognizable-metadata-marker");
    const issued = (await write(`${path}/issue/meta`, { common_name: "sealed.example", cert_metadata: marker })).body.data;
    const { env } = await import("cloudflare:test");
    const row = await (env as { DB: D1Database }).DB.prepare("SELECT metadata FROM pki_certs WHERE serial = unhex(replace(?, ':', ''))").bind(issued.serial_number).first<{ metadata: string }>();
    expect(row?.metadata.startsWith("v1:")).toBe(true);
    expect(row?.metadata).not.toContain(marker);
    expect(row?.metadata).not.toContain("very-recognizable");
  });

  it("refuses metadata when the role forbids it, without a role on sign-verbatim, and when it is not base64", async () => {
    const csr = await csrWith("CN=c.example", []);
    const cases: [string, Record<string, unknown>][] = [
      [`${path}/issue/nometa`, { common_name: "c.example", cert_metadata: btoa("x") }],
      [`${path}/issue/nometa`, { common_name: "c.example", cert_metadata: "" }],
      [`${path}/sign/nometa`, { csr, common_name: "c.example", cert_metadata: btoa("x") }],
      [`${path}/sign-verbatim/nometa`, { csr, cert_metadata: btoa("x") }],
      [`${path}/sign-verbatim`, { csr, cert_metadata: btoa("x") }],
      [`${path}/issuer/default/sign-verbatim`, { csr, cert_metadata: btoa("x") }],
      [`${path}/issue/meta`, { common_name: "c.example", cert_metadata: "not base64!" }],
      [`${path}/issue/meta`, { common_name: "c.example", cert_metadata: "abc" }],
      [`${path}/issue/nostore`, { common_name: "c.example", cert_metadata: btoa("x") }],
    ];
    for (const [p, body] of cases) {
      const r = await write(p, body, {}, 400);
      expect(r.body.errors[0], p).toMatch(/^cert_metadata: /);
    }
    // Nothing was signed for the refused requests.
    const keys = ((await api("GET", `${path}/cert-metadata?list=true`)).body.data?.keys ?? []) as string[];
    for (const k of keys) expect((await read(`${path}/cert-metadata/${k}`)).body.data.role).toBe("meta");
  });

  it("answers 404 for a certificate without metadata, an unknown serial and a non-serial; reads need a token", async () => {
    const plain = (await write(`${path}/issue/meta`, { common_name: "none.example" })).body.data;
    expect((await api("GET", `${path}/cert-metadata/${plain.serial_number}`)).status).toBe(404);
    expect((await api("GET", `${path}/cert-metadata/01:02:03`)).status).toBe(404);
    expect((await api("GET", `${path}/cert-metadata/not-a-serial`)).status).toBe(404);
    expect((await api("GET", `${path}/cert-metadata/${plain.serial_number}`, { token: null })).status).toBe(403);
    expect((await api("GET", `${path}/cert-metadata?list=true`, { token: null })).status).toBe(403);
  });
});

describe("user_ids against the role's allowed_user_ids (issue, sign)", () => {
  let path = "";
  beforeAll(async () => {
    ({ path } = await pkiWithRoot());
    await write(`${path}/roles/uids`, { allow_any_name: true, key_type: "ec", ttl: "1h", allowed_user_ids: ["alice*", "svc-42"] });
    await write(`${path}/roles/nouids`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
  });

  it("puts allowed user ids in the subject as UID attributes", async () => {
    const r = await write(`${path}/issue/uids`, { common_name: "u.example", user_ids: "alice-1,svc-42" });
    expect(parseCert(r.body.data.certificate).subject).toBe("CN=u.example, 0.9.2342.19200300.100.1.1=alice-1, 0.9.2342.19200300.100.1.1=svc-42");
  });

  it("refuses a user id outside the role's globs, and any user id when the role allows none", async () => {
    expect((await write(`${path}/issue/uids`, { common_name: "u.example", user_ids: "alice-1,bob" }, {}, 400)).body.errors).toEqual(["user_id bob is not allowed by this role"]);
    expect((await write(`${path}/issue/uids`, { common_name: "u.example", user_ids: "svc-123" }, {}, 400)).body.errors[0]).toContain("svc-123");
    expect((await write(`${path}/issue/nouids`, { common_name: "u.example", user_ids: "alice" }, {}, 400)).body.errors[0]).toContain("alice");
  });

  it("checks the user ids of a signed CSR's subject as well", async () => {
    const ok = await csrWith("CN=s.example, 0.9.2342.19200300.100.1.1=alice-csr", []);
    const r = await write(`${path}/sign/uids`, { csr: ok, common_name: "s.example" });
    expect(parseCert(r.body.data.certificate).subject).toContain("0.9.2342.19200300.100.1.1=alice-csr");
    const bad = await csrWith("CN=s.example, 0.9.2342.19200300.100.1.1=mallory", []);
    expect((await write(`${path}/sign/uids`, { csr: bad, common_name: "s.example" }, {}, 400)).body.errors[0]).toContain("mallory");
    // Requested user ids take precedence over the CSR's and are checked.
    expect((await write(`${path}/sign/uids`, { csr: bad, common_name: "s.example", user_ids: "alice" }, {}, 200)).status).toBe(200);
    expect((await write(`${path}/sign/uids`, { csr: ok, common_name: "s.example", user_ids: "eve" }, {}, 400)).body.errors[0]).toContain("eve");
  });

  it("sign-verbatim does not validate user ids", async () => {
    const csr = await csrWith("CN=v.example, 0.9.2342.19200300.100.1.1=mallory", []);
    const r = await write(`${path}/sign-verbatim/nouids`, { csr, user_ids: "eve" });
    expect(parseCert(r.body.data.certificate).subject).toBe("CN=v.example, 0.9.2342.19200300.100.1.1=mallory, 0.9.2342.19200300.100.1.1=eve");
  });
});

describe("sign-intermediate: the documented parameters", () => {
  let path = "";
  let root = "";
  beforeAll(async () => {
    ({ path, root } = await pkiWithRoot({ keyType: "rsa", keyBits: 2048, cn: "RSA Signer" }));
  });

  it("use_csr_values keeps the CSR's whole subject and SANs; its key usage replaces the requested one; no extension twice", async () => {
    const csr = await csrWith("CN=Int From CSR, O=Acme, OU=PKI, 2.5.4.5=SN-7", [
      new x509.SubjectAlternativeNameExtension([{ type: "dns", value: "int.example" }, { type: "url", value: "spiffe://int" }]),
      new x509.KeyUsagesExtension(F.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([EKU_CLIENT]),
      new x509.BasicConstraintsExtension(true, 5, true),
    ]);
    const r = await write(`${path}/root/sign-intermediate`, { csr, use_csr_values: true, ttl: "2h", key_usage: "KeyEncipherment", ext_key_usage: "ServerAuth" });
    const cert = parseCert(r.body.data.certificate);
    expect(cert.subject).toBe("CN=Int From CSR, O=Acme, OU=PKI, 2.5.4.5=SN-7");
    expect(sans(cert)).toEqual(["dns:int.example", "url:spiffe://int"]);
    expect(cert.getExtension(x509.KeyUsagesExtension)?.usages).toBe(F.digitalSignature | F.keyCertSign | F.cRLSign);
    expect(cert.getExtension(x509.ExtendedKeyUsageExtension)?.usages).toEqual([EKU_CLIENT]);
    // The CSR's basic constraints do not count: the CA profile decides them.
    expect(cert.getExtension(x509.BasicConstraintsExtension)).toMatchObject({ ca: true });
    expect(cert.getExtension(x509.BasicConstraintsExtension)?.pathLength).toBeUndefined();
    const oids = cert.extensions.map((e) => e.type);
    expect(new Set(oids).size).toBe(oids.length);
  });

  it("subject fields, serial_number, skid, not_before_duration, signature_bits and use_pss", async () => {
    const csr = await csrWith("CN=ignored", []);
    const r = await write(`${path}/root/sign-intermediate`, {
      csr,
      common_name: "Int CA",
      organization: "Acme",
      ou: "Ops,Sec",
      country: "DE",
      serial_number: "SN-42",
      skid: "01:02:03:04",
      not_before_duration: "2h",
      ttl: "4h",
      signature_bits: 384,
    });
    const cert = parseCert(r.body.data.certificate);
    expect(cert.subject).toBe("C=DE, O=Acme, OU=Ops, OU=Sec, CN=Int CA, 2.5.4.5=SN-42");
    expect(skiOf(cert)).toBe("01020304");
    expect(Math.abs(Date.now() - cert.notBefore.getTime() - 2 * 3600_000)).toBeLessThan(60_000);
    expect(cert.signatureAlgorithm).toMatchObject({ name: "RSASSA-PKCS1-v1_5", hash: { name: "SHA-384" } });
    const pss = await write(`${path}/root/sign-intermediate`, { csr, common_name: "PSS Int", ttl: "1h", use_pss: true });
    expect(parseCert(pss.body.data.certificate).signatureAlgorithm).toMatchObject({ name: "RSA-PSS" });
    await expectSignedBy(pss.body.data.certificate, root);
    expect((await write(`${path}/root/sign-intermediate`, { csr, common_name: "X", signature_bits: 128 }, {}, 400)).body.errors[0]).toContain("signature_bits");
    expect((await write(`${path}/root/sign-intermediate`, { csr, common_name: "X", ext_key_usage_oids: "nope" }, {}, 400)).body.errors[0]).toContain("ext_key_usage_oids");
  });
});

describe("AKI names the issuer's own SKI (imported CA with a non-standard SKI)", () => {
  it("issue, sign-verbatim and sign-self-issued all use it", async () => {
    const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
    const keys = (await crypto.subtle.generateKey(alg, true, ["sign", "verify"])) as CryptoKeyPair;
    const ca = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: "0a0b0c",
      name: "CN=Imported Custom SKI",
      notBefore: new Date(Date.now() - 60_000),
      notAfter: new Date("2034-01-01T00:00:00Z"),
      keys,
      signingAlgorithm: alg,
      extensions: [
        new x509.BasicConstraintsExtension(true, undefined, true),
        new x509.KeyUsagesExtension(F.keyCertSign | F.cRLSign | F.digitalSignature, true),
        new x509.Extension("2.5.29.14", false, Uint8Array.from([0x04, 0x04, 0xde, 0xad, 0xbe, 0xef])),
      ],
    });
    const pkcs8 = new Uint8Array((await crypto.subtle.exportKey("pkcs8", keys.privateKey)) as ArrayBuffer);
    const keyPem = `-----BEGIN PRIVATE KEY-----\n${btoa(String.fromCharCode(...pkcs8))}\n-----END PRIVATE KEY-----`;
    const m = await mount("pki");
    await write(`${m}/config/ca`, { pem_bundle: `${keyPem}\n${ca.toString("pem")}` });
    await write(`${m}/roles/any`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
    const leaf = parseCert((await write(`${m}/issue/any`, { common_name: "l.example" })).body.data.certificate);
    expect(akiOf(leaf)).toBe("deadbeef");
    const vb = parseCert((await write(`${m}/sign-verbatim`, { csr: await csrWith("CN=v", []), ttl: "1h" })).body.data.certificate);
    expect(akiOf(vb)).toBe("deadbeef");
    const other = await pkiWithRoot({ cn: "Someone" });
    const si = parseCert((await write(`${m}/root/sign-self-issued`, { certificate: other.root })).body.data.certificate);
    expect(akiOf(si)).toBe("deadbeef");
  });
});
