/**
 * CIDR parsing and matching for the auth methods' address bindings (src/core/cidr.ts): Go's
 * net.ParseCIDR acceptance rules, IPv4-mapped IPv6, the empty-list conventions of ipInCidrs and
 * cidrsWithin.
 */
import { describe, expect, it } from "vitest";
import { cidrsWithin, ipInCidrs, parseCidrs } from "../../src/core/cidr";
import { ApiError } from "../../src/core/errors";

function parseError(list: string[]): string {
  try {
    parseCidrs("token_bound_cidrs", list);
  } catch (e) {
    if (e instanceof ApiError) return `${e.status} ${e.messages.join("; ")}`;
    throw e;
  }
  return "no error";
}

describe("parseCidrs", () => {
  it("normalises bare addresses, IPv6 text, blanks and duplicates", () => {
    expect(parseCidrs("f", ["10.0.0.1", " 10.0.0.0/8 ", "", "2001:DB8:0:0:0:0:0:1", "2001:db8::/32", "10.0.0.1/32"])).toEqual([
      "10.0.0.1/32",
      "10.0.0.0/8",
      "2001:db8::1/128",
      "2001:db8::/32",
    ]);
    expect(parseCidrs("f", ["::", "::1", "fe80:0:0:1:0:0:0:1/64", "1:0:0:2:0:0:0:3", "::ffff:1.2.3.4"])).toEqual([
      "::/128",
      "::1/128",
      "fe80:0:0:1::1/64",
      "1:0:0:2::3/128",
      "::ffff:1.2.3.4/128",
    ]);
    expect(parseCidrs("f", ["0.0.0.0/0", "::/0", "10.0.0.5/24"])).toEqual(["0.0.0.0/0", "::/0", "10.0.0.5/24"]);
  });

  it("refuses what Go's net.ParseCIDR refuses, naming the field and the entry", () => {
    for (const bad of [
      "10.0.0.256",
      "10.0.0",
      "10.0.0.1.1",
      "010.0.0.1",
      "10.0.0.0/33",
      "10.0.0.0/",
      "10.0.0.0/08",
      "10.0.0.0/-1",
      "2001:db8::/129",
      "1::2::3",
      "1:2:3:4:5:6:7:8:9",
      "1:2:3:4:5:6:7",
      "fe80::1%eth0",
      "12345::",
      "host.example",
      "*",
    ]) {
      expect(parseError(["10.0.0.0/8", bad])).toBe(`400 token_bound_cidrs: invalid CIDR block "${bad}"`);
    }
  });
});

describe("ipInCidrs", () => {
  const v4 = ["10.1.0.0/16", "192.0.2.7/32"];
  it("matches IPv4 addresses by prefix, host bits in the block ignored", () => {
    expect(ipInCidrs("10.1.255.3", v4)).toBe(true);
    expect(ipInCidrs("10.2.0.1", v4)).toBe(false);
    expect(ipInCidrs("192.0.2.7", v4)).toBe(true);
    expect(ipInCidrs("192.0.2.8", v4)).toBe(false);
    expect(ipInCidrs("10.0.0.200", ["10.0.0.5/24"])).toBe(true);
    expect(ipInCidrs("203.0.113.9", ["0.0.0.0/0"])).toBe(true);
  });

  it("matches IPv6, and IPv4-mapped IPv6 as its IPv4 address", () => {
    expect(ipInCidrs("2001:db8:abcd::5", ["2001:db8::/32"])).toBe(true);
    expect(ipInCidrs("2001:db9::5", ["2001:db8::/32"])).toBe(false);
    expect(ipInCidrs("::ffff:10.1.2.3", v4)).toBe(true);
    expect(ipInCidrs("::ffff:a01:203", v4)).toBe(true);
    expect(ipInCidrs("10.1.2.3", ["::ffff:10.1.0.0/112"])).toBe(true);
    expect(ipInCidrs("10.2.2.3", ["::ffff:10.1.0.0/112"])).toBe(false);
    // A plain IPv6 block never holds an IPv4 address, nor an IPv4 block an IPv6 one.
    expect(ipInCidrs("10.1.2.3", ["::/0"])).toBe(false);
    expect(ipInCidrs("::1", ["0.0.0.0/0"])).toBe(false);
  });

  it("answers false for an empty list, a missing address or garbage", () => {
    expect(ipInCidrs("10.1.2.3", [])).toBe(false);
    expect(ipInCidrs(null, v4)).toBe(false);
    expect(ipInCidrs(undefined, v4)).toBe(false);
    expect(ipInCidrs("", v4)).toBe(false);
    expect(ipInCidrs("10.1.2.3, 10.9.9.9", v4)).toBe(false);
    expect(ipInCidrs("not-an-ip", ["0.0.0.0/0", "::/0"])).toBe(false);
  });
});

describe("cidrsWithin", () => {
  it("holds when every inner block lies in some outer block", () => {
    expect(cidrsWithin(["10.1.2.0/24", "10.1.3.4/32"], ["10.1.0.0/16"])).toBe(true);
    expect(cidrsWithin(["10.1.2.0/24", "192.0.2.0/24"], ["10.1.0.0/16", "192.0.0.0/16"])).toBe(true);
    expect(cidrsWithin(["2001:db8:1::/48"], ["2001:db8::/32"])).toBe(true);
    expect(cidrsWithin(["::ffff:10.1.2.3/128"], ["10.1.0.0/16"])).toBe(true);
    expect(cidrsWithin([], ["10.0.0.0/8"])).toBe(true);
  });

  it("fails for a wider block, a block outside, the other family or garbage", () => {
    expect(cidrsWithin(["10.0.0.0/8"], ["10.1.0.0/16"])).toBe(false);
    expect(cidrsWithin(["10.1.2.0/24", "10.2.0.0/24"], ["10.1.0.0/16"])).toBe(false);
    expect(cidrsWithin(["10.1.2.0/24"], ["::/0"])).toBe(false);
    expect(cidrsWithin(["garbage"], ["0.0.0.0/0"])).toBe(false);
  });

  it("an empty outer list binds nothing", () => {
    expect(cidrsWithin(["10.0.0.0/8", "::/0"], [])).toBe(true);
  });
});
