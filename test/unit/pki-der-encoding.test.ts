/**
 * The DER writer's fast paths (src/engines/pki/x509/der.ts: one-buffer framing, time, the OID
 * cache) against the plain encodings they replaced, and generated EC keys' SPKI read from the
 * PKCS#8 export (x509.ts) against WebCrypto's own. Runs in the Workers pool (workerd's
 * WebCrypto export format is the point of the second).
 */
import { describe, expect, it } from "vitest";
import { concatBytes, derTlv } from "../../src/core/encoding";
import { decodeOid, frame, oid, parse, seq, time, uintBytes } from "../../src/engines/pki/x509/der";
import { generateKeyPair, importSigner, publicKeyOf, signCertificate } from "../../src/engines/pki/x509/x509";
import { encodeName, publicKeyFacts, skiExtension } from "../../src/engines/pki/x509/asn1";
import { caCertBase64, caCertDer, issuerKeyIdOf } from "../../src/engines/pki/x509/issuer-facts";
import { bytesToBase64, toPem } from "../../src/core/encoding";

/** The time encoding before the fast path: from toISOString (RFC 5280 §4.1.2.5). */
function isoTime(d: Date): Uint8Array {
  const digits = d.toISOString().slice(0, 19).replace(/[-T:]/g, "");
  return d.getUTCFullYear() < 2050 ? derTlv(0x17, new TextEncoder().encode(`${digits.slice(2)}Z`)) : derTlv(0x18, new TextEncoder().encode(`${digits}Z`));
}

describe("DER writer", () => {
  it("frames any length as the one-TLV encoder does (short and long form)", () => {
    for (const len of [0, 1, 127, 128, 255, 256, 65_535, 65_536, 300_000]) {
      const a = new Uint8Array(Math.floor(len / 3)).fill(1);
      const b = new Uint8Array(len - a.length).fill(2);
      expect(frame(0x30, [a, b]), `length ${len}`).toEqual(derTlv(0x30, concatBytes([a, b])));
    }
    expect(seq()).toEqual(Uint8Array.of(0x30, 0));
    expect(uintBytes(Uint8Array.of(0, 0, 0x80, 1))).toEqual(Uint8Array.of(2, 3, 0, 0x80, 1));
  });

  it("writes UTCTime through 2049 and GeneralizedTime from 2050, whole seconds", () => {
    for (const iso of ["1999-12-31T23:59:59.999Z", "2000-01-01T00:00:00Z", "2026-11-25T07:08:09Z", "2049-12-31T23:59:59Z", "2050-01-01T00:00:00Z", "9999-12-31T23:59:59Z"]) {
      expect(time(new Date(iso)), iso).toEqual(isoTime(new Date(iso)));
    }
  });

  it("encodes OIDs the same from the cache, also past its bound", () => {
    expect(oid("2.5.29.17")).toEqual(Uint8Array.of(6, 3, 0x55, 0x1d, 0x11));
    expect(oid("2.5.29.17")).toEqual(Uint8Array.of(6, 3, 0x55, 0x1d, 0x11));
    for (let i = 0; i < 600; i++) expect(decodeOid(parse(oid(`1.3.6.1.4.1.${i}.${i * 131}`)).content)).toBe(`1.3.6.1.4.1.${i}.${i * 131}`);
  });
});

describe("generated keys", () => {
  it("an EC key's SPKI, read from its PKCS#8, is the one WebCrypto derives", async () => {
    for (const bits of [256, 384, 521]) {
      const pair = await generateKeyPair("ec", bits);
      expect(pair.spki, `P-${bits}`).toEqual(await publicKeyOf(pair.pkcs8));
    }
  });
});

describe("issuer facts cached by certificate text", () => {
  it("DER, base64, and the key id: the certificate's own SKI, else RFC 5280 method 1", async () => {
    const pair = await generateKeyPair("ec", 256);
    const signer = await importSigner(pair.pkcs8, pair.spki);
    const name = encodeName({ commonName: "Facts CA" });
    const cert = (extensions: ReturnType<typeof skiExtension>[]) =>
      signCertificate({ serialHex: "01", subject: name, issuer: name, notBefore: new Date(0), notAfter: new Date(86_400_000), spki: pair.spki, extensions, signer });
    const own = Uint8Array.of(1, 2, 3, 4);
    const withSki = await cert([skiExtension(own)]);
    const without = await cert([]);
    const pemWith = `${toPem("CERTIFICATE", withSki)}\n`;
    const pemWithout = `${toPem("CERTIFICATE", without)}\n`;
    expect(caCertDer(pemWith)).toEqual(withSki);
    expect(caCertBase64(pemWithout)).toBe(bytesToBase64(without));
    const spki = bytesToBase64(pair.spki);
    expect(await issuerKeyIdOf(pemWith, spki)).toEqual(own);
    expect(await issuerKeyIdOf(pemWith, spki)).toEqual(own);
    expect(await issuerKeyIdOf(pemWithout, spki)).toEqual((await publicKeyFacts(pair.spki)).ski);
  });
});
