/**
 * The hand-written PKCS#10 reader and self-signature check (src/engines/pki/x509/pkcs10.ts,
 * signature.ts), against requests made by @peculiar/x509's generator (the library the reader
 * replaced) for every signature scheme, and against broken requests: each must fail with the
 * message the sign paths put after "csr: ". Runs in the Workers pool: the point is workerd's
 * WebCrypto.
 */
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { describe, expect, it } from "vitest";
import { parseCsr } from "../../src/engines/pki/x509/pkcs10";
import { X509Error } from "../../src/engines/pki/x509/errors";
import { encodeName } from "../../src/engines/pki/x509/asn1";
import { bitString, children, concat, ctxCons, int, octets, oid, parse, seq, set, uintBytes } from "../../src/engines/pki/x509/der";
import { generateP224KeyPair, importP224PrivateKey } from "../../src/engines/pki/x509/p224";

x509.cryptoProvider.set(crypto);

type Alg = SubtleCryptoGenerateKeyAlgorithm;
type SignAlg = SubtleCryptoSignAlgorithm & { hash?: string; saltLength?: number };

async function libraryCsr(alg: Alg, signing: SignAlg, extensions: x509.Extension[] = []): Promise<Uint8Array<ArrayBuffer>> {
  const keys = (await crypto.subtle.generateKey(alg, true, ["sign", "verify"])) as CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({ name: "CN=req.example", keys, signingAlgorithm: signing, extensions });
  return new Uint8Array(csr.rawData);
}

const RSA = (name: string, hash: string): Alg => ({ name, modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash });

async function problem(der: Uint8Array<ArrayBuffer>): Promise<string> {
  try {
    await parseCsr(der);
  } catch (e) {
    expect(e).toBeInstanceOf(X509Error);
    return (e as Error).message;
  }
  return "accepted";
}

/** The request with `info` re-signed by nobody: the original algorithm and signature kept. */
function withInfo(der: Uint8Array<ArrayBuffer>, info: Uint8Array): Uint8Array<ArrayBuffer> {
  const [, alg, sig] = children(parse(der));
  return seq(info, alg?.raw ?? new Uint8Array(0), sig?.raw ?? new Uint8Array(0));
}

