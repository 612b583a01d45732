/** DER building blocks and the X.509 structures hand-encoded in src/engines/pki/x509/asn1.ts (RFC 5280). */
import { describe, expect, it } from "vitest";
import {
  basicConstraintsExtension,
  encodeName,
  keyUsageExtension,
  nameAttributes,
  parseGeneralNames,
  publicKeyFacts,
  sanExtension,
  toPkcs8,
  traditionalPrivateKey,
} from "../../src/engines/pki/x509/asn1";
import { decodeOid, int, isValidOid, oid, parse } from "../../src/engines/pki/x509/der";
import { colonHex, normalizeSerial } from "../../src/engines/pki/x509/pem";
import { validateKeySpec } from "../../src/engines/pki/x509/keytypes";
import { randomSerialHex } from "../../src/engines/pki/authority/authority";

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

describe("DER", () => {
  it("encodes OIDs and small integers", () => {
    expect(hex(oid("2.5.29.17"))).toBe("0603551d11");
    expect(hex(oid("1.2.840.113549.1.1.1"))).toBe("06092a864886f70d010101");
    expect(decodeOid(parse(oid("0.9.2342.19200300.100.1.1")).content)).toBe("0.9.2342.19200300.100.1.1");
    expect(hex(int(0))).toBe("020100");
    expect(hex(int(128))).toBe("02020080");
    expect(isValidOid("1.2.3")).toBe(true);
    expect(isValidOid("1.2.x")).toBe(false);
    expect(isValidOid("1")).toBe(false);
  });

  it("encodes key usage as a DER BIT STRING with trailing zero bits counted (RFC 5280 §4.2.1.3)", () => {
    expect(hex(keyUsageExtension([5, 6])?.value ?? new Uint8Array())).toBe("03020106");
    expect(hex(keyUsageExtension([0])?.value ?? new Uint8Array())).toBe("03020780");
    expect(hex(keyUsageExtension([0, 8])?.value ?? new Uint8Array())).toBe("0303078080");
    expect(keyUsageExtension([])).toBeNull();
  });

  it("basic constraints: CA with and without a path length, and the empty CA:false", () => {
    expect(hex(basicConstraintsExtension(true, 0).value)).toBe("30060101ff020100");
    expect(hex(basicConstraintsExtension(true).value)).toBe("30030101ff");
    expect(hex(basicConstraintsExtension(false).value)).toBe("3000");
  });
});

describe("names and general names", () => {
  it("orders subject attributes as Go does and round-trips them", () => {
    const der = encodeName({ commonName: "x", organization: ["O1"], country: ["US"], serialNumber: "7", userIds: ["u1"] });
    expect(nameAttributes(der).map((a) => a.type)).toEqual(["2.5.4.6", "2.5.4.10", "2.5.4.3", "2.5.4.5", "0.9.2342.19200300.100.1.1"]);
    expect(nameAttributes(encodeName({ commonName: "é" }))[0]?.value).toBe("é");
  });

  it("round-trips SANs of every supported kind", () => {
    const ext = sanExtension(
      { dns: ["a.example"], email: ["x@example"], ip: [Uint8Array.of(10, 0, 0, 1)], uri: ["spiffe://a/b"], otherNames: [{ oid: "1.2.3", value: "v" }] },
      false,
    );
    const back = parseGeneralNames(ext.value);
    expect(back.dns).toEqual(["a.example"]);
    expect(back.email).toEqual(["x@example"]);
    expect(back.uri).toEqual(["spiffe://a/b"]);
    expect(Array.from(back.ip[0] ?? [])).toEqual([10, 0, 0, 1]);
    expect(back.otherNames).toEqual([{ oid: "1.2.3", value: "v" }]);
  });
});

describe("keys", () => {
  it("converts PKCS#8 to PKCS#1 / SEC1 and back, for keys WebCrypto re-imports", async () => {
    for (const alg of [
      { name: "ECDSA", namedCurve: "P-384" },
      { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" },
    ]) {
      const pair = (await crypto.subtle.generateKey(alg, true, ["sign", "verify"])) as CryptoKeyPair;
      const pkcs8 = new Uint8Array((await crypto.subtle.exportKey("pkcs8", pair.privateKey)) as ArrayBuffer);
      const spki = new Uint8Array((await crypto.subtle.exportKey("spki", pair.publicKey)) as ArrayBuffer);
      const trad = traditionalPrivateKey(pkcs8);
      expect(trad.label).toBe(alg.name === "ECDSA" ? "EC PRIVATE KEY" : "RSA PRIVATE KEY");
      const back = toPkcs8(trad.label, trad.der);
      await expect(crypto.subtle.importKey("pkcs8", back, alg, false, ["sign"])).resolves.toBeDefined();
      const facts = await publicKeyFacts(spki);
      expect(facts.type).toBe(alg.name === "ECDSA" ? "ec" : "rsa");
      expect(facts.bits).toBe(alg.name === "ECDSA" ? 384 : 2048);
      expect(facts.ski).toHaveLength(20);
    }
  });

  it("validates key types and sizes with upstream's messages", () => {
    expect(validateKeySpec("rsa", 0, 0)).toEqual({ keyType: "rsa", keyBits: 2048, signatureBits: 256 });
    expect(validateKeySpec("ec", 0, 384)).toEqual({ keyType: "ec", keyBits: 256, signatureBits: 0 });
    expect(validateKeySpec("ec", 224, 0)).toEqual({ keyType: "ec", keyBits: 224, signatureBits: 0 });
    expect(validateKeySpec("ec", 224, 0, true)).toEqual({ keyType: "ec", keyBits: 224, signatureBits: 0 });
    expect(() => validateKeySpec("rsa", 8193, 0)).toThrow("unsupported bit length for RSA key: 8193");
    expect(() => validateKeySpec("nope", 0, 0)).toThrow("unknown key type nope");
  });
});

describe("serials", () => {
  it("are positive, below 2^159, minimally encoded", () => {
    for (let i = 0; i < 200; i++) {
      const s = randomSerialHex();
      expect(s.length % 2).toBe(0);
      expect(s.length).toBeLessThanOrEqual(40);
      expect(s.startsWith("00")).toBe(false);
      expect(parseInt(s.slice(0, 2), 16) < 0x80 || s.length < 40).toBe(true);
    }
  });

  it("render colon-separated and normalise client input", () => {
    expect(colonHex("abc")).toBe("0a:bc");
    expect(normalizeSerial("AB-CD")).toBe("ab:cd");
    expect(normalizeSerial("abcd")).toBe("ab:cd");
    expect(normalizeSerial("zz")).toBeNull();
  });
});
