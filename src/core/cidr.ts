/**
 * CIDR blocks for the auth methods' address bindings (issue 13): `token_bound_cidrs` on every
 * role, AppRole's `secret_id_bound_cidrs` and a SecretID's `cidr_list`. Vault validates these
 * with Go's `net.ParseCIDR` / `sockaddr` and matches the request's remote address with
 * `IPNet.Contains` (sdk/helper/cidrutil); this module is the same rule in TypeScript, pure and
 * without dependencies, so it can run in Node unit tests as well as in the Worker.
 *
 * Rules, as Go's net package has them:
 * - IPv4 is dotted decimal, four parts 0–255, no leading zeros (Go ≥ 1.17 refuses "010.0.0.1").
 * - IPv6 is RFC 4291 text (one "::", optional trailing dotted IPv4); zones ("%eth0") are refused.
 * - An IPv4-mapped IPv6 address (::ffff:1.2.3.4) is that IPv4 address: it matches IPv4 blocks,
 *   and a block written ::ffff:a.b.c.d/N (N ≥ 96) is the IPv4 block a.b.c.d/(N-96). A plain IPv6
 *   block (even ::/0) never contains an IPv4 address, as with `IPNet.Contains`.
 * - Host bits in a block are kept as written ("10.0.0.5/24" stays so, as Vault's reads show it);
 *   matching masks them.
 */
import { badRequest } from "./errors";

/** A parsed address: IPv4 in 32 bits, IPv6 in 128 bits. */
interface Addr {
  v6: boolean;
  value: bigint;
}

/** A parsed block: an address and a prefix length within its family's width. */
interface Block extends Addr {
  bits: number;
}

const V4_PART = /^(0|[1-9]\d{0,2})$/;
const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;
const PREFIX = /^(0|[1-9]\d{0,2})$/;
const MAPPED_PREFIX = 0xffffn;

function parseV4(text: string): bigint | null {
  const parts = text.split(".");
  if (parts.length !== 4) return null;
  let value = 0n;
  for (const part of parts) {
    if (!V4_PART.test(part)) return null;
    const n = Number(part);
    if (n > 255) return null;
    value = (value << 8n) | BigInt(n);
  }
  return value;
}

/** Groups of one side of "::" (each a 16-bit value); a trailing dotted IPv4 counts as two. */
function parseGroups(text: string, allowV4Tail: boolean): bigint[] | null {
  if (text === "") return [];
  const pieces = text.split(":");
  const groups: bigint[] = [];
  for (let i = 0; i < pieces.length; i++) {
    const piece = pieces[i] ?? "";
    if (allowV4Tail && i === pieces.length - 1 && piece.includes(".")) {
      const v4 = parseV4(piece);
      if (v4 === null) return null;
      groups.push(v4 >> 16n, v4 & 0xffffn);
    } else if (HEX_GROUP.test(piece)) {
      groups.push(BigInt(parseInt(piece, 16)));
    } else {
      return null;
    }
  }
  return groups;
}

function parseV6(text: string): bigint | null {
  if (text.includes("%")) return null;
  const halves = text.split("::");
  if (halves.length > 2) return null;
  let groups: bigint[];
  if (halves.length === 2) {
    const head = parseGroups(halves[0] ?? "", false);
    const tail = parseGroups(halves[1] ?? "", true);
    if (head === null || tail === null || head.length + tail.length > 7) return null;
    groups = [...head, ...new Array<bigint>(8 - head.length - tail.length).fill(0n), ...tail];
  } else {
    const all = parseGroups(text, true);
    if (all === null || all.length !== 8) return null;
    groups = all;
  }
  return groups.reduce((acc, g) => (acc << 16n) | g, 0n);
}

function parseAddr(text: string): Addr | null {
  if (text.includes(":")) {
    const value = parseV6(text);
    return value === null ? null : { v6: true, value };
  }
  const value = parseV4(text);
  return value === null ? null : { v6: false, value };
}

/** An IPv4-mapped IPv6 address (::ffff:0:0/96) as the IPv4 address it carries. */
function unmap(addr: Addr): Addr {
  if (addr.v6 && addr.value >> 32n === MAPPED_PREFIX) return { v6: false, value: addr.value & 0xffffffffn };
  return addr;
}

