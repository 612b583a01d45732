/**
 * External policy (CIEPS v1, docs/pki-external-policy.md) against a fake policy service at the HTTP boundary (test/helpers/fake-policy-service.ts).
 * Certificates are checked with @peculiar/x509, independent of the engine's own DER encoder.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { patch, read, write } from "../helpers/api";
import { FakePolicyService, installPolicyService, type Behaviour } from "../helpers/fake-policy-service";
import { makeCsr, parseCert, pkiWithRoot, sans, x509 } from "../helpers/pki";

const HOST = "policy.test";
const URL_OK = `https://${HOST}/evaluate`;
const fake = new FakePolicyService();
let uninstall: () => void = () => {};
let path = "";
let root = "";
let rootId = "";
let rsaRoot = "";
let rsaRootId = "";

beforeAll(async () => {
  uninstall = installPolicyService(fake, HOST, "down.policy.test");
  ({ path, root, issuerId: rootId } = await pkiWithRoot());
  const rsa = await write(`${path}/issuers/generate/root/internal`, {
    common_name: "RSA Root",
    key_type: "rsa",
    issuer_name: "rsa-root",
    not_after: "2035-01-01T00:00:00Z",
  });
  rsaRoot = rsa.body.data.certificate;
  rsaRootId = rsa.body.data.issuer_id;
  await write(`${path}/config/urls`, { crl_distribution_points: "http://crl.example.com/root.crl", issuing_certificates: "http://ca.example.com/root.der" });
  await write(`${path}/config/external-policy`, { enabled: true, external_service_url: URL_OK, timeout: "5s" });
});
afterAll(() => uninstall());

const ext = (c: x509.X509Certificate, oid: string) => c.extensions.find((e) => e.type === oid);
const b64 = (b: ArrayBuffer) => btoa(String.fromCharCode(...new Uint8Array(b)));

async function expectIssuedBy(pem: string, issuerPem: string): Promise<x509.X509Certificate> {
  const cert = parseCert(pem);
  const issuer = parseCert(issuerPem);
  expect(await cert.verify({ publicKey: issuer.publicKey, signatureOnly: true })).toBe(true);
  expect(cert.issuer).toBe(issuer.subject);
  const aki = cert.getExtension(x509.AuthorityKeyIdentifierExtension);
  expect(aki?.keyId).toBe(issuer.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId);
  return cert;
}

describe("config/external-policy", () => {
  it("reads the defaults in upstream's shape before any write", async () => {
    const { path: fresh } = await pkiWithRoot();
    const r = await read(`${fresh}/config/external-policy`);
    expect(r.body.data).toEqual({
      enabled: false,
      external_service_url: "",
      timeout: 15_000_000_000,
      trusted_ca: null,
      trusted_leaf_certificate_bundle: null,
      vault_client_cert_bundle_no_keys: null,
      entity_jmespath: null,
      group_jmespath: null,
      external_service_last_updated: null,
      external_service_validated: false,
      last_successful_request: null,
    });
  });

  it("refuses bad settings with a 400 naming the field", async () => {
    const { path: p } = await pkiWithRoot();
    const cases: [Record<string, unknown>, string][] = [
      [{ enabled: true }, "external_service_url: required when"],
      [{ external_service_url: "http://policy.example.com/x" }, "external_service_url: must be an https:// URL"],
      [{ external_service_url: "ftp://policy.example.com/x" }, 'unsupported scheme "ftp"'],
      [{ external_service_url: "https://user:secret@policy.example.com/" }, "credentials in the URL"],
      [{ external_service_url: "not a url" }, "is not a valid URL"],
      [{ timeout: "0s" }, "timeout: must be at least 1s"],
      [{ timeout: "1h" }, "timeout: must be at most 5m"],
      [{ timeout: "soon" }, 'field "timeout"'],
      [{ enabled: "maybe" }, 'field "enabled"'],
      [{ trusted_ca: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----" }, "trusted_ca: block 0"],
      [{ trusted_leaf_certificate_bundle: "hello" }, "trusted_leaf_certificate_bundle: no PEM CERTIFICATE block"],
      [{ vault_client_cert_bundle: root }, "vault_client_cert_bundle: expected exactly one private key"],
    ];
    for (const [body, msg] of cases) {
      const r = await write(`${p}/config/external-policy`, body, {}, 400);
      expect(r.body.errors[0], JSON.stringify(body)).toContain(msg);
    }
    expect((await read(`${p}/config/external-policy`)).body.data.enabled).toBe(false);
  });

  it("stores trust settings and the client bundle, says what a Worker does not enforce, never reads back the key", async () => {
    const { path: p } = await pkiWithRoot();
    const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
    const keys = (await crypto.subtle.generateKey(alg, true, ["sign", "verify"])) as CryptoKeyPair;
    const other = (await crypto.subtle.generateKey(alg, true, ["sign", "verify"])) as CryptoKeyPair;
    const cert = await x509.X509CertificateGenerator.createSelfSigned({ serialNumber: "01", name: "CN=lanyard-client", notBefore: new Date(), notAfter: new Date(Date.now() + 86_400_000), keys, signingAlgorithm: alg });
    const keyPem = x509.PemConverter.encode((await crypto.subtle.exportKey("pkcs8", keys.privateKey)) as ArrayBuffer, "PRIVATE KEY");
    const otherPem = x509.PemConverter.encode((await crypto.subtle.exportKey("pkcs8", other.privateKey)) as ArrayBuffer, "PRIVATE KEY");
    const wrong = await write(`${p}/config/external-policy`, { vault_client_cert_bundle: `${otherPem}\n${cert.toString("pem")}` }, {}, 400);
    expect(wrong.body.errors[0]).toBe("vault_client_cert_bundle: the private key does not belong to the first certificate");

    const r = await write(`${p}/config/external-policy`, {
      enabled: true,
      external_service_url: "https://policy.example.com/evaluate",
      timeout: "30s",
      trusted_ca: root,
      vault_client_cert_bundle: `${keyPem}\n${cert.toString("pem")}`,
      entity_jmespath: "@",
    });
    expect(r.body.warnings.join("\n")).toContain("trusted_ca and trusted_leaf_certificate_bundle are stored but not enforced");
    expect(r.body.warnings.join("\n")).toContain("vault_client_cert_bundle is stored sealed but not presented");
    expect(r.body.warnings.join("\n")).toContain("entity_jmespath and group_jmespath are stored but have nothing to filter");
    const got = await read(`${p}/config/external-policy`);
    expect(got.text).not.toContain("PRIVATE KEY");
    expect(got.text).not.toContain(keyPem.split("\n")[1]);
    expect(got.body.data).toMatchObject({
      enabled: true,
      external_service_url: "https://policy.example.com/evaluate",
      timeout: 30_000_000_000,
      trusted_ca: root.trim(),
      vault_client_cert_bundle_no_keys: cert.toString("pem"),
      entity_jmespath: "@",
      external_service_validated: false,
      last_successful_request: null,
    });
    expect(Date.parse(got.body.data.external_service_last_updated)).toBeGreaterThan(Date.now() - 60_000);
    // A partial write keeps the rest; an empty string clears.
    await write(`${p}/config/external-policy`, { vault_client_cert_bundle: "", trusted_ca: "" });
    const after = (await read(`${p}/config/external-policy`)).body.data;
    expect(after).toMatchObject({ enabled: true, timeout: 30_000_000_000, trusted_ca: null, vault_client_cert_bundle_no_keys: null });
    // Development allows plain http:// to a loopback service only.
    await write(`${p}/config/external-policy`, { external_service_url: "http://127.0.0.1:9/evaluate" });
  });
});

describe("external-policy/issue", () => {
  it("generates the key locally, sends a CSR for it, and signs the service's template", async () => {
    const before = fake.received.length;
    const r = await write(`${path}/external-policy/issue/web`, { common_name: "app.example.com", alt_names: "www.example.com", key_type: "ec", ttl: "1h", team: "payments" });
    const sent = fake.received[before];
    expect(fake.problems).toEqual([]);
    expect(sent).toBeDefined();
    if (!sent) return;
    // The whole body reaches the service, plus the CSR Lanyard made (empty subject).
    expect(sent.body.user_request_key_values).toMatchObject({ common_name: "app.example.com", alt_names: "www.example.com", key_type: "ec", ttl: "1h", team: "payments" });
    expect(sent.csr.subject).toBe("");
    expect(sent.body.identity_request_key_values).toBeUndefined();
    expect(sent.body.vault_request_values).toEqual({
      policy_name: "web",
      mount: `${path}/`,
      ns: "",
      vault_is_performance_standby: false,
      vault_is_performance_secondary: false,
      issuance_mode: "issue",
      vault_generated_private_key: true,
      requested_issuer_name: "root-ca",
      requested_issuer_id: rootId,
      requested_issuer_cert: root.trim(),
      requested_issuance_config: {
        aia_values: { issuing_certificates: ["http://ca.example.com/root.der"], crl_distribution_points: ["http://crl.example.com/root.crl"], ocsp_servers: [] },
        leaf_not_after_behavior: "err",
        mount_default_ttl: "768h0m0s",
        mount_max_ttl: "768h0m0s",
      },
    });

    const d = r.body.data;
    expect(r.body.warnings).toContain("evaluated by the fake policy service");
    const cert = await expectIssuedBy(d.certificate, root);
    // Taken from the template: subject, SANs, key usage, EKU, the custom extension.
    expect(cert.subject).toBe("CN=app.example.com, O=Policy Org");
    expect(sans(cert)).toEqual(["dns:app.example.com", "dns:www.example.com"]);
    expect(cert.getExtension(x509.KeyUsagesExtension)?.usages).toBe(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment);
    expect(cert.getExtension(x509.ExtendedKeyUsageExtension)?.usages).toEqual([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]);
    expect(ext(cert, "2.16.840.1.113730.1.13")).toBeDefined();
    // Replaced: serial, CRL distribution point and AIA (the mount's URLs), signature (the
    // template's ECDSA-SHA384 is kept: the P-256 root can make it).
    expect(cert.serialNumber).not.toBe("02");
    expect(d.serial_number).toBe(cert.serialNumber.match(/../g)?.join(":"));
    expect(cert.getExtension(x509.CRLDistributionPointsExtension)?.distributionPoints[0]?.distributionPoint?.fullName?.[0]?.uniformResourceIdentifier).toBe(
      "http://crl.example.com/root.crl",
    );
    expect(cert.getExtension(x509.AuthorityInfoAccessExtension)?.caIssuers[0]?.value).toBe("http://ca.example.com/root.der");
    expect((cert.signatureAlgorithm as { hash?: { name: string } }).hash?.name).toBe("SHA-384");
    // The certificate binds the key generated here, which is the CSR's key.
    expect(b64(cert.publicKey.rawData)).toBe(b64(sent.csr.publicKey.rawData));
    expect(d.private_key_type).toBe("ec");
    expect(d.private_key).toMatch(/^-----BEGIN EC PRIVATE KEY-----/);
    expect(d.expiration).toBe(String(Math.floor(cert.notAfter.getTime() / 1000)));
    expect(d.issuing_ca).toBe(root.trim());
    expect(d.ca_chain).toEqual([root.trim()]);
    // The private key never left: not in what the service received.
    expect(sent.raw).not.toContain("PRIVATE KEY");
    const keyBody = (d.private_key as string).split("\n").slice(1, -1).join("");
    expect(sent.raw).not.toContain(keyBody.slice(0, 40));
    // store_certificate: the certificate is readable by serial.
    expect((await read(`${path}/cert/${d.serial_number}`)).body.data.certificate.trim()).toBe(d.certificate);
  });

  it("the private key matches the certificate (signature check with the returned key)", async () => {
    const r = await write(`${path}/external-policy/issue`, { common_name: "k.example.com", key_type: "ec", private_key_format: "pkcs8" });
    const d = r.body.data;
    expect(d.private_key).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    const alg = { name: "ECDSA", namedCurve: "P-256" };
    const priv = await crypto.subtle.importKey("pkcs8", x509.PemConverter.decodeFirst(d.private_key), alg, false, ["sign"]);
    const data = new TextEncoder().encode("proof");
    const sig = await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, priv, data);
    const pub = await parseCert(d.certificate).publicKey.export(alg, ["verify"]);
    expect(await crypto.subtle.verify({ name: "ECDSA", hash: "SHA-256" }, pub, sig, data)).toBe(true);
    // No policy segment: policy_name is omitted, as upstream's omitempty does.
    expect("policy_name" in (fake.received.at(-1)?.body.vault_request_values ?? {})).toBe(false);
  });

  it("defaults to an RSA-2048 key, private_key_format der, and honours format der", async () => {
    const r = await write(`${path}/external-policy/issue/web`, { common_name: "rsa.example.com", format: "der" });
    const d = r.body.data;
    expect(d.private_key_type).toBe("rsa");
    const cert = new x509.X509Certificate(Uint8Array.from(atob(d.certificate), (c) => c.charCodeAt(0)));
    expect((cert.publicKey.algorithm as { modulusLength?: number }).modulusLength).toBe(2048);
    // der + private_key_format der: base64 of the PKCS#1 key (starts with SEQUENCE, INTEGER 0).
    expect(d.private_key).toMatch(/^MII/);
    expect(d.issuing_ca).not.toContain("BEGIN");
  });

  it("ed25519 keys: the CSR sent is signed by the Ed25519 key, the certificate binds it", async () => {
    const r = await write(`${path}/external-policy/issue`, { common_name: "ed.example.com", key_type: "ed25519" });
    const sent = fake.received.at(-1);
    expect(sent?.csr.publicKey.algorithm.name).toBe("Ed25519");
    const cert = await expectIssuedBy(r.body.data.certificate, root);
    expect(b64(cert.publicKey.rawData)).toBe(b64(sent?.csr.publicKey.rawData ?? new ArrayBuffer(0)));
    expect(r.body.data.private_key_type).toBe("ed25519");
    expect(r.body.data.private_key).toMatch(/^-----BEGIN PRIVATE KEY-----/);
  });

  it("refuses bad local parameters before calling the service", async () => {
    const before = fake.received.length;
    expect((await write(`${path}/external-policy/issue`, { key_type: "dsa" }, {}, 400)).body.errors[0]).toContain("key_type: unknown key type dsa");
    expect((await write(`${path}/external-policy/issue`, { key_type: "rsa", key_bits: 1024 }, {}, 400)).body.errors[0]).toContain("key_bits");
    expect((await write(`${path}/external-policy/issue`, { format: "p12" }, {}, 400)).body.errors[0]).toContain("format");
    expect((await write(`${path}/external-policy/issue`, { private_key_format: "pem" }, {}, 400)).body.errors[0]).toContain("private_key_format");
    expect((await write(`${path}/external-policy/issue`, { key_bits: "many" }, {}, 400)).body.errors[0]).toContain('field "key_bits"');
    expect(fake.received.length).toBe(before);
  });
});

describe("external-policy/sign and sign-intermediate", () => {
  it("sign: the CSR goes to the service verbatim; the certificate binds the CSR's key; no private key", async () => {
    const csr = await makeCsr("ignored-by-policy.example.com", [], "rsa");
    const before = fake.received.length;
    const r = await write(`${path}/external-policy/sign/web`, { csr: csr.pem, common_name: "signed.example.com" });
    const sent = fake.received[before];
    expect(sent?.body.user_request_key_values.csr).toBe(csr.pem);
    expect(sent?.body.vault_request_values).toMatchObject({ issuance_mode: "sign", vault_generated_private_key: false, policy_name: "web" });
    const cert = await expectIssuedBy(r.body.data.certificate, root);
    expect(cert.subject).toBe("CN=signed.example.com, O=Policy Org");
    const csrKey = new x509.Pkcs10CertificateRequest(csr.pem).publicKey.rawData;
    expect(b64(cert.publicKey.rawData)).toBe(b64(csrKey));
    expect(r.body.data.private_key).toBeUndefined();
    expect(r.body.data.private_key_type).toBeUndefined();
  });

  it("sign: a missing or broken CSR is a 400 before the service is called", async () => {
    const before = fake.received.length;
    expect((await write(`${path}/external-policy/sign`, {}, {}, 400)).body.errors[0]).toContain('field "csr"');
    expect((await write(`${path}/external-policy/sign`, { csr: "junk" }, {}, 400)).body.errors[0]).toContain("csr:");
    expect(fake.received.length).toBe(before);
  });

  it("sign-intermediate: a CA template becomes a CA certificate signed by the issuer", async () => {
    fake.next.push({ kind: "template", ca: true });
    const csr = await makeCsr("Policy Intermediate");
    const r = await write(`${path}/external-policy/sign-intermediate/ica`, { csr: csr.pem, common_name: "Policy Intermediate CA" });
    expect(fake.received.at(-1)?.body.vault_request_values.issuance_mode).toBe("ica");
    const cert = await expectIssuedBy(r.body.data.certificate, root);
    const bc = cert.getExtension(x509.BasicConstraintsExtension);
    expect(bc?.ca).toBe(true);
    expect(bc?.pathLength).toBe(0);
    expect(cert.getExtension(x509.KeyUsagesExtension)?.usages).toBe(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign);
    // Go's builder (and RFC 5280 §4.2.1.2) gives CA certificates an SKI: the CSR key's SHA-1.
    const csrKey = new x509.Pkcs10CertificateRequest(csr.pem).publicKey;
    expect(cert.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId).toBe((await x509.SubjectKeyIdentifierExtension.create(csrKey)).keyId);
  });

  it("a leaf template on sign-intermediate, or a CA template on issue, is refused", async () => {
    const csr = await makeCsr("x");
    fake.next.push({ kind: "template" });
    const a = await write(`${path}/external-policy/sign-intermediate`, { csr: csr.pem }, {}, 502);
    expect(a.body.errors[0]).toContain("is not a CA certificate");
    fake.next.push({ kind: "template", ca: true });
    const b = await write(`${path}/external-policy/sign`, { csr: csr.pem }, {}, 502);
    expect(b.body.errors[0]).toContain("describes a CA certificate");
  });
});

describe("issuer selection", () => {
  it("per-issuer path: that issuer is requested and signs", async () => {
    const r = await write(`${path}/issuer/rsa-root/external-policy/issue/web`, { common_name: "per.example.com", key_type: "ec" });
    const sent = fake.received.at(-1);
    expect(sent?.body.vault_request_values).toMatchObject({ requested_issuer_name: "rsa-root", requested_issuer_id: rsaRootId, requested_issuer_cert: rsaRoot.trim() });
    const cert = await expectIssuedBy(r.body.data.certificate, rsaRoot);
    // The ECDSA template algorithm cannot be made by an RSA key: the issuer's default is used.
    expect((cert.signatureAlgorithm as { name?: string }).name).toBe("RSASSA-PKCS1-v1_5");
    expect(r.body.data.issuing_ca).toBe(rsaRoot.trim());
  });

  it("per-issuer path wins over the service's issuer_ref (with a warning)", async () => {
    fake.next.push({ kind: "template", issuerRef: rootId });
    const csr = await makeCsr("p");
    const r = await write(`${path}/issuer/rsa-root/external-policy/sign`, { csr: csr.pem, common_name: "p.example.com" });
    await expectIssuedBy(r.body.data.certificate, rsaRoot);
    expect(r.body.warnings.join("\n")).toContain(`named issuer_ref "${rootId}"`);
  });

  it("plain path: the service's issuer_ref picks the issuer; without one the default signs", async () => {
    fake.next.push({ kind: "template", issuerRef: "rsa-root" });
    const a = await write(`${path}/external-policy/issue`, { common_name: "chosen.example.com", key_type: "ec" });
    await expectIssuedBy(a.body.data.certificate, rsaRoot);
    fake.next.push({ kind: "template", omitIssuerRef: true });
    const b = await write(`${path}/external-policy/issue`, { common_name: "default.example.com", key_type: "ec" });
    await expectIssuedBy(b.body.data.certificate, root);
    fake.next.push({ kind: "template", issuerRef: "ghost" });
    const c = await write(`${path}/external-policy/issue`, { common_name: "ghost.example.com", key_type: "ec" }, {}, 502);
    expect(c.body.errors[0]).toContain('issuer_ref "ghost"');
  });

  it("an unknown issuer in the path is a 400 before the service is called", async () => {
    const before = fake.received.length;
    const r = await write(`${path}/issuer/nope/external-policy/issue`, { common_name: "x" }, {}, 400);
    expect(r.body.errors[0]).toContain("unable to find PKI issuer for reference: nope");
    expect(fake.received.length).toBe(before);
  });
});

describe("the service's decisions and failures", () => {
  it("a refusal is a 400 with the service's reason; with a certificate too, the reason is a warning", async () => {
    fake.next.push({ kind: "refuse", message: "team payments may not request *.example.org" });
    const r = await write(`${path}/external-policy/issue/web`, { common_name: "x.example.org" }, {}, 400);
    expect(r.body.errors).toEqual(["the external policy service refused the request: team payments may not request *.example.org"]);
    fake.next.push({ kind: "template", extraError: "validity shortened by policy" });
    const ok = await write(`${path}/external-policy/issue/web`, { common_name: "y.example.com", key_type: "ec" });
    expect(ok.body.warnings).toContain("validity shortened by policy");
  });

  it("store_certificate false leaves the certificate unstored; generate_lease is answered with a warning", async () => {
    fake.next.push({ kind: "template", store: false });
    const a = await write(`${path}/external-policy/issue`, { common_name: "nostore.example.com", key_type: "ec" });
    await read(`${path}/cert/${a.body.data.serial_number}`, {}, 404);
    fake.next.push({ kind: "template", store: true, lease: true });
    const b = await write(`${path}/external-policy/issue`, { common_name: "lease.example.com", key_type: "ec" });
    expect(b.body.warnings.join("\n")).toContain("generate_lease");
  });

  it("a template beyond the issuer's notAfter follows leaf_not_after_behavior", async () => {
    fake.next.push({ kind: "template", notAfterDays: 365 * 30 });
    const r = await write(`${path}/external-policy/issue`, { common_name: "long.example.com", key_type: "ec" }, {}, 400);
    expect(r.body.errors[0]).toContain("beyond the expiration of the CA certificate");
    await patch(`${path}/issuer/root-ca`, { leaf_not_after_behavior: "truncate" });
    fake.next.push({ kind: "template", notAfterDays: 365 * 30 });
    const t = await write(`${path}/external-policy/issue`, { common_name: "long.example.com", key_type: "ec" });
    expect(parseCert(t.body.data.certificate).notAfter.getTime()).toBe(parseCert(root).notAfter.getTime());
    await patch(`${path}/issuer/root-ca`, { leaf_not_after_behavior: "err" });
  });

  it("every protocol failure is a clear 502, a slow service a 504", async () => {
    const csr = await makeCsr("f");
    const cases: [Behaviour, number, string][] = [
      [{ kind: "status", status: 500 }, 502, "answered HTTP 500"],
      [{ kind: "status", status: 302 }, 502, "answered HTTP 302"],
      [{ kind: "raw", body: "<html>oops</html>" }, 502, "the answer is not JSON"],
      [{ kind: "wrong-uuid" }, 502, "does not match the request's"],
      [{ kind: "unknown-field" }, 502, "unknown fields: surprise"],
      [{ kind: "bad-template" }, 502, "certificate template"],
      [{ kind: "empty" }, 502, "neither a certificate nor an error"],
    ];
    for (const [b, status, msg] of cases) {
      fake.next.push(b);
      const r = await write(`${path}/external-policy/sign`, { csr: csr.pem }, {}, status);
      expect(r.body.errors[0], JSON.stringify(b)).toContain(msg);
      expect(r.body.errors[0]).not.toContain("should be discarded");
    }
    expect(fake.problems).toEqual([]);
  });

  it("a service that never answers times out with 504 after `timeout`", async () => {
    await write(`${path}/config/external-policy`, { timeout: "1s" });
    fake.next.push({ kind: "hang" });
    const started = Date.now();
    const r = await write(`${path}/external-policy/issue`, { common_name: "slow.example.com", key_type: "ec" }, {}, 504);
    expect(r.body.errors[0]).toContain("no answer within the configured timeout of 1s");
    expect(Date.now() - started).toBeLessThan(10_000);
    await write(`${path}/config/external-policy`, { timeout: "5s" });
  });

  it("an unreachable service is a 502; a disabled one a 400", async () => {
    await write(`${path}/config/external-policy`, { external_service_url: "https://down.policy.test/evaluate" });
    const r = await write(`${path}/external-policy/issue`, { common_name: "x", key_type: "ec" }, {}, 502);
    expect(r.body.errors[0]).toBe("external policy service: unreachable (the connection failed)");
    await write(`${path}/config/external-policy`, { enabled: false, external_service_url: URL_OK });
    const d = await write(`${path}/external-policy/issue`, { common_name: "x" }, {}, 400);
    expect(d.body.errors[0]).toContain("not enabled");
    await write(`${path}/config/external-policy`, { enabled: true });
  });

  it("a well-formed answer marks the configuration validated; a new write resets it", async () => {
    await write(`${path}/external-policy/issue`, { common_name: "v.example.com", key_type: "ec" });
    const a = (await read(`${path}/config/external-policy`)).body.data;
    expect(a.external_service_validated).toBe(true);
    expect(Date.parse(a.last_successful_request)).toBeGreaterThan(Date.now() - 60_000);
    await write(`${path}/config/external-policy`, { timeout: "6s" });
    const b = (await read(`${path}/config/external-policy`)).body.data;
    expect(b.external_service_validated).toBe(false);
    expect(b.last_successful_request).toBe(a.last_successful_request);
  });
});
