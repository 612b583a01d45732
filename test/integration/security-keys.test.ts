/**
 * Key sizes the runtime cannot handle are refused as such, and DER with bytes
 * after its end is refused, wherever a CSR, a private key or a certificate is read from a
 * request. workerd's WebCrypto (BoringSSL) imports RSA keys of at most 8192 bits: a larger one
 * used to surface as "signature is invalid" (CSR) or "Invalid PKCS8 input" (key import).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { write } from "../helpers/api";
import { makeCsr, pkiWithRoot } from "../helpers/pki";
import { traditionalPrivateKey } from "../../src/engines/pki/x509/asn1";
import { RSA16384_CA, RSA16384_CSR, RSA16384_KEY } from "../fixtures/rsa16384";

const TOO_BIG = "unsupported key size: RSA 16384 bits (supported: up to 8192 bits)";

let path = "";
let rootPem = "";
let leafPem = "";
beforeAll(async () => {
  ({ path, root: rootPem } = await pkiWithRoot());
  await write(`${path}/roles/any`, { allow_any_name: true, key_type: "any", ttl: "1h" });
  await write(`${path}/roles/ec`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
  leafPem = (await write(`${path}/issue/ec`, { common_name: "leaf.example.com" })).body.data.certificate as string;
});

function derOf(pem: string): Uint8Array {
  return Uint8Array.from(atob(pem.replace(/-----[A-Z ]+-----/g, "").replace(/\s+/g, "")), (c) => c.charCodeAt(0));
}

function pemOf(label: string, der: Uint8Array): string {
  const b64 = btoa(String.fromCharCode(...der));
  return `-----BEGIN ${label}-----\n${(b64.match(/.{1,64}/g) ?? []).join("\n")}\n-----END ${label}-----`;
}

/** The PEM with `extra` bytes appended to its DER inside the same block. */
function withTrailing(pem: string, label: string, extra: number[] = [0x05, 0x00]): string {
  const der = derOf(pem);
  const out = new Uint8Array(der.length + extra.length);
  out.set(der);
  out.set(extra, der.length);
  return pemOf(label, out);
}