describe("PKCS#10 requests", () => {
  it("reads and verifies EC, RSA PKCS#1 v1.5, RSA-PSS and Ed25519 requests", async () => {
    const cases: [Alg, SignAlg, string, number][] = [
      [{ name: "ECDSA", namedCurve: "P-256" }, { name: "ECDSA", hash: "SHA-256" }, "ec", 256],
      [{ name: "ECDSA", namedCurve: "P-384" }, { name: "ECDSA", hash: "SHA-384" }, "ec", 384],
      [{ name: "ECDSA", namedCurve: "P-521" }, { name: "ECDSA", hash: "SHA-512" }, "ec", 521],
      [{ name: "ECDSA", namedCurve: "P-256" }, { name: "ECDSA", hash: "SHA-1" }, "ec", 256],
      [RSA("RSASSA-PKCS1-v1_5", "SHA-256"), { name: "RSASSA-PKCS1-v1_5" }, "rsa", 2048],
      [RSA("RSASSA-PKCS1-v1_5", "SHA-512"), { name: "RSASSA-PKCS1-v1_5" }, "rsa", 2048],
      [RSA("RSA-PSS", "SHA-256"), { name: "RSA-PSS", saltLength: 32 }, "rsa", 2048],
      [RSA("RSA-PSS", "SHA-384"), { name: "RSA-PSS", saltLength: 0 }, "rsa", 2048],
      [{ name: "Ed25519" }, { name: "Ed25519" }, "ed25519", 0],
    ];
    for (const [alg, signing, type, bits] of cases) {
      const der = await libraryCsr(alg, signing);
      const info = await parseCsr(der);
      expect(info.facts, JSON.stringify(signing)).toMatchObject({ type, bits });
      expect(info.subject).toEqual(encodeName({ commonName: "req.example" }));
    }
  });

  it("verifies P-224 requests in software", async () => {
    const pair = generateP224KeyPair();
    const info = seq(int(0), encodeName({ commonName: "p224.example" }), pair.spki, ctxCons(0, new Uint8Array(0)));
    const raw = importP224PrivateKey(pair.pkcs8).sign("SHA-256", info);
    const der = seq(info, seq(oid("1.2.840.10045.4.3.2")), bitString(seq(uintBytes(raw.subarray(0, 28)), uintBytes(raw.subarray(28)))));
    expect((await parseCsr(der)).facts).toMatchObject({ type: "ec", bits: 224 });
    const bad = der.slice();
    bad[bad.length - 3] = (bad[bad.length - 3] ?? 0) ^ 0x01;
    expect(await problem(bad)).toBe("certificate request signature is invalid");
  });

  it("returns the requested extensions, SANs, key usage and CA flag", async () => {
    const der = await libraryCsr({ name: "ECDSA", namedCurve: "P-256" }, { name: "ECDSA", hash: "SHA-256" }, [
      new x509.SubjectAlternativeNameExtension([
        { type: "dns", value: "a.example" },
        { type: "email", value: "x@example.com" },
        { type: "ip", value: "10.0.0.1" },
        { type: "url", value: "spiffe://t/w" },
      ]),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyCertSign, true),
      new x509.BasicConstraintsExtension(true, 2, true),
      new x509.Extension("1.2.3.4", false, new Uint8Array([0xde, 0xad])),
    ]);
    const info = await parseCsr(der);
    expect(info.sans).toMatchObject({ dns: ["a.example"], email: ["x@example.com"], uri: ["spiffe://t/w"] });
    expect(Array.from(info.sans?.ip[0] ?? [])).toEqual([10, 0, 0, 1]);
    expect(info.keyUsage).toEqual([0, 5]);
    expect(info.isCa).toBe(true);
    expect(info.extensions.map((e) => [e.oid, e.critical])).toEqual([
      ["2.5.29.17", false],
      ["2.5.29.15", true],
      ["2.5.29.19", true],
      ["1.2.3.4", false],
    ]);
    // An unknown extension's value is taken as it is, not parsed.
    expect(Array.from(info.extensions[3]?.value ?? [])).toEqual([0xde, 0xad]);
  });

  it("refuses broken requests with a message naming the problem", async () => {
    const der = await libraryCsr({ name: "ECDSA", namedCurve: "P-256" }, { name: "ECDSA", hash: "SHA-256" });
    expect(await problem(concat([der, Uint8Array.of(0)]))).toBe("trailing data after the CSR");
    expect(await problem(Uint8Array.of(0x30, 0x05, 1, 2))).toMatch(/^certificate request could not be parsed: /);
    expect(await problem(seq(int(1)))).toMatch(/^certificate request could not be parsed: /);
    const tampered = der.slice();
    const cn = Buffer.from(der).indexOf("req.example");
    expect(cn).toBeGreaterThan(0);
    tampered[cn] = (tampered[cn] ?? 0) ^ 0x01; // "seq.example": well-formed, no longer what was signed
    expect(await problem(tampered)).toBe("certificate request signature is invalid");
    const [infoNode] = children(parse(der));
    const [version, subject, spki, attrs] = children(infoNode ?? parse(der));
    // A signature that does not match its key, an unknown algorithm, a key the reader refuses.
    const [, , sig] = children(parse(der));
    expect(await problem(seq(infoNode?.raw ?? der, seq(oid("1.2.840.113549.1.1.11")), sig?.raw ?? der))).toBe("certificate request signature is invalid");
    expect(await problem(seq(infoNode?.raw ?? der, seq(oid("1.2.3.4")), sig?.raw ?? der))).toBe("certificate request signature is invalid");
    const dsaKey = seq(seq(oid("1.2.840.10040.4.1")), bitString(Uint8Array.of(1, 2, 3)));
    const info = (key: Uint8Array, attributes: Uint8Array) => seq(version?.raw ?? der, subject?.raw ?? der, key, attributes);
    expect(await problem(withInfo(der, info(dsaKey, attrs?.raw ?? der)))).toBe("certificate request: unsupported public key algorithm 1.2.840.10040.4.1");
    // A malformed SAN in the extension request.
    const badSan = seq(oid("2.5.29.17"), octets(Uint8Array.of(0x30, 0x05, 0x82, 0x09, 0x61)));
    const extReq = ctxCons(0, seq(oid("1.2.840.113549.1.9.14"), set(seq(badSan))));
    expect(await problem(withInfo(der, info(spki?.raw ?? der, extReq)))).toMatch(/^certificate request has a malformed extension: /);
  });
});

describe("certificate signatures (isSignedBy)", () => {
  it("accepts the signer's key only, and no altered certificate", async () => {
    const { generateKeyPair, importSigner, isSignedBy, signCertificate } = await import("../../src/engines/pki/x509/x509");
    for (const [type, bits] of [["ec", 256], ["ec", 224], ["rsa", 2048], ["ed25519", 0]] as const) {
      const ca = await generateKeyPair(type, bits);
      const other = await generateKeyPair(type, bits);
      const name = encodeName({ commonName: `${type} CA` });
      const der = await signCertificate({
        serialHex: "0a",
        subject: name,
        issuer: name,
        notBefore: new Date(0),
        notAfter: new Date(86_400_000),
        spki: ca.spki,
        extensions: [],
        signer: await importSigner(ca.pkcs8, ca.spki),
      });
      expect(await isSignedBy(der, ca.spki), `${type} ${bits}`).toBe(true);
      expect(await isSignedBy(der, other.spki), `${type} ${bits} other key`).toBe(false);
      const altered = der.slice();
      const at = Buffer.from(der).indexOf(`${type} CA`);
      altered[at] = (altered[at] ?? 0) ^ 0x01;
      expect(await isSignedBy(altered, ca.spki), `${type} ${bits} altered`).toBe(false);
      expect(await isSignedBy(concat([der, Uint8Array.of(0)]), ca.spki)).toBe(false);
    }
  });
});
