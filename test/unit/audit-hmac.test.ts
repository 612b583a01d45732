/**
 * The HMAC of audit data (src/audit/hmac.ts `hashData`) against node:crypto's HMAC-SHA256, an
 * implementation independent of the Worker's WebCrypto: every string and number leaf of nested
 * maps and arrays becomes `hmac-sha256:<hex>` of its JSON text, timestamps, booleans and null
 * stay, `toJSON` is honoured, a non-finite number is null, a repeated value gets the same HMAC,
 * and an own "__proto__" key stays a key.
 */
import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { hashData } from "../../src/audit/hmac";

const SALT = "3f1c6f5e-8d0a-4b1e-9a57-2f0e3c4b5a69";
const mac = (text: string) => `hmac-sha256:${createHmac("sha256", SALT).update(text, "utf8").digest("hex")}`;

describe("audit hashData", () => {
  it("hashes every string and number leaf as node:crypto does, leaves timestamps, booleans and null, honours toJSON", async () => {
    const pem = "-----BEGIN CERTIFICATE-----\nMIIB…\n-----END CERTIFICATE-----";
    const body = JSON.parse('{"__proto__": {"x": "y"}}') as Record<string, unknown>;
    const value = {
      certificate: "leaf",
      issuing_ca: pem,
      ca_chain: [pem, "root ünïcode"],
      expiration: 1_767_225_600,
      ratio: 0.5,
      big: 1e21,
      inf: Number.POSITIVE_INFINITY,
      created_time: "2026-01-01T00:00:00.123Z",
      not_a_time: "2026-13-45T99:00:00Z",
      destroyed: false,
      deletion_time: "",
      none: null,
      when: new Date(Date.UTC(2026, 0, 2)),
      nested: { deep: [{ pin: 471336 }, ["a", true]] },
      body,
    };
    const out = (await hashData(SALT, value)) as Record<string, unknown>;
    expect(out).toEqual({
      certificate: mac("leaf"),
      issuing_ca: mac(pem),
      ca_chain: [mac(pem), mac("root ünïcode")],
      expiration: mac("1767225600"),
      ratio: mac("0.5"),
      big: mac("1e+21"),
      inf: null,
      created_time: "2026-01-01T00:00:00.123Z",
      not_a_time: mac("2026-13-45T99:00:00Z"),
      destroyed: false,
      deletion_time: mac(""),
      none: null,
      // Date's toJSON is an RFC 3339 timestamp: left in the clear.
      when: "2026-01-02T00:00:00.000Z",
      nested: { deep: [{ pin: mac("471336") }, [mac("a"), true]] },
      body: JSON.parse(`{"__proto__": {"x": "${mac("y")}"}}`),
    });
    // The parsed body's "__proto__" is an own key of the copy, not its prototype.
    expect(Object.keys(out.body as object)).toEqual(["__proto__"]);
    expect(Object.getPrototypeOf(out.body)).toBe(Object.prototype);
    expect(await hashData(SALT, "x")).toBe(mac("x"));
    expect(await hashData(SALT, 7)).toBe(mac("7"));
  });
});