function parseBlock(text: string): Block | null {
  const slash = text.indexOf("/");
  const addrText = slash < 0 ? text : text.slice(0, slash);
  const addr = parseAddr(addrText);
  if (addr === null) return null;
  const width = addr.v6 ? 128 : 32;
  let bits = width;
  if (slash >= 0) {
    const prefixText = text.slice(slash + 1);
    if (!PREFIX.test(prefixText)) return null;
    bits = Number(prefixText);
    if (bits > width) return null;
  }
  return { ...addr, bits };
}

/** The block in the family it matches in: a mapped ::ffff:a.b.c.d/N (N ≥ 96) is IPv4 /N-96. */
function matchingForm(block: Block): Block {
  if (block.v6 && block.bits >= 96 && block.value >> 32n === MAPPED_PREFIX) {
    return { v6: false, value: block.value & 0xffffffffn, bits: block.bits - 96 };
  }
  return block;
}

function networkOf(value: bigint, bits: number, width: number): bigint {
  return bits === 0 ? 0n : value >> BigInt(width - bits);
}

function contains(block: Block, addr: Addr, addrBits: number): boolean {
  if (block.v6 !== addr.v6 || block.bits > addrBits) return false;
  const width = block.v6 ? 128 : 32;
  return networkOf(block.value, block.bits, width) === networkOf(addr.value, block.bits, width);
}

function formatV4(value: bigint): string {
  return [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 0xffn)).join(".");
}

/** RFC 5952 text: lower case, no leading zeros, the longest run (≥ 2) of zero groups as "::". */
function formatV6(value: bigint): string {
  if (value >> 32n === MAPPED_PREFIX) return `::ffff:${formatV4(value & 0xffffffffn)}`;
  const groups: number[] = [];
  for (let i = 7; i >= 0; i--) groups.push(Number((value >> BigInt(i * 16)) & 0xffffn));
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestLen < 2) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLen).join(":")}`;
}

function formatBlock(block: Block): string {
  return `${block.v6 ? formatV6(block.value) : formatV4(block.value)}/${block.bits}`;
}

/**
 * Validates and normalises a list of CIDR blocks: entries are trimmed and empty ones dropped
 * (a comma string "a,,b" splits into one), a bare address becomes /32 (IPv4) or /128 (IPv6),
 * IPv6 is written in RFC 5952 form, duplicates are dropped, order is kept.
 * A bad entry → 400 `<field>: invalid CIDR block "<entry>"`.
 */
export function parseCidrs(field: string, list: readonly string[]): string[] {
  const out: string[] = [];
  for (const raw of list) {
    const entry = raw.trim();
    if (entry === "") continue;
    const block = parseBlock(entry);
    if (block === null) throw badRequest(`${field}: invalid CIDR block "${entry}"`);
    const text = formatBlock(block);
    if (!out.includes(text)) out.push(text);
  }
  return out;
}

/**
 * Whether `ip` lies in one of `cidrs`. An empty list answers **false**: whether "no binding"
 * means "any address" is the caller's rule (Vault: an empty token_bound_cidrs allows all), so
 * callers check `cidrs.length === 0` themselves. A missing or unparsable ip answers false.
 * Unparsable blocks are skipped (lists are validated by parseCidrs when written).
 */
export function ipInCidrs(ip: string | null | undefined, cidrs: readonly string[]): boolean {
  if (ip === null || ip === undefined) return false;
  const parsed = parseAddr(ip.trim());
  if (parsed === null) return false;
  const addr = unmap(parsed);
  const addrBits = addr.v6 ? 128 : 32;
  return cidrs.some((text) => {
    const block = parseBlock(text.trim());
    return block !== null && contains(matchingForm(block), addr, addrBits);
  });
}

/**
 * Whether every block of `inner` lies inside some block of `outer` (Vault's
 * cidrutil.SubsetBlocks, used for a SecretID's cidr_list against the role's
 * secret_id_bound_cidrs). An empty `outer` binds nothing, so anything is within it: true.
 * An unparsable inner block is not within anything: false.
 */
export function cidrsWithin(inner: readonly string[], outer: readonly string[]): boolean {
  if (outer.length === 0) return true;
  const outerBlocks = outer.map((text) => parseBlock(text.trim())).filter((b): b is Block => b !== null).map(matchingForm);
  return inner.every((text) => {
    const parsed = parseBlock(text.trim());
    if (parsed === null) return false;
    const block = matchingForm(parsed);
    return outerBlocks.some((o) => contains(o, block, block.bits));
  });
}
