/**
 * What kind of address an IP is, from the IANA IPv4 and IPv6 Special-Purpose Address Registries
 * (RFC 6890) and the IPv6 address architecture (RFC 4291): loopback, private (RFC 1918), unique
 * local (RFC 4193), link-local (RFC 3927, RFC 4291 §2.5.6), shared / carrier-grade NAT
 * (RFC 6598), unspecified, and the other ranges that are no public host. An address that carries
 * an IPv4 address (IPv4-mapped, the NAT64 prefix of RFC 6052, 6to4 of RFC 3056) is judged by
 * that IPv4 address as well. `null` is an ordinary global unicast address.
 *
 * The outbound safeguards (sync hosts, ACME validation in production) refuse every kind: none
 * is a public service an outbound call needs to reach.
 */

export type IpKind =
  | "unspecified"
  | "loopback"
  | "private"
  | "unique-local"
  | "link-local"
  | "site-local"
  | "shared"
  | "benchmarking"
  | "documentation"
  | "multicast"
  | "broadcast"
  | "reserved"
  | "special-purpose"
  | "translated";

const V4_KINDS: ReadonlyArray<readonly [readonly [number, number, number, number], number, IpKind]> = [
  [[0, 0, 0, 0], 8, "unspecified"], // "this network", RFC 1122 §3.2.1.3
  [[10, 0, 0, 0], 8, "private"],
  [[100, 64, 0, 0], 10, "shared"],
  [[127, 0, 0, 0], 8, "loopback"],
  [[169, 254, 0, 0], 16, "link-local"],
  [[172, 16, 0, 0], 12, "private"],
  [[192, 0, 0, 0], 24, "special-purpose"], // IETF protocol assignments, RFC 6890 §2.2.2
  [[192, 0, 2, 0], 24, "documentation"], // RFC 5737
  [[192, 88, 99, 0], 24, "reserved"], // former 6to4 relay anycast, RFC 7526
  [[192, 168, 0, 0], 16, "private"],
  [[198, 18, 0, 0], 15, "benchmarking"], // RFC 2544
  [[198, 51, 100, 0], 24, "documentation"],
  [[203, 0, 113, 0], 24, "documentation"],
  [[224, 0, 0, 0], 4, "multicast"],
  [[255, 255, 255, 255], 32, "broadcast"],
  [[240, 0, 0, 0], 4, "reserved"], // RFC 1112 §4
];

function inPrefix(ip: Uint8Array, at: number, prefix: readonly number[], bits: number): boolean {
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if (((ip[at + i] ?? 0) & mask) !== ((prefix[i] ?? 0) & mask)) return false;
  }
  return true;
}

function v4Kind(ip: Uint8Array, at: number): IpKind | null {
  for (const [prefix, bits, kind] of V4_KINDS) if (inPrefix(ip, at, prefix, bits)) return kind;
  return null;
}

const word = (ip: Uint8Array, i: number): number => ((ip[i * 2] ?? 0) << 8) | (ip[i * 2 + 1] ?? 0);

function v6Kind(ip: Uint8Array): IpKind | null {
  const w = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => word(ip, i));
  const zeroUpTo = (n: number) => w.slice(0, n).every((x) => x === 0);
  if (zeroUpTo(8)) return "unspecified";
  if (zeroUpTo(7) && w[7] === 1) return "loopback";
  // IPv4-mapped (RFC 4291 §2.5.5.2): the IPv4 address is what a socket reaches.
  if (zeroUpTo(5) && w[5] === 0xffff) return v4Kind(ip, 12);
  // NAT64 (RFC 6052 §2.1 well-known prefix, RFC 8215 local-use prefix): a translator reaches the
  // embedded IPv4 address, possibly inside the operator's network.
  if (w[0] === 0x64 && w[1] === 0xff9b && w.slice(2, 6).every((x) => x === 0)) return v4Kind(ip, 12) ?? "translated";
  if (w[0] === 0x64 && w[1] === 0xff9b && w[2] === 1) return "translated";
  // The rest of ::/8 (IPv4-compatible addresses, deprecated by RFC 4291 §2.5.5.1) is reserved.
  if ((ip[0] ?? 0) === 0) return "reserved";
  if (w[0] === 0x100 && w[1] === 0 && w[2] === 0 && w[3] === 0) return "special-purpose"; // discard-only, RFC 6666
  if (w[0] === 0x2001 && w[1] === 0xdb8) return "documentation"; // RFC 3849
  if (w[0] === 0x2001 && (w[1] ?? 0) < 0x200) return "special-purpose"; // IETF protocol assignments, RFC 2928
  if (w[0] === 0x2002) return v4Kind(ip, 2); // 6to4, RFC 3056 §2: judged by its IPv4 address
  if (w[0] === 0x3fff && (w[1] ?? 0) < 0x1000) return "documentation"; // RFC 9637
  const first = w[0] ?? 0;
  if ((first & 0xfe00) === 0xfc00) return "unique-local";
  if ((first & 0xffc0) === 0xfe80) return "link-local";
  if ((first & 0xffc0) === 0xfec0) return "site-local"; // deprecated by RFC 3879, still not public
  if ((first & 0xff00) === 0xff00) return "multicast";
  return null;
}

/** The kind of a 4- or 16-byte address, or null for an ordinary global unicast address. */
export function classifyIp(ip: Uint8Array): IpKind | null {
  return ip.length === 4 ? v4Kind(ip, 0) : v6Kind(ip);
}

const DESCRIPTIONS: Record<IpKind, string> = {
  unspecified: "unspecified",
  loopback: "loopback",
  private: "private (RFC 1918)",
  "unique-local": "private (unique local, RFC 4193)",
  "link-local": "link-local",
  "site-local": "site-local",
  shared: "shared (carrier-grade NAT, RFC 6598)",
  benchmarking: "benchmarking",
  documentation: "documentation",
  multicast: "multicast",
  broadcast: "broadcast",
  reserved: "reserved",
  "special-purpose": "special-purpose",
  translated: "translated (NAT64)",
};

/** The kind in words for messages ("private (RFC 1918)"). */
export function describeIpKind(kind: IpKind): string {
  return DESCRIPTIONS[kind];
}
