/**
 * The CRL DER builder (src/engines/pki/x509/crl.ts) against an independent parser (@peculiar/x509): serial
 * encodings at the edges (leading zero octets, high bit set, odd digit counts, 20 octets),
 * UTCTime vs GeneralizedTime (RFC 5280 §4.1.2.5), the empty list left out, and the base64
 * helpers against btoa/atob.
 */
// Plain Node (the "unit-node" project): @peculiar/x509 needs the reflect polyfill loaded first.
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { describe, expect, it } from "vitest";
import { encodeName } from "../../src/engines/pki/x509/asn1";
import { RevokedListWriter, algorithmSpec, assembleCertificateList, ecdsaSignatureDer, encodeTbsCertList, signCertificateList } from "../../src/engines/pki/x509/crl";
import { CHUNK_CHARS, crlBase64Slices } from "../../src/engines/pki/storage/revocation-store";
import { base64ToBytesStrict, bytesToBase64 } from "../../src/core/encoding";

async function build(entries: [string, number][]) {
  const keys = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])) as CryptoKeyPair;
  const writer = new RevokedListWriter();
  for (const [s, t] of entries) writer.add(s, t);
  const spec = algorithmSpec("ECDSAWithSHA256");
  const tbs = encodeTbsCertList({
    algorithm: spec,
    issuer: encodeName({ commonName: "Unit CA" }),
    thisUpdate: new Date("2030-01-01T00:00:00Z"),
    nextUpdate: new Date("2030-01-04T00:00:00Z"),
    revoked: writer.finish(),
    authorityKeyId: new Uint8Array(20).fill(7),
    crlNumber: 300,
  });
  const sig = new Uint8Array(await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, keys.privateKey, tbs));
  const crl = new x509.X509Crl(assembleCertificateList(tbs, spec, ecdsaSignatureDer(sig)));
  expect(await crl.verify({ publicKey: new x509.PublicKey(new Uint8Array((await crypto.subtle.exportKey("spki", keys.publicKey)) as ArrayBuffer)) })).toBe(true);
  return crl;
}

describe("RevokedListWriter", () => {
  it("encodes serials minimally and times per RFC 5280, as an independent parser reads them", async () => {
    const t2049 = Date.UTC(2049, 11, 31, 23, 59, 59) / 1000;
    const t2050 = Date.UTC(2050, 0, 1, 0, 0, 0) / 1000;
    const crl = await build([
      ["00:00:12:34", 1_700_000_000],
      ["ff:01", t2049],
      ["abc", t2050],
      ["7f:" + "ee:".repeat(18) + "01", 1_700_000_001],
    ]);
    const e = crl.entries;
    expect(e.map((x) => x.serialNumber.toLowerCase())).toEqual(["1234", "ff01", "0abc", "7f" + "ee".repeat(18) + "01"]);
    // The parser hides the sign octet: the DER must carry INTEGER 00 ff 01 (X.690 §8.3.2).
    const raw = Buffer.from(crl.rawData).toString("hex");
    expect(raw).toContain("020300ff01");
    expect(raw).toContain("02021234");
    expect(e.map((x) => x.revocationDate.getTime() / 1000)).toEqual([1_700_000_000, t2049, t2050, 1_700_000_001]);
  });

  it("leaves the list out when empty (RFC 5280 §5.1.2.6) and refuses bad serials", async () => {
    const crl = await build([]);
    expect(crl.entries).toEqual([]);
    const w = new RevokedListWriter();
    expect(() => w.add("zz", 1)).toThrow();
    expect(() => w.add("", 1)).toThrow();
    expect(() => w.add("01:".repeat(21).slice(0, -1), 1)).toThrow();
  });
});

describe("signCertificateList (one buffer for CRLs of any size)", () => {
  const params = {
    algorithm: algorithmSpec("ECDSAWithSHA256"),
    issuer: encodeName({ commonName: "Unit CA" }),
    thisUpdate: new Date("2030-01-01T00:00:00Z"),
    nextUpdate: new Date("2030-01-04T00:00:00Z"),
    authorityKeyId: new Uint8Array(20).fill(7),
    crlNumber: 300,
    freshestCrlUrls: ["http://example.test/delta"],
  };
  const fill = (n: number) => {
    const w = new RevokedListWriter();
    // Serials of 1-20 octets, a new second every 7 entries, every reason: all entry lengths.
    for (let i = 0; i < n; i++) w.add((i * 2654435761).toString(16).padStart(2 + (i % 39), "f"), 1_900_000_000 + Math.floor(i / 7), i % 11);
    return w;
  };

  it("is byte for byte the TBSCertList + CertificateList of the framing functions, across chunk boundaries", async () => {
    // 40,000 entries ≈ 1.6 MB: more than one 1 MiB chunk, and a 3-octet length (X.690 §8.1.3.5).
    for (const n of [0, 1, 40_000]) {
      const sig = new Uint8Array(71).fill(0x5a);
      let signed: Uint8Array | null = null;
      const der = await signCertificateList({ ...params, revoked: n === 0 ? null : fill(n) }, async (tbs) => {
        signed = tbs.slice();
        return sig;
      });
      const tbs = encodeTbsCertList({ ...params, revoked: fill(n).finish() });
      // Buffer.equals: a deep toEqual over megabytes takes seconds.
      expect(signed && Buffer.from(signed).equals(tbs)).toBe(true);
      expect(Buffer.from(der).equals(assembleCertificateList(tbs, params.algorithm, sig))).toBe(true);
    }
  });

  it("stores base64 slices that join to the whole base64, cut where the whole one would be", () => {
    const der = crypto.getRandomValues(new Uint8Array(60_000));
    const big = new Uint8Array(2 * (CHUNK_CHARS / 4) * 3 + 1000);
    for (let i = 0; i < big.length; i += 60_000) big.set(der.subarray(0, Math.min(60_000, big.length - i)), i);
    const whole = bytesToBase64(big);
    const slices = crlBase64Slices(big);
    expect(slices.map((s) => s.length)).toEqual([CHUNK_CHARS, CHUNK_CHARS, whole.length - 2 * CHUNK_CHARS]);
    expect(slices.join("")).toBe(whole);
    expect(crlBase64Slices(new Uint8Array(3))).toEqual(["AAAA"]);
  });
});

describe("base64 helpers (src/core/encoding.ts)", () => {
  it("match btoa/atob for every length remainder", () => {
    for (const n of [0, 1, 2, 3, 4, 5, 100, 1001]) {
      const b = crypto.getRandomValues(new Uint8Array(n));
      const ref = btoa(String.fromCharCode(...b));
      expect(bytesToBase64(b)).toBe(ref);
      expect(Array.from(base64ToBytesStrict(ref))).toEqual(Array.from(b));
    }
  });
});
