/**
 * EC P-224 end to end through the API (Vault API /pki/roles/:name: `ec` 224 is a valid size, signed with
 * ECDSA-SHA256). WebCrypto has no P-224, so signatures are checked here with an OpenSSL-made
 * fixture set and a curve implementation driven from the test itself; the e2e project checks
 * the same paths with the openssl CLI.
 */
import { ecdsa, weierstrass } from "@noble/curves/abstract/weierstrass.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { describe, expect, it } from "vitest";
import { api, mount, read, write } from "../helpers/api";
import { expectSignedBy, parseCert, x509 } from "../helpers/pki";

// Made with: openssl ecparam -name secp224r1 -genkey -noout; openssl req -x509 -new -sha256
// -subj "/CN=OpenSSL P-224 CA" -addext basicConstraints=critical,CA:TRUE (valid to 2126).
const OPENSSL_CA_KEY = `-----BEGIN EC PRIVATE KEY-----
MGgCAQEEHCwiCq+XA7bfw8wAttnLTjZZTxOEDNfhsOmv6FagBwYFK4EEACGhPAM6
AARkDBmFX/Ou1Yob3zsRADXePhcwN7xvW47+GIvsfeqVIbqtNaoXlBmq9SyWA/5T
XfTIQnf38vhiuA==
-----END EC PRIVATE KEY-----`;
const OPENSSL_CA = `-----BEGIN CERTIFICATE-----
MIIBijCCATigAwIBAgIUQJckz4o61lKmz9vaF7BWBcViRXQwCgYIKoZIzj0EAwIw
GzEZMBcGA1UEAwwQT3BlblNTTCBQLTIyNCBDQTAgFw0yNjExMjMxMDU2MTlaGA8y
MTI2MTAzMDEwNTYxOVowGzEZMBcGA1UEAwwQT3BlblNTTCBQLTIyNCBDQTBOMBAG
ByqGSM49AgEGBSuBBAAhAzoABGQMGYVf867VihvfOxEANd4+FzA3vG9bjv4Yi+x9
6pUhuq01qheUGar1LJYD/lNd9MhCd/fy+GK4o2MwYTAdBgNVHQ4EFgQUgVRMXDc/
wqRdwqS+UXmimxm2+XEwHwYDVR0jBBgwFoAUgVRMXDc/wqRdwqS+UXmimxm2+XEw
DwYDVR0TAQH/BAUwAwEB/zAOBgNVHQ8BAf8EBAMCAQYwCgYIKoZIzj0EAwIDQAAw
PQIdAIfW1Td0YRoaDnyQ2irEG/hFysPSGe4NzTwNcnwCHAWYL+J/kEfmo9VAdjiO
zTpYX37s4htAZLdb6gc=
-----END CERTIFICATE-----`;
// openssl req -new -key <P-224 key> -subj /CN=csr.example.com -addext subjectAltName=DNS:csr.example.com
const OPENSSL_CSR = `-----BEGIN CERTIFICATE REQUEST-----
MIHvMIGeAgEAMBoxGDAWBgNVBAMMD2Nzci5leGFtcGxlLmNvbTBOMBAGByqGSM49
AgEGBSuBBAAhAzoABCIAqCcNzm+nJ5tB/cIDhoA5KEhPfUORRVMrUEd8PbAn/bko
7W1ekmYjzEs8frOqRQdVP/YBoZofoC0wKwYJKoZIhvcNAQkOMR4wHDAaBgNVHREE
EzARgg9jc3IuZXhhbXBsZS5jb20wCgYIKoZIzj0EAwIDQAAwPQIdAPXGC6Lju+hr
ZIznrIlhWVy1GoiaapRys6sZeDMCHChETqSuOX8Luo7L71UNou5s1uehjGZi366I
hoM=
-----END CERTIFICATE REQUEST-----`;

// SEC 2 v2 §2.6.1 secp224r1, for the test's own signature checks.
const p224 = ecdsa(
  weierstrass({
    p: BigInt("0xffffffffffffffffffffffffffffffff000000000000000000000001"),
    n: BigInt("0xffffffffffffffffffffffffffff16a2e0b8f03e13dd29455c5c2a3d"),
    h: BigInt(1),
    a: BigInt("0xfffffffffffffffffffffffffffffffefffffffffffffffffffffffe"),
    b: BigInt("0xb4050a850c04b3abf54132565044b0b7d7bfd8ba270b39432355ffb4"),
    Gx: BigInt("0xb70e0cbd6bb4bf7f321390b94a03c1d356c21122343280d6115c1d21"),
    Gy: BigInt("0xbd376388b5f723fb4c22dfe6cd4375a05a07476444d5819985007e34"),
  }),
  sha256,
);

const SECP224R1 = "1.3.132.0.33";
const ECDSA_SHA256 = "1.2.840.10045.4.3.2";

function derOf(pem: string): Uint8Array {
  const b64 = pem.replace(/-----[A-Z0-9 ]+-----/g, "").replace(/\s+/g, "");
  return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
}

