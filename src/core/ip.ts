/**
 * The one reader of IP addresses and CIDR blocks. Token and AppRole address bindings
 * (core/cidr.ts), the PKI's IP SANs and allowed_ip_sans_cidr, ACME IP identifiers and the
 * addresses ACME validation connects to, the sync outbound-host safeguard and the development
 * loopback rule for outbound URLs all parse, print, match and classify through here, so they
 * cannot disagree on the same text. Pure, no dependencies: it runs in Node unit tests and in the
 * Worker alike. docs/security.md ("IP addresses") lists the rules.
 *
 * Text rules, those of Go's net.ParseIP / net.ParseCIDR (Vault's), stated here so that every
 * caller applies them:
 * - IPv4 is dotted decimal, four parts 0–255, no leading zeros (Go ≥ 1.17 refuses "010.0.0.1":
 *   other readers take it as octal). No hex, octal or integer forms.
 * - IPv6 is RFC 4291 §2.2 text: hex groups of 1–4 digits, at most one "::" standing for at least
 *   one group, an optional dotted IPv4 address as the last 32 bits. Zones ("fe80::1%eth0",
 *   RFC 4007 §11) are refused: no caller can use one. No brackets (those belong to URLs: see
 *   parseHostLiteral) and no surrounding white space (lists trim their entries themselves).
 * - The canonical text is RFC 5952 §4 (lower case, no leading zeros, the first longest run of
 *   two or more zero groups as "::") and §5 for IPv4-mapped addresses ("::ffff:192.0.2.1").
 * - An IPv4-mapped IPv6 address (RFC 4291 §2.5.5.2) keeps its family in text and bytes, but is
 *   its IPv4 address wherever an address is judged: matching (as Go's IPNet.Contains) and
 *   classification (so "::ffff:127.0.0.1" is loopback).
 * - A CIDR prefix length is decimal without leading zeros, at most 32 or 128.
 */

/** An address: 4 bytes (IPv4) or 16 bytes (IPv6), network order. */
export type IpBytes = Uint8Array;

/** A block as written: the address (host bits kept) and the prefix length in its family. */
export interface CidrBlock {
  addr: IpBytes;
  prefix: number;
}

/** The longest address text: "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255". */
const MAX_IP_TEXT = 45;
const V4_PART = /^(0|[1-9]\d{0,2})$/;
const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;
const PREFIX = /^(0|[1-9]\d{0,2})$/;

function parseV4(text: string): IpBytes | null {
  const parts = text.split(".");
  if (parts.length !== 4) return null;
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const part = parts[i] ?? "";
    if (!V4_PART.test(part)) return null;
    const n = Number(part);
    if (n > 255) return null;
    out[i] = n;
  }
  return out;
}

/** The 16-bit groups of one side of "::"; a dotted IPv4 is allowed only as the very last piece. */
function groupsOf(text: string, v4Last: boolean): number[] | null {
  if (text === "") return [];
  const pieces = text.split(":");
  const groups: number[] = [];
  for (let i = 0; i < pieces.length; i++) {
    const piece = pieces[i] ?? "";
    if (v4Last && i === pieces.length - 1 && piece.includes(".")) {
      const v4 = parseV4(piece);
      if (v4 === null) return null;
      groups.push(((v4[0] ?? 0) << 8) | (v4[1] ?? 0), ((v4[2] ?? 0) << 8) | (v4[3] ?? 0));
    } else if (HEX_GROUP.test(piece)) {
      groups.push(parseInt(piece, 16));
    } else {
      return null;
    }
  }
  return groups;
}

