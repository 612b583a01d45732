import { describe, expect, it } from "vitest";
import { KeyError, parsePem, parseRsaPrivateKey, wrapPkcs1 } from "../../src/engines/sync/rsa";
import {
  EC_PKCS8_PEM,
  RSA_1024_PKCS1_PEM,
  RSA_PKCS1_FINGERPRINT,
  RSA_PKCS1_PEM,
  RSA_PKCS8_FINGERPRINT,
  RSA_PKCS8_PEM,
} from "../helpers/sync-fixtures";

describe("repository-host app keys", () => {
  it("parses PKCS#1 and computes the fingerprint the host shows (as OpenSSL computes it)", async () => {
    const k = await parseRsaPrivateKey(RSA_PKCS1_PEM);
    expect(k.fingerprint).toBe(RSA_PKCS1_FINGERPRINT);
    expect(k.modulusBits).toBe(2048);
    expect(k.pkcs8Pem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    // The normalised PKCS#8 form is the same key.
    expect((await parseRsaPrivateKey(k.pkcs8Pem)).fingerprint).toBe(RSA_PKCS1_FINGERPRINT);
  });

  it("parses PKCS#8", async () => {
    const k = await parseRsaPrivateKey(RSA_PKCS8_PEM);
    expect(k.fingerprint).toBe(RSA_PKCS8_FINGERPRINT);
  });

  it("tolerates CRLF line ends and surrounding text", async () => {
    const k = await parseRsaPrivateKey(`\n  ${RSA_PKCS1_PEM.replace(/\n/g, "\r\n")}  \n`);
    expect(k.fingerprint).toBe(RSA_PKCS1_FINGERPRINT);
  });

  it("reports small keys' size so the route can refuse them", async () => {
    expect((await parseRsaPrivateKey(RSA_1024_PKCS1_PEM)).modulusBits).toBe(1024);
  });

  it.each([
    ["garbage", /not a PEM-encoded key/],
    [RSA_PKCS1_PEM + RSA_PKCS8_PEM, /exactly one PEM block/],
    [RSA_PKCS1_PEM.replace(/[A-Za-z0-9+/]{10}\n/, "!!!!!!!!!!\n"), /not valid base64/],
    ["-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----", /encrypted private keys/],
    ["-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----", /expected an RSA private key/],
    ["-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----", /could not be parsed/],
    [EC_PKCS8_PEM, /could not be parsed as an RSA private key/],
  ])("refuses bad keys without echoing them (%#)", async (pem, msg) => {
    const err = await parseRsaPrivateKey(pem).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KeyError);
    expect((err as Error).message).toMatch(msg);
    expect((err as Error).message).not.toMatch(/MII/);
  });

  it("wraps PKCS#1 DER in a PrivateKeyInfo with long-form lengths", () => {
    const { der } = parsePem(RSA_PKCS1_PEM);
    const info = wrapPkcs1(der);
    expect([...info.slice(0, 2)]).toEqual([0x30, 0x82]);
    expect((info[2] ?? 0) * 256 + (info[3] ?? 0)).toBe(info.length - 4);
    expect(info.slice(-der.length)).toEqual(der);
    const short = wrapPkcs1(Uint8Array.of(1, 2, 3));
    expect([...short]).toEqual([0x30, 0x17, 0x02, 0x01, 0x00, 0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00, 0x04, 0x03, 1, 2, 3]);
  });
});
