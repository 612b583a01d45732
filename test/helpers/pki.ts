/** PKI fixtures for integration tests: a mount with a root, roles, and X.509 checks via @peculiar/x509. */
import * as x509 from "@peculiar/x509";
import { expect } from "vitest";
import { mount, write } from "./api";

x509.cryptoProvider.set(crypto);

export { x509 };

/**
 * A fresh PKI mount with an EC P-256 root named "root-ca" (valid until 2035 unless a ttl is
 * given); returns the mount path, the root PEM and its issuer id.
 */
export async function pkiWithRoot(opts: { keyType?: string; keyBits?: number; ttl?: string; cn?: string } = {}) {
  const path = await mount("pki");
  const r = await write(`${path}/root/generate/internal`, {
    common_name: opts.cn ?? "Test Root CA",
    key_type: opts.keyType ?? "ec",
    key_bits: opts.keyBits ?? 256,
    ...(opts.ttl ? { ttl: opts.ttl } : { not_after: "2035-01-01T00:00:00Z" }),
    issuer_name: "root-ca",
  });
  return { path, root: r.body.data.certificate as string, issuerId: r.body.data.issuer_id as string };
}

export function parseCert(pem: string): x509.X509Certificate {
  return new x509.X509Certificate(pem);
}

/** The SAN entries of a certificate as "type:value" strings. */
export function sans(cert: x509.X509Certificate): string[] {
  const ext = cert.getExtension(x509.SubjectAlternativeNameExtension);
  return ext ? ext.names.items.map((n) => `${n.type}:${n.value}`) : [];
}

/** Asserts that `leafPem` is signed by `caPem`. */
export async function expectSignedBy(leafPem: string, caPem: string): Promise<void> {
  const leaf = parseCert(leafPem);
  const ca = parseCert(caPem);
  expect(await leaf.verify({ publicKey: ca.publicKey, signatureOnly: true })).toBe(true);
}

/** An EC P-256 CSR made in the test (WebCrypto), with the given CN and DNS SANs. */
export async function makeCsr(cn: string, dns: string[] = [], alg: "ec" | "rsa" = "ec"): Promise<{ pem: string; keys: CryptoKeyPair }> {
  const params =
    alg === "ec"
      ? { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" }
      : { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" };
  const keys = (await crypto.subtle.generateKey(params, true, ["sign", "verify"])) as CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: cn ? `CN=${cn}` : "",
    keys,
    signingAlgorithm: params,
    extensions: dns.length ? [new x509.SubjectAlternativeNameExtension(dns.map((d) => ({ type: "dns" as const, value: d })))] : [],
  });
  return { pem: csr.toString("pem"), keys };
}