/** Minimal DER walk: [tag, content start, content end, element end]. */
function tlv(buf: Uint8Array, at: number): [number, number, number] {
  let len = buf[at + 1] ?? 0;
  let start = at + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + (buf[start + i] ?? 0);
    start += n;
  }
  return [start, start + len, buf[at] ?? 0];
}

/** Splits Certificate / CertificateList / CertificationRequest into tbs, algorithm OID bytes, signature. */
function signedParts(der: Uint8Array): { tbs: Uint8Array; alg: Uint8Array; sig: Uint8Array } {
  const [outerStart] = tlv(der, 0);
  const [, tbsEnd] = tlv(der, outerStart);
  const [algStart, algEnd] = tlv(der, tbsEnd);
  const [sigStart, sigEnd] = tlv(der, algEnd);
  return { tbs: der.subarray(outerStart, tbsEnd), alg: der.subarray(algStart, algEnd), sig: der.subarray(sigStart + 1, sigEnd) };
}

/** The uncompressed point of a P-224 SubjectPublicKeyInfo. */
function pointOf(spki: Uint8Array): Uint8Array {
  return spki.subarray(spki.length - 57);
}

function oidDer(dotted: string): string {
  // Only the two OIDs above are needed: compare by their encodings.
  return { [ECDSA_SHA256]: "06082a8648ce3d040302", [SECP224R1]: "06052b81040021" }[dotted] ?? "";
}
const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

/** Asserts `pem` (certificate or CRL) is ECDSA-SHA256-signed by the P-224 key of `caPem`. */
function expectP224Signed(pem: string, caPem: string): void {
  const { tbs, alg, sig } = signedParts(derOf(pem));
  expect(hex(alg).startsWith(oidDer(ECDSA_SHA256))).toBe(true);
  const caSpki = new Uint8Array(parseCert(caPem).publicKey.rawData);
  expect(hex(caSpki)).toContain(oidDer(SECP224R1));
  expect(p224.verify(sig, tbs, pointOf(caSpki), { format: "der", lowS: false })).toBe(true);
}

async function mountWithP224Root() {
  const path = await mount("pki");
  const r = await write(`${path}/root/generate/exported`, { common_name: "P-224 Root", key_type: "ec", key_bits: 224, ttl: "700h", issuer_name: "root" });
  return { path, root: r.body.data.certificate as string, key: r.body.data.private_key as string };
}

