/**
 * The audit trail's synchronous HMAC-SHA256 (src/audit/hmac-sha256.ts) against node:crypto's,
 * an independent implementation: every message length around the block and padding boundaries
 * (55/56/63/64/119/120 bytes), multi-byte UTF-8, keys shorter than, equal to and longer than a
 * block (RFC 2104 hashes a long key first), the RFC 4231 test case 2, and a key reused across
 * many values (its absorbed pads are not disturbed by the shared scratch space).
 */
import { createHmac, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { hmacKey, hmacSha256Hex } from "../../src/audit/hmac-sha256";

const node = (key: Uint8Array, msg: Uint8Array) => createHmac("sha256", key).update(msg).digest("hex");

describe("audit HMAC-SHA256", () => {
  it("matches node:crypto for every length from 0 to 300 bytes and a few large ones, with keys of 0 to 200 bytes", () => {
    for (const keyLen of [0, 1, 20, 36, 63, 64, 65, 131, 200]) {
      const keyBytes = randomBytes(keyLen);
      const key = hmacKey(keyBytes);
      for (let len = 0; len <= 300; len++) {
        const msg = randomBytes(len);
        expect(hmacSha256Hex(key, msg), `key ${keyLen} B, message ${len} B`).toBe(node(keyBytes, msg));
      }
      for (const len of [1_000, 4_096, 65_537]) {
        const msg = randomBytes(len);
        expect(hmacSha256Hex(key, msg)).toBe(node(keyBytes, msg));
      }
    }
  });

  it("RFC 4231 test case 2, and UTF-8 text as the audit trail hashes it", () => {
    const enc = new TextEncoder();
    expect(hmacSha256Hex(hmacKey(enc.encode("Jefe")), enc.encode("what do ya want for nothing?"))).toBe("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    const salt = enc.encode("3f1c6f5e-8d0a-4b1e-9a57-2f0e3c4b5a69");
    const key = hmacKey(salt);
    for (const text of ["", "bench-secret", "root ünïcode", "😀".repeat(40), "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"]) {
      expect(hmacSha256Hex(key, enc.encode(text))).toBe(node(salt, enc.encode(text)));
    }
  });
});