describe("an RSA key larger than 8192 bits is an unsupported key size, not a bad signature", () => {
  it.each([
    ["sign/any", { common_name: "big.example.com" }],
    ["sign-verbatim", {}],
    ["root/sign-intermediate", { common_name: "Big Intermediate" }],
    ["issuer/default/sign/any", { common_name: "big.example.com" }],
  ])("%s refuses the CSR before verifying it", async (p, extra) => {
    const r = await write(`${path}/${p}`, { csr: RSA16384_CSR, ...extra }, {}, 400);
    expect(r.body.errors).toEqual([`csr: ${TOO_BIG}`]);
  });

  it("keys/import names the field, for PKCS#8 and PKCS#1 keys", async () => {
    const r = await write(`${path}/keys/import`, { pem_bundle: RSA16384_KEY }, {}, 400);
    expect(r.body.errors).toEqual([`pem_bundle: ${TOO_BIG}`]);
    const pkcs1 = traditionalPrivateKey(Uint8Array.from(derOf(RSA16384_KEY)));
    expect(pkcs1.label).toBe("RSA PRIVATE KEY");
    const r1 = await write(`${path}/keys/import`, { pem_bundle: pemOf(pkcs1.label, pkcs1.der) }, {}, 400);
    expect(r1.body.errors).toEqual([`pem_bundle: ${TOO_BIG}`]);
  });

  it.each(["issuers/import/bundle", "config/ca"])("%s refuses the key, naming the field", async (p) => {
    const r = await write(`${path}/${p}`, { pem_bundle: RSA16384_KEY }, {}, 400);
    expect(r.body.errors).toEqual([`pem_bundle: ${TOO_BIG}`]);
    const alt = await write(`${path}/${p}`, { certificate: RSA16384_KEY }, {}, 400);
    expect(alt.body.errors).toEqual([`certificate: ${TOO_BIG}`]);
  });

  it("issuers/import/bundle refuses a CA certificate whose key the runtime cannot verify with", async () => {
    const r = await write(`${path}/issuers/import/bundle`, { pem_bundle: RSA16384_CA }, {}, 400);
    expect(r.body.errors).toEqual([`Error parsing issuer 0: ${TOO_BIG}`]);
    const cert = await write(`${path}/issuers/import/cert`, { pem_bundle: RSA16384_CA }, {}, 400);
    expect(cert.body.errors).toEqual([`Error parsing issuer 0: ${TOO_BIG}`]);
  });

  it("revoke-with-key names the private_key field", async () => {
    const r = await write(`${path}/revoke-with-key`, { certificate: leafPem, private_key: RSA16384_KEY }, {}, 400);
    expect(r.body.errors).toEqual([`private_key: ${TOO_BIG}`]);
  });

  it("config/external-policy refuses such a client bundle, naming the field", async () => {
    const r = await write(`${path}/config/external-policy`, { vault_client_cert_bundle: `${RSA16384_KEY}\n${RSA16384_CA}` }, {}, 400);
    expect(r.body.errors).toEqual([`vault_client_cert_bundle: ${TOO_BIG}`]);
  });

  it("RSA keys of 8192 bits and less still import (an RSA-2048 key made here)", async () => {
    const pair = (await crypto.subtle.generateKey(
      { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" },
      true,
      ["sign", "verify"],
    )) as CryptoKeyPair;
    const pkcs8 = new Uint8Array((await crypto.subtle.exportKey("pkcs8", pair.privateKey)) as ArrayBuffer);
    const r = await write(`${path}/keys/import`, { pem_bundle: pemOf("PRIVATE KEY", pkcs8) });
    expect(r.body.data.key_type).toBe("rsa");
  });
});

describe("DER with bytes after its end is refused", () => {
  it.each([
    ["sign/any", { common_name: "t.example.com" }],
    ["sign-verbatim", {}],
    ["root/sign-intermediate", { common_name: "Trailing Intermediate" }],
  ])("%s: a CSR with trailing bytes", async (p, extra) => {
    const { pem } = await makeCsr("t.example.com", ["t.example.com"]);
    // Sanity: the same CSR without the extra bytes is signed.
    await write(`${path}/${p}`, { csr: pem, ...extra });
    for (const bytes of [[0x00], [0x05, 0x00], Array.from(derOf(pem))]) {
      const r = await write(`${path}/${p}`, { csr: withTrailing(pem, "CERTIFICATE REQUEST", bytes), ...extra }, {}, 400);
      expect(r.body.errors).toEqual(["csr: trailing data after the CSR"]);
    }
  });

  it("issuers/import/bundle and issuers/import/cert: a certificate with trailing bytes", async () => {
    for (const p of ["issuers/import/bundle", "issuers/import/cert"]) {
      const r = await write(`${path}/${p}`, { pem_bundle: withTrailing(rootPem, "CERTIFICATE") }, {}, 400);
      expect(r.body.errors).toEqual(["Error parsing issuer 0: trailing data after the certificate"]);
    }
  });

  it("revoke: a certificate with trailing bytes", async () => {
    const r = await write(`${path}/revoke`, { certificate: withTrailing(leafPem, "CERTIFICATE") }, {}, 400);
    expect(r.body.errors).toEqual(["certificate could not be parsed: trailing data after the certificate"]);
    // The certificate itself was not revoked by the refused request.
    const ok = await write(`${path}/revoke`, { certificate: leafPem });
    expect(ok.body.data.revocation_time).toBeGreaterThan(0);
  });

  it("sign-self-issued: a certificate with trailing bytes", async () => {
    const r = await write(`${path}/root/sign-self-issued`, { certificate: withTrailing(rootPem, "CERTIFICATE") }, {}, 400);
    expect(r.body.errors).toEqual(["certificate: error parsing certificate: trailing data after the certificate"]);
  });

  it("config/external-policy: a trusted_ca certificate with trailing bytes", async () => {
    const r = await write(`${path}/config/external-policy`, { trusted_ca: withTrailing(rootPem, "CERTIFICATE") }, {}, 400);
    expect(r.body.errors).toEqual(["trusted_ca: block 0: trailing data after the certificate"]);
  });
});
