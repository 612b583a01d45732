/**
 * Known answers for src/core/encoding.ts, the one module for byte encodings: RFC 4648 §10 test
 * vectors for base64 and base16 (hex), base64url (§5), SHA-256 (FIPS 180-2 appendix B.1 and the
 * empty string), PEM armor (RFC 7468) and the DER TLV framing (X.690 §8.1.3).
 */
import { describe, expect, it } from "vitest";
import {
  PemError,
  base64ToBytes,
  base64ToBytesStrict,
  base64UrlToBytes,
  bytesToBase64,
  bytesToBase64Url,
  bytesToHex,
  concatBytes,
  decodePemBlocks,
  derTlv,
  pemArmor,
  pemBodyBytes,
  sha256,
  sha256Hex,
  timingSafeEqual,
  toPem,
} from "../../src/core/encoding";

const utf8 = (s: string) => new TextEncoder().encode(s);
const ascii = (b: Uint8Array) => new TextDecoder().decode(b);

// RFC 4648 §10.
const RFC4648: [string, string, string][] = [
  ["", "", ""],
  ["f", "Zg==", "66"],
  ["fo", "Zm8=", "666f"],
  ["foo", "Zm9v", "666f6f"],
  ["foob", "Zm9vYg==", "666f6f62"],
  ["fooba", "Zm9vYmE=", "666f6f6261"],
  ["foobar", "Zm9vYmFy", "666f6f626172"],
];

describe("base64, base64url and hex (RFC 4648 §10 vectors)", () => {
  it.each(RFC4648)("%j", (text, b64, hex) => {
    expect(bytesToBase64(utf8(text))).toBe(b64);
    expect(ascii(base64ToBytes(b64))).toBe(text);
    expect(ascii(base64ToBytesStrict(b64))).toBe(text);
    expect(bytesToHex(utf8(text))).toBe(hex);
    // base64url of these is the same alphabet without the padding.
    expect(bytesToBase64Url(utf8(text))).toBe(b64.replace(/=+$/, ""));
    expect(ascii(base64UrlToBytes(b64.replace(/=+$/, "")))).toBe(text);
    expect(ascii(base64UrlToBytes(b64))).toBe(text);
  });

  it("base64url uses - and _ where base64 has + and / (RFC 4648 §5)", () => {
    const b = Uint8Array.of(0xfb, 0xff, 0xbf);
    expect(bytesToBase64(b)).toBe("+/+/");
    expect(bytesToBase64Url(b)).toBe("-_-_");
    expect(Array.from(base64UrlToBytes("-_-_"))).toEqual([0xfb, 0xff, 0xbf]);
    expect(bytesToBase64Url(Uint8Array.of(0xfb, 0xff))).toBe("-_8");
    expect(Array.from(base64UrlToBytes("-_8"))).toEqual([0xfb, 0xff]);
  });

  it("hex is lowercase, two digits a byte", () => {
    expect(bytesToHex(Uint8Array.of(0, 1, 0x0f, 0x10, 0xab, 0xff))).toBe("00010f10abff");
  });

  it("base64ToBytes is forgiving (whitespace, missing padding); the strict decoder is not", () => {
    expect(ascii(base64ToBytes("Zm9v\nYmE"))).toBe("fooba");
    expect(() => base64ToBytes("Zm9v*")).toThrow();
    expect(() => base64ToBytesStrict("Zm9v\nYmFy")).toThrow("invalid base64");
    expect(() => base64ToBytesStrict("Zm9v-mFy")).toThrow("invalid base64");
  });

  it("every byte value survives the round trip", () => {
    const all = Uint8Array.from({ length: 256 }, (_, i) => i);
    expect(Array.from(base64ToBytes(bytesToBase64(all)))).toEqual(Array.from(all));
    expect(Array.from(base64ToBytesStrict(bytesToBase64(all)))).toEqual(Array.from(all));
    expect(Array.from(base64UrlToBytes(bytesToBase64Url(all)))).toEqual(Array.from(all));
    expect(bytesToHex(all)).toBe(Array.from(all, (b) => b.toString(16).padStart(2, "0")).join(""));
  });
});

