/**
 * Outbound-host safeguards for URLs that come from user input (issue 5 "networking
 * safeguards"; reference/secrets-sync.md §1.5): the key vault URI of a `cloudtwo-kv` destination
 * and the `token_uri` of `cloudthree-sm` credentials decide where the service connects. Unless
 * the operator set the provider's endpoint variable (CONTRACT.md "Configuration": then the
 * variable replaces the host for every call, so the user's host is never contacted), such a URL
 * must be https on the standard port and name one of the provider's hosts; private, loopback,
 * link-local and other special-purpose address literals are refused either way a user could try
 * them. Pure functions: no DNS, no I/O.
 */

export interface HostRule {
  /** Field name for messages. */
  field: string;
  /** Exact hosts or, with a leading ".", host suffixes the provider uses. */
  allowedHosts: readonly string[];
  /** The operator's endpoint variable is set, so every syntactically valid URL is accepted. */
  endpointOverride: boolean;
}

/** Why a URL is refused, or null when it is acceptable. Never echoes the URL's credentials. */
export function checkOutboundUrl(raw: string, rule: HostRule): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return `${rule.field}: not a valid absolute URL`;
  }
  if (url.username !== "" || url.password !== "") return `${rule.field}: credentials in the URL are not allowed`;
  if (url.search !== "" || url.hash !== "") return `${rule.field}: a query or fragment is not allowed`;
  if (rule.endpointOverride) {
    return url.protocol === "https:" || url.protocol === "http:" ? null : `${rule.field}: the scheme must be https`;
  }
  if (url.protocol !== "https:") return `${rule.field}: the scheme must be https`;
  if (url.port !== "") return `${rule.field}: only the default https port is allowed`;
  const host = url.hostname.toLowerCase();
  const literal = ipLiteral(host);
  if (literal) {
    const special = specialPurpose(literal);
    return special
      ? `${rule.field}: ${special} addresses are not allowed`
      : `${rule.field}: an IP address is not allowed; use the provider's host name`;
  }
  if (!hostAllowed(host, rule.allowedHosts)) {
    return `${rule.field}: host "${host}" is not one of the provider's hosts (${rule.allowedHosts.map((h) => (h.startsWith(".") ? `*${h}` : h)).join(", ")})`;
  }
  return null;
}

export function hostAllowed(host: string, allowed: readonly string[]): boolean {
  const h = host.replace(/\.$/, "");
  return allowed.some((a) => (a.startsWith(".") ? h.endsWith(a) && h.length > a.length : h === a));
}

type IpLiteral = { v: 4; bytes: number[] } | { v: 6; words: number[] };

/** Parses a URL hostname that is an IP literal (WHATWG URL has already normalised IPv4 forms). */
export function ipLiteral(host: string): IpLiteral | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
  if (m) {
    const bytes = m.slice(1).map(Number);
    return bytes.every((b) => b <= 255) ? { v: 4, bytes } : null;
  }
  if (host.startsWith("[") && host.endsWith("]")) {
    const words = parseIpv6(host.slice(1, -1));
    return words ? { v: 6, words } : null;
  }
  return null;
}

function parseIpv6(s: string): number[] | null {
  const halves = s.split("::");
  if (halves.length > 2) return null;
  const part = (p: string): number[] | null => {
    if (p === "") return [];
    const out: number[] = [];
    for (const g of p.split(":")) {
      const v4 = ipLiteral(g);
      if (v4?.v === 4) {
        const [a = 0, b = 0, c = 0, d = 0] = v4.bytes;
        out.push((a << 8) | b, (c << 8) | d);
      } else if (/^[0-9a-f]{1,4}$/i.test(g)) {
        out.push(parseInt(g, 16));
      } else {
        return null;
      }
    }
    return out;
  };
  const head = part(halves[0] ?? "");
  const tail = halves.length === 2 ? part(halves[1] ?? "") : [];
  if (!head || !tail) return null;
  const fill = 8 - head.length - tail.length;
  if (halves.length === 2 ? fill < 1 : fill !== 0) return null;
  return [...head, ...new Array<number>(halves.length === 2 ? fill : 0).fill(0), ...tail];
}

function inV4(bytes: number[], prefix: readonly number[], bits: number): boolean {
  for (let i = 0; i < 4 && bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if (((bytes[i] ?? 0) & mask) !== ((prefix[i] ?? 0) & mask)) return false;
  }
  return true;
}

const V4_SPECIAL: ReadonlyArray<[readonly number[], number, string]> = [
  [[0, 0, 0, 0], 8, "unspecified"],
  [[10, 0, 0, 0], 8, "private"],
  [[100, 64, 0, 0], 10, "shared (carrier-grade NAT)"],
  [[127, 0, 0, 0], 8, "loopback"],
  [[169, 254, 0, 0], 16, "link-local"],
  [[172, 16, 0, 0], 12, "private"],
  [[192, 0, 0, 0], 24, "special-purpose"],
  [[192, 168, 0, 0], 16, "private"],
  [[198, 18, 0, 0], 15, "benchmarking"],
  [[224, 0, 0, 0], 4, "multicast"],
  [[240, 0, 0, 0], 4, "reserved"],
];

/** The kind of special-purpose address this is (private, loopback, link-local, ...), or null. */
export function specialPurpose(ip: IpLiteral): string | null {
  if (ip.v === 4) {
    for (const [prefix, bits, kind] of V4_SPECIAL) if (inV4(ip.bytes, prefix, bits)) return kind;
    return null;
  }
  const w = ip.words;
  const first = w[0] ?? 0;
  if (w.every((x) => x === 0)) return "unspecified";
  if (w.slice(0, 7).every((x) => x === 0) && w[7] === 1) return "loopback";
  // IPv4-mapped (::ffff:a.b.c.d) and the NAT64 prefix carry an IPv4 address: judge that one.
  if ((w.slice(0, 5).every((x) => x === 0) && w[5] === 0xffff) || (first === 0x64 && w[1] === 0xff9b)) {
    const [hi = 0, lo = 0] = w.slice(6);
    return specialPurpose({ v: 4, bytes: [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff] }) ?? (first === 0 ? null : "translated");
  }
  if ((first & 0xffc0) === 0xfe80) return "link-local";
  if ((first & 0xfe00) === 0xfc00) return "private (unique local)";
  if ((first & 0xff00) === 0xff00) return "multicast";
  if (first === 0x2001 && (w[1] ?? 0) < 0x200) return "special-purpose";
  if (first === 0x2001 && w[1] === 0xdb8) return "documentation";
  return null;
}
