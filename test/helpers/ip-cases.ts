/**
 * The shared table of tricky IP texts (src/core/ip.ts's rules): what each is in canonical form
 * (null: not an address) and what kind of address it is (src/core/ip-kinds.ts; null: global
 * unicast). test/unit/ip.test.ts checks the module against it and test/unit/ip-agreement.test.ts
 * checks that every caller (auth CIDR bindings, PKI SAN policy, ACME, sync hosts, outbound URLs)
 * reads each text the same way.
 */
import type { IpKind } from "../../src/core/ip";

export interface IpCase {
  text: string;
  canonical: string | null;
  kind?: IpKind | null;
}

export const IP_CASES: readonly IpCase[] = [
  // IPv4
  { text: "8.8.8.8", canonical: "8.8.8.8", kind: null },
  { text: "10.0.0.1", canonical: "10.0.0.1", kind: "private" },
  { text: "172.16.0.1", canonical: "172.16.0.1", kind: "private" },
  { text: "172.31.255.255", canonical: "172.31.255.255", kind: "private" },
  { text: "172.32.0.1", canonical: "172.32.0.1", kind: null },
  { text: "192.168.1.1", canonical: "192.168.1.1", kind: "private" },
  { text: "127.0.0.1", canonical: "127.0.0.1", kind: "loopback" },
  { text: "127.255.0.9", canonical: "127.255.0.9", kind: "loopback" },
  { text: "169.254.169.254", canonical: "169.254.169.254", kind: "link-local" },
  { text: "100.64.0.1", canonical: "100.64.0.1", kind: "shared" },
  { text: "100.127.255.255", canonical: "100.127.255.255", kind: "shared" },
  { text: "100.128.0.0", canonical: "100.128.0.0", kind: null },
  { text: "0.0.0.0", canonical: "0.0.0.0", kind: "unspecified" },
  { text: "192.0.2.1", canonical: "192.0.2.1", kind: "documentation" },
  { text: "224.0.0.1", canonical: "224.0.0.1", kind: "multicast" },
  { text: "255.255.255.255", canonical: "255.255.255.255", kind: "broadcast" },
  { text: "010.0.0.1", canonical: null }, // leading zero: octal to some readers, refused (Go ≥ 1.17)
  { text: "256.0.0.1", canonical: null },
  { text: "1.2.3", canonical: null },
  { text: "1.2.3.4.5", canonical: null },
  { text: "0x7f.0.0.1", canonical: null },
  { text: "2130706433", canonical: null },
  { text: "1.2.3.-4", canonical: null },
  { text: "", canonical: null },
  // IPv6
  { text: "::", canonical: "::", kind: "unspecified" },
  { text: "::1", canonical: "::1", kind: "loopback" },
  { text: "0:0:0:0:0:0:0:1", canonical: "::1", kind: "loopback" },
  { text: "2001:DB8:0:0:0:0:0:1", canonical: "2001:db8::1", kind: "documentation" },
  { text: "2001:0db8::0001", canonical: "2001:db8::1", kind: "documentation" },
  { text: "2001:db8:0:0:1:0:0:1", canonical: "2001:db8::1:0:0:1", kind: "documentation" },
  { text: "1:0:0:2:0:0:0:3", canonical: "1:0:0:2::3", kind: "reserved" }, // ::/8, RFC 4291 §2.4
  { text: "2001:db8:3:4:5:6:7::", canonical: "2001:db8:3:4:5:6:7:0", kind: "documentation" },
  { text: "2a00:1:2:3:4:5:6::", canonical: "2a00:1:2:3:4:5:6:0", kind: null },
  { text: "::1:2:3:4:5:6:7", canonical: "0:1:2:3:4:5:6:7", kind: "reserved" },
  { text: "2606:4700::1111", canonical: "2606:4700::1111", kind: null },
  { text: "fe80::1", canonical: "fe80::1", kind: "link-local" },
  { text: "febf::1", canonical: "febf::1", kind: "link-local" },
  { text: "fd00::1", canonical: "fd00::1", kind: "unique-local" },
  { text: "fc00::", canonical: "fc00::", kind: "unique-local" },
  { text: "ff02::1", canonical: "ff02::1", kind: "multicast" },
  // IPv4 inside IPv6
  { text: "::ffff:1.2.3.4", canonical: "::ffff:1.2.3.4", kind: null },
  { text: "0:0:0:0:0:ffff:1.2.3.4", canonical: "::ffff:1.2.3.4", kind: null },
  { text: "::FFFF:7f00:1", canonical: "::ffff:127.0.0.1", kind: "loopback" },
  { text: "::ffff:127.0.0.1", canonical: "::ffff:127.0.0.1", kind: "loopback" },
  { text: "::ffff:10.0.0.1", canonical: "::ffff:10.0.0.1", kind: "private" },
  { text: "::ffff:169.254.169.254", canonical: "::ffff:169.254.169.254", kind: "link-local" },
  { text: "::ffff:100.64.0.1", canonical: "::ffff:100.64.0.1", kind: "shared" },
  { text: "::ffff:0.0.0.0", canonical: "::ffff:0.0.0.0", kind: "unspecified" },
  { text: "::127.0.0.1", canonical: "::7f00:1", kind: "reserved" }, // IPv4-compatible, deprecated
  { text: "64:ff9b::10.0.0.1", canonical: "64:ff9b::a00:1", kind: "private" },
  { text: "64:ff9b::8.8.8.8", canonical: "64:ff9b::808:808", kind: "translated" },
  { text: "2002:a00:1::1", canonical: "2002:a00:1::1", kind: "private" }, // 6to4 of 10.0.0.1
  // Not addresses
  { text: "fe80::1%eth0", canonical: null }, // zone
  { text: "[::1]", canonical: null }, // brackets belong to URLs
  { text: "1::2::3", canonical: null },
  { text: "1:2:3:4:5:6:7:8:9", canonical: null },
  { text: "1:2:3:4:5:6:7", canonical: null },
  { text: "1:2:3:4:5:6:7:8::", canonical: null },
  { text: "12345::", canonical: null },
  { text: "1:::2", canonical: null },
  { text: ":1::", canonical: null },
  { text: "::g", canonical: null },
  { text: "1.2.3.4::", canonical: null },
  { text: "::1.2.3.4:5", canonical: null },
  { text: "::ffff:01.2.3.4", canonical: null },
  { text: "::ffff:1.2.3", canonical: null },
  { text: "1:2:3:4:5:6:7:1.2.3.4", canonical: null },
  { text: "host.example", canonical: null },
  { text: " 10.0.0.1", canonical: null }, // lists trim their entries; the address reader does not
];

/** [address, block, whether the block holds it]: IPv4-mapped addresses and blocks are IPv4 (Go's IPNet.Contains). */
export const CIDR_MATCH_CASES: readonly [string, string, boolean][] = [
  ["10.1.2.3", "10.0.0.0/8", true],
  ["11.0.0.1", "10.0.0.0/8", false],
  ["10.0.0.200", "10.0.0.5/24", true],
  ["::ffff:10.1.2.3", "10.0.0.0/8", true],
  ["::ffff:10.1.2.3", "::ffff:10.1.0.0/112", true],
  ["10.1.2.3", "::ffff:10.1.0.0/112", true],
  ["10.2.2.3", "::ffff:10.1.0.0/112", false],
  ["10.1.2.3", "::/0", false],
  ["::1", "0.0.0.0/0", false],
  ["2001:db8:abcd::5", "2001:db8::/32", true],
  ["2001:db9::5", "2001:db8::/32", false],
];
