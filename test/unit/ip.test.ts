/**
 * The IP and CIDR reader (src/core/ip.ts, src/core/ip-kinds.ts) against the shared table of
 * tricky texts (test/helpers/ip-cases.ts), plus its CIDR rules.
 */
import { describe, expect, it } from "vitest";
import {
  canonicalIp,
  cidrContains,
  cidrWithin,
  classifyIp,
  formatCidr,
  formatIp,
  isIpv4Mapped,
  networkOf,
  parseCidr,
  parseHostLiteral,
  parseIp,
  unmapIpv4,
} from "../../src/core/ip";
import { CIDR_MATCH_CASES, IP_CASES } from "../helpers/ip-cases";

describe("addresses", () => {
  it.each(IP_CASES.map((c) => [c.text, c.canonical, c.kind ?? null] as const))("%j reads as %j (%s)", (text, canonical, kind) => {
    expect(canonicalIp(text)).toBe(canonical);
    const ip = parseIp(text);
    if (ip === null) return;
    expect(ip.length).toBe(canonical?.includes(":") ? 16 : 4);
    expect(classifyIp(ip)).toBe(kind);
    // The canonical text reads back as the same bytes.
    expect(parseIp(formatIp(ip))).toEqual(ip);
  });

  it("keeps an IPv4-mapped address IPv6 in bytes, IPv4 when judged", () => {
    const mapped = parseIp("::ffff:192.0.2.1") ?? new Uint8Array();
    expect(mapped.length).toBe(16);
    expect(isIpv4Mapped(mapped)).toBe(true);
    expect(Array.from(unmapIpv4(mapped))).toEqual([192, 0, 2, 1]);
    expect(isIpv4Mapped(parseIp("::192.0.2.1") ?? new Uint8Array())).toBe(false);
  });

  it("reads URL host literals: IPv6 bracketed, IPv4 bare, names not at all", () => {
    expect(formatIp(parseHostLiteral("[::1]") ?? new Uint8Array())).toBe("::1");
    expect(formatIp(parseHostLiteral("127.0.0.1") ?? new Uint8Array())).toBe("127.0.0.1");
    expect(parseHostLiteral("::1")).toBeNull();
    expect(parseHostLiteral("[127.0.0.1]")).toBeNull();
    expect(parseHostLiteral("[fe80::1%25eth0]")).toBeNull();
    expect(parseHostLiteral("localhost")).toBeNull();
  });

  it("refuses text longer than any address before parsing it", () => {
    expect(parseIp(`${"0:".repeat(5000)}1`)).toBeNull();
    expect(parseIp("0000:0000:0000:0000:0000:ffff:255.255.255.255")).not.toBeNull();
  });
});

describe("CIDR blocks", () => {
  it("parse with prefixes in range and without leading zeros; bare addresses only when asked", () => {
    expect(formatCidr(parseCidr("10.0.0.5/24") ?? { addr: new Uint8Array(), prefix: 0 })).toBe("10.0.0.5/24");
    expect(formatCidr(networkOf(parseCidr("10.1.2.3/8") ?? { addr: new Uint8Array(), prefix: 0 }))).toBe("10.0.0.0/8");
    expect(formatCidr(parseCidr("2001:DB8::/32") ?? { addr: new Uint8Array(), prefix: 0 })).toBe("2001:db8::/32");
    expect(parseCidr("10.0.0.1")).toBeNull();
    expect(parseCidr("10.0.0.1", { bareAddress: true })?.prefix).toBe(32);
    expect(parseCidr("::1", { bareAddress: true })?.prefix).toBe(128);
    for (const bad of ["10.0.0.0/33", "10.0.0.0/", "10.0.0.0/08", "10.0.0.0/-1", "10.0.0.0/+8", "::/129", "fe80::/64%eth0", "010.0.0.0/8", "10.0.0.0/8/8"]) {
      expect(parseCidr(bad, { bareAddress: true }), bad).toBeNull();
    }
  });

  it.each(CIDR_MATCH_CASES)("%s in %s: %s", (ip, block, inside) => {
    const b = parseCidr(block);
    const a = parseIp(ip);
    expect(b && a && cidrContains(b, a)).toBe(inside);
  });

  it("nests blocks (a SecretID's cidr_list within the role's)", () => {
    const c = (t: string) => parseCidr(t, { bareAddress: true }) ?? { addr: new Uint8Array(), prefix: 0 };
    expect(cidrWithin(c("10.1.2.0/24"), c("10.1.0.0/16"))).toBe(true);
    expect(cidrWithin(c("10.0.0.0/8"), c("10.1.0.0/16"))).toBe(false);
    expect(cidrWithin(c("::ffff:10.1.2.3"), c("10.1.0.0/16"))).toBe(true);
    expect(cidrWithin(c("10.1.2.0/24"), c("::/0"))).toBe(false);
  });
});