function parseV6(text: string): IpBytes | null {
  const halves = text.split("::");
  if (halves.length > 2) return null;
  let groups: number[];
  if (halves.length === 2) {
    const head = groupsOf(halves[0] ?? "", false);
    const tail = groupsOf(halves[1] ?? "", true);
    if (head === null || tail === null || head.length + tail.length > 7) return null;
    groups = [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
  } else {
    const all = groupsOf(text, true);
    if (all === null || all.length !== 8) return null;
    groups = all;
  }
  const out = new Uint8Array(16);
  groups.forEach((g, i) => {
    out[i * 2] = g >> 8;
    out[i * 2 + 1] = g & 0xff;
  });
  return out;
}

/** Parses an IPv4 or IPv6 address (the rules above), or null. */
export function parseIp(text: string): IpBytes | null {
  if (text.length === 0 || text.length > MAX_IP_TEXT) return null;
  return text.includes(":") ? parseV6(text) : parseV4(text);
}

/** Whether `text` is an IP address under the rules above. */
export function isIp(text: string): boolean {
  return parseIp(text) !== null;
}

/** Whether `text` is an IPv6 address (so a URL or host:port must bracket it). */
export function isIpv6(text: string): boolean {
  return parseIp(text)?.length === 16;
}

/**
 * A URL's or host:port's host as an address: "[v6]" bracketed, IPv4 as is; null for a name.
 * WHATWG URL hostnames have already turned other IPv4 spellings (0x7f.1, 2130706433) into
 * dotted decimal, so those are judged as the address they reach.
 */
export function parseHostLiteral(host: string): IpBytes | null {
  if (host.startsWith("[") && host.endsWith("]")) {
    const ip = parseIp(host.slice(1, -1));
    return ip?.length === 16 ? ip : null;
  }
  const ip = parseIp(host);
  return ip?.length === 4 ? ip : null;
}

/** Whether a 16-byte address is IPv4-mapped (::ffff:0:0/96, RFC 4291 §2.5.5.2). */
export function isIpv4Mapped(ip: IpBytes): boolean {
  if (ip.length !== 16) return false;
  for (let i = 0; i < 10; i++) if (ip[i] !== 0) return false;
  return ip[10] === 0xff && ip[11] === 0xff;
}

/** The address as it is judged: an IPv4-mapped address as its 4 IPv4 bytes, any other unchanged. */
export function unmapIpv4(ip: IpBytes): IpBytes {
  return isIpv4Mapped(ip) ? ip.slice(12) : ip;
}

function formatV4(b: IpBytes, at = 0): string {
  return `${b[at] ?? 0}.${b[at + 1] ?? 0}.${b[at + 2] ?? 0}.${b[at + 3] ?? 0}`;
}

/** Canonical text: dotted decimal, or RFC 5952 (IPv4-mapped in §5's mixed notation). */
export function formatIp(ip: IpBytes): string {
  if (ip.length === 4) return formatV4(ip);
  if (isIpv4Mapped(ip)) return `::ffff:${formatV4(ip, 12)}`;
  const g: number[] = [];
  for (let i = 0; i < 16; i += 2) g.push(((ip[i] ?? 0) << 8) | (ip[i + 1] ?? 0));
  let bestStart = -1;
  let bestLen = 1; // RFC 5952 §4.2.2: "::" never stands for a single group.
  for (let i = 0; i < 8; ) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = g.map((x) => x.toString(16));
  if (bestStart < 0) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLen).join(":")}`;
}

/** The canonical text of `text`, or null when it is not an address. */
export function canonicalIp(text: string): string | null {
  const ip = parseIp(text);
  return ip === null ? null : formatIp(ip);
}

// ---------------------------------------------------------------------------------------------
// CIDR blocks

/**
 * Parses "addr/prefix". A bare address is the single-address block (/32 or /128) when
 * `bareAddress` is set (the auth methods' lists take one; PKI's allowed_ip_sans_cidr does not).
 */
export function parseCidr(text: string, opts: { bareAddress?: boolean } = {}): CidrBlock | null {
  const slash = text.indexOf("/");
  if (slash < 0) {
    if (!opts.bareAddress) return null;
    const addr = parseIp(text);
    return addr === null ? null : { addr, prefix: addr.length * 8 };
  }
  const addr = parseIp(text.slice(0, slash));
  const prefixText = text.slice(slash + 1);
  if (addr === null || !PREFIX.test(prefixText)) return null;
  const prefix = Number(prefixText);
  return prefix > addr.length * 8 ? null : { addr, prefix };
}

function maskBytes(addr: IpBytes, prefix: number): IpBytes {
  const out = addr.slice();
  for (let i = 0; i < out.length; i++) {
    const keep = Math.max(0, Math.min(8, prefix - i * 8));
    out[i] = (out[i] ?? 0) & ((0xff << (8 - keep)) & 0xff);
  }
  return out;
}

/** The block with its host bits cleared ("10.1.2.3/8" → 10.0.0.0/8). */
export function networkOf(block: CidrBlock): CidrBlock {
  return { addr: maskBytes(block.addr, block.prefix), prefix: block.prefix };
}

/** "addr/prefix" in canonical address text, host bits as they are. */
export function formatCidr(block: CidrBlock): string {
  return `${formatIp(block.addr)}/${block.prefix}`;
}

/**
 * The block in the family it matches in: ::ffff:a.b.c.d/N with N ≥ 96 is the IPv4 block
 * a.b.c.d/(N-96), as Go's IPNet treats it; a plain IPv6 block (even ::/0) stays IPv6.
 */
function matchingForm(block: CidrBlock): CidrBlock {
  if (block.prefix >= 96 && isIpv4Mapped(block.addr)) return { addr: block.addr.slice(12), prefix: block.prefix - 96 };
  return block;
}

function samePrefix(a: IpBytes, b: IpBytes, prefix: number): boolean {
  if (a.length !== b.length) return false;
  const ma = maskBytes(a, prefix);
  const mb = maskBytes(b, prefix);
  return ma.every((x, i) => x === mb[i]);
}

/** Whether `ip` lies in `block` (IPv4-mapped addresses and blocks as IPv4; families never mix). */
export function cidrContains(block: CidrBlock, ip: IpBytes): boolean {
  const b = matchingForm(block);
  return samePrefix(b.addr, unmapIpv4(ip), b.prefix);
}

/** Whether every address of `inner` lies in `outer` (Vault's cidrutil.SubsetBlocks rule). */
export function cidrWithin(inner: CidrBlock, outer: CidrBlock): boolean {
  const i = matchingForm(inner);
  const o = matchingForm(outer);
  return o.prefix <= i.prefix && samePrefix(o.addr, i.addr, o.prefix);
}

export { classifyIp, describeIpKind, type IpKind } from "./ip-kinds";