describe("SHA-256 (FIPS 180-2 B.1)", () => {
  const ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
  const EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

  it("hex of a string's UTF-8 and of bytes agree", async () => {
    expect(await sha256Hex("abc")).toBe(ABC);
    expect(await sha256Hex(Uint8Array.from(utf8("abc")))).toBe(ABC);
    expect(await sha256Hex("")).toBe(EMPTY);
    expect(await sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")).toBe("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  });

  it("the raw digest is 32 bytes", async () => {
    const d = await sha256("abc");
    expect(d.length).toBe(32);
    expect(bytesToHex(d)).toBe(ABC);
    // The fingerprint form a repository host shows: base64 of the digest.
    expect(bytesToBase64(d)).toBe("ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=");
  });
});

describe("PEM armor (RFC 7468)", () => {
  const der = Uint8Array.from({ length: 100 }, (_, i) => i);

  it("writes 64-character lines and no trailing newline", () => {
    const pem = toPem("CERTIFICATE", der);
    const lines = pem.split("\n");
    expect(lines[0]).toBe("-----BEGIN CERTIFICATE-----");
    expect(lines.at(-1)).toBe("-----END CERTIFICATE-----");
    expect(lines[1]?.length).toBe(64);
    expect(lines.slice(1, -1).join("")).toBe(bytesToBase64(der));
    expect(pem.endsWith("\n")).toBe(false);
    expect(toPem("X", Uint8Array.of(0x66, 0x6f, 0x6f))).toBe("-----BEGIN X-----\nZm9v\n-----END X-----");
  });

  it("reads every block in order, tolerating text between them", () => {
    const text = `junk\n${toPem("CERTIFICATE", der)}\nmore\n${toPem("PRIVATE KEY", Uint8Array.of(1, 2, 3))}\n`;
    const blocks = decodePemBlocks(text);
    expect(blocks.map((b) => b.label)).toEqual(["CERTIFICATE", "PRIVATE KEY"]);
    expect(Array.from(blocks[0]?.der ?? [])).toEqual(Array.from(der));
    expect(Array.from(blocks[1]?.der ?? [])).toEqual([1, 2, 3]);
    expect(pemArmor(text).map((b) => b.label)).toEqual(["CERTIFICATE", "PRIVATE KEY"]);
    expect(decodePemBlocks("no armor here")).toEqual([]);
  });

  it("refuses headers, bad base64 and empty bodies, naming the block", () => {
    const good = toPem("A", Uint8Array.of(1));
    const headers = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nZm9v\n-----END RSA PRIVATE KEY-----";
    expect(() => decodePemBlocks(`${good}\n${headers}`)).toThrow(PemError);
    expect(() => decodePemBlocks(`${good}\n${headers}`)).toThrow("error when parsing block 1: invalid PEM data");
    expect(() => decodePemBlocks("-----BEGIN A-----\n\n-----END A-----")).toThrow("error when parsing block 0: invalid PEM data");
    expect(pemBodyBytes("Zm9v*")).toBeNull();
    expect(pemBodyBytes("Zm9vY")).toBeNull();
    expect(pemBodyBytes(" \n")).toBeNull();
    expect(ascii(pemBodyBytes("\nZm9v\nYmFy\n") ?? new Uint8Array())).toBe("foobar");
  });
});

describe("bytes and DER framing", () => {
  it("concatenates in order", () => {
    expect(Array.from(concatBytes([Uint8Array.of(1), new Uint8Array(0), Uint8Array.of(2, 3)]))).toEqual([1, 2, 3]);
    expect(concatBytes([]).length).toBe(0);
  });

  it("writes short and long definite lengths (X.690 §8.1.3)", () => {
    const head = (n: number) => Array.from(derTlv(0x04, new Uint8Array(n)).subarray(0, 4));
    expect(Array.from(derTlv(0x05, new Uint8Array(0)))).toEqual([0x05, 0x00]);
    expect(head(127).slice(0, 2)).toEqual([0x04, 0x7f]);
    expect(head(128).slice(0, 3)).toEqual([0x04, 0x81, 0x80]);
    expect(head(255).slice(0, 3)).toEqual([0x04, 0x81, 0xff]);
    expect(head(256)).toEqual([0x04, 0x82, 0x01, 0x00]);
    expect(derTlv(0x04, new Uint8Array(65536)).subarray(0, 5)).toEqual(Uint8Array.of(0x04, 0x83, 0x01, 0x00, 0x00));
    expect(derTlv(0x30, Uint8Array.of(2, 1, 0)).length).toBe(5);
  });
});

describe("timingSafeEqual", () => {
  it("compares contents and lengths", () => {
    expect(timingSafeEqual("abc", "abc")).toBe(true);
    expect(timingSafeEqual("abc", "abd")).toBe(false);
    expect(timingSafeEqual("abc", "abcd")).toBe(false);
    expect(timingSafeEqual("", "")).toBe(true);
  });
});
