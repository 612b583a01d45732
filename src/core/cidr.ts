/**
 * CIDR lists for the auth methods' address bindings: `token_bound_cidrs` on every role,
 * AppRole's `secret_id_bound_cidrs` and a SecretID's `cidr_list`. Vault validates these with
 * Go's `net.ParseCIDR` / `sockaddr` and matches the request's remote address with
 * `IPNet.Contains` (sdk/helper/cidrutil). Addresses and blocks are read by src/core/ip.ts, the
 * one reader every caller shares; this module adds the list rules:
 * - entries are trimmed and blank ones dropped, a bare address is its own /32 or /128 block,
 *   duplicates are dropped, order is kept;
 * - host bits in a block are kept as written ("10.0.0.5/24" stays so, as Vault's reads show it);
 *   matching masks them.
 */
import { badRequest } from "./errors";
import { cidrContains, cidrWithin, formatCidr, parseCidr, parseIp, type CidrBlock } from "./ip";

const block = (text: string): CidrBlock | null => parseCidr(text.trim(), { bareAddress: true });

/**
 * Validates and normalises a list of CIDR blocks (the rules above, canonical address text).
 * A bad entry → 400 `<field>: invalid CIDR block "<entry>"`.
 */
export function parseCidrs(field: string, list: readonly string[]): string[] {
  const out: string[] = [];
  for (const raw of list) {
    const entry = raw.trim();
    if (entry === "") continue;
    const parsed = block(entry);
    if (parsed === null) throw badRequest(`${field}: invalid CIDR block "${entry}"`);
    const text = formatCidr(parsed);
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
  const addr = parseIp(ip.trim());
  if (addr === null) return false;
  return cidrs.some((text) => {
    const b = block(text);
    return b !== null && cidrContains(b, addr);
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
  const outerBlocks = outer.map(block).filter((b): b is CidrBlock => b !== null);
  return inner.every((text) => {
    const b = block(text);
    return b !== null && outerBlocks.some((o) => cidrWithin(b, o));
  });
}