describe("EC P-224", () => {
  it("generates a P-224 root signed with ECDSA-SHA256 and exports a SEC1 key", async () => {
    const { path, root, key } = await mountWithP224Root();
    const cert = parseCert(root);
    expect(hex(new Uint8Array(cert.publicKey.rawData))).toContain(oidDer(SECP224R1));
    expectP224Signed(root, root);
    expect(key.startsWith("-----BEGIN EC PRIVATE KEY-----")).toBe(true);
    // SEC1 with the named curve in [0] (OpenSSL needs it).
    expect(hex(derOf(key))).toContain(`a007${oidDer(SECP224R1)}`);
    const issuer = await read(`${path}/issuer/root`);
    expect(issuer.body.data.revocation_signature_algorithm).toBe("ECDSAWithSHA256");
    const keys = await read(`${path}/key/${issuer.body.data.key_id}`);
    expect(keys.body.data.key_type).toBe("ec");
  });

  it("revokes under a P-224 root: the CRL is ECDSA-SHA256-signed by the root and lists the serial", async () => {
    const { path, root } = await mountWithP224Root();
    await write(`${path}/roles/p`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
    const leaf = await write(`${path}/issue/p`, { common_name: "gone.example.com" });
    await write(`${path}/revoke`, { serial_number: leaf.body.data.serial_number });
    const crl = await api("GET", `${path}/crl/pem`, { token: null });
    expect(crl.status, crl.text).toBe(200);
    expectP224Signed(crl.text, root);
    const serial = (leaf.body.data.serial_number as string).replace(/:/g, "");
    expect(new x509.X509Crl(crl.text).entries.map((e) => e.serialNumber.toLowerCase().replace(/^0+/, ""))).toContain(serial.replace(/^0+/, ""));
  });

  it("issues P-224 leaves from a role with key_bits 224, under P-224 and P-256 issuers", async () => {
    const { path, root } = await mountWithP224Root();
    await write(`${path}/roles/p224`, { allow_any_name: true, key_type: "ec", key_bits: 224, ttl: "1h" });
    const r = await write(`${path}/issue/p224`, { common_name: "leaf.example.com" });
    expect(r.body.data.private_key_type).toBe("ec");
    expect(r.body.data.private_key.startsWith("-----BEGIN EC PRIVATE KEY-----")).toBe(true);
    expectP224Signed(r.body.data.certificate, root);
    expect(hex(new Uint8Array(parseCert(r.body.data.certificate).publicKey.rawData))).toContain(oidDer(SECP224R1));
    // The stored copy is the same certificate.
    const stored = await read(`${path}/cert/${r.body.data.serial_number}`);
    expect(stored.body.data.certificate.trim()).toBe(r.body.data.certificate.trim());

    // A P-256 issuer signs a P-224 leaf through WebCrypto.
    const p256 = await mount("pki");
    const root256 = (await write(`${p256}/root/generate/internal`, { common_name: "R256", key_type: "ec", ttl: "700h" })).body.data.certificate as string;
    await write(`${p256}/roles/p224`, { allow_any_name: true, key_type: "ec", key_bits: 224, ttl: "1h" });
    const leaf = await write(`${p256}/issue/p224`, { common_name: "x.example.com" });
    await expectSignedBy(leaf.body.data.certificate, root256);
  });

  it("signs an OpenSSL-made P-224 CSR and refuses one whose signature is broken", async () => {
    const { path, root } = await mountWithP224Root();
    await write(`${path}/roles/web`, { allowed_domains: "example.com", allow_subdomains: true, key_type: "ec", key_bits: 224, ttl: "1h" });
    const r = await write(`${path}/sign/web`, { csr: OPENSSL_CSR, common_name: "csr.example.com" });
    expectP224Signed(r.body.data.certificate, root);
    const cert = parseCert(r.body.data.certificate);
    expect(cert.subject).toBe("CN=csr.example.com");
    // The CSR's key is carried over unchanged.
    const csrSpki = new Uint8Array(new x509.Pkcs10CertificateRequest(OPENSSL_CSR).publicKey.rawData);
    expect(hex(new Uint8Array(cert.publicKey.rawData))).toBe(hex(csrSpki));

    // Flip one bit of the signature: 400 naming the reason.
    const der = derOf(OPENSSL_CSR);
    der[der.length - 3] = (der[der.length - 3] ?? 0) ^ 0x01;
    const broken = `-----BEGIN CERTIFICATE REQUEST-----\n${btoa(String.fromCharCode(...der))}\n-----END CERTIFICATE REQUEST-----`;
    const bad = await write(`${path}/sign/web`, { csr: broken, common_name: "csr.example.com" }, {}, 400);
    expect(bad.body.errors[0]).toContain("signature is invalid");
    // A role asking for larger EC keys refuses the P-224 CSR.
    await write(`${path}/roles/big`, { allowed_domains: "example.com", allow_subdomains: true, key_type: "ec", key_bits: 384, ttl: "1h" });
    expect((await write(`${path}/sign/big`, { csr: OPENSSL_CSR }, {}, 400)).body.errors[0]).toMatch(/224|bits/);
  });

  it("generates P-224 intermediates (CSR) and keys, and signs the intermediate with the root", async () => {
    const { path, root } = await mountWithP224Root();
    const int = await mount("pki");
    const csr = await write(`${int}/intermediate/generate/internal`, { common_name: "P-224 Intermediate", key_type: "ec", key_bits: 224 });
    const csrDer = derOf(csr.body.data.csr);
    const { tbs, sig } = signedParts(csrDer);
    const csrSpki = new Uint8Array(new x509.Pkcs10CertificateRequest(csr.body.data.csr).publicKey.rawData);
    expect(p224.verify(sig, tbs, pointOf(csrSpki), { format: "der", lowS: false })).toBe(true);
    const signed = await write(`${path}/root/sign-intermediate`, { csr: csr.body.data.csr, common_name: "P-224 Intermediate", ttl: "600h" });
    expectP224Signed(signed.body.data.certificate, root);
    await write(`${int}/intermediate/set-signed`, { certificate: `${signed.body.data.certificate}\n${root}` });
    await write(`${int}/roles/leaf`, { allow_any_name: true, key_type: "ec", key_bits: 256, ttl: "1h" });
    const leaf = await write(`${int}/issue/leaf`, { common_name: "deep.example.com" });
    expectP224Signed(leaf.body.data.certificate, signed.body.data.certificate);
    expect(leaf.body.data.ca_chain).toHaveLength(2);

    const k = await write(`${int}/keys/generate/exported`, { key_type: "ec", key_bits: 224, key_name: "k224" });
    expect(k.body.data.key_type).toBe("ec");
    expect(k.body.data.private_key.startsWith("-----BEGIN EC PRIVATE KEY-----")).toBe(true);
  });

  it("imports an OpenSSL P-224 key and CA, then issues with it", async () => {
    const path = await mount("pki");
    const key = await write(`${path}/keys/import`, { pem_bundle: OPENSSL_CA_KEY, key_name: "ossl" });
    expect(key.body.data.key_type).toBe("ec");
    const imp = await write(`${path}/issuers/import/bundle`, { pem_bundle: `${OPENSSL_CA_KEY}\n${OPENSSL_CA}` });
    expect(imp.body.data.imported_issuers).toHaveLength(1);
    const issuerId = imp.body.data.imported_issuers[0] as string;
    // The imported issuer is matched to the already imported key.
    expect((await read(`${path}/issuer/${issuerId}`)).body.data.key_id).toBe(key.body.data.key_id);
    await write(`${path}/roles/any`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
    const leaf = await write(`${path}/issue/any`, { common_name: "imported.example.com" });
    expectP224Signed(leaf.body.data.certificate, OPENSSL_CA);
    expect(leaf.body.data.issuing_ca.trim()).toBe(OPENSSL_CA);
  });
});
