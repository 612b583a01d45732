/**
 * Certificate serials as pki_certs stores them (migration 0019, docs/storage-schema.md
 * "pki_certs"): the serial's octets as a BLOB, at most 20 (RFC 5280 §4.1.2.2), where the API and
 * every other table use Vault's colon hex ("17:67:16:..."; lowercase, two digits per octet). This
 * is the one place the two forms convert, both ways.
 *
 * The conversion keeps order: for colon hex of whole octets, comparing the texts byte by byte
 * (SQLite's BINARY collation) and comparing the octets (SQLite's memcmp order of BLOBs,
 * https://www.sqlite.org/datatype3.html §4.1) give the same answer, because each octet is two
 * digits ('0'-'9' sort before 'a'-'f' as their values do) and the ':' separators line up; a
 * shorter serial that is a prefix of a longer one sorts first in both. So `sort=serial` and LIST
 * pages keep the order they had when serials were text.
 */
import { customType } from "drizzle-orm/sqlite-core";
import { blobBytes, bytesToHex } from "../../encoding";

/** A BLOB as D1 hands it back (an array of numbers) or as a binding may hold it. */
export type BlobValue = number[] | Uint8Array | ArrayBuffer;

const CANONICAL = /^[0-9a-f]{2}(:[0-9a-f]{2})*$/;

/**
 * The octets of a colon-hex serial; empty when it is not canonical colon hex (e.g. "1:2" from a
 * client): no stored serial has that form and no stored BLOB is empty, so it matches nothing.
 */
export function serialOctets(serial: string): Uint8Array {
  if (!CANONICAL.test(serial)) return new Uint8Array(0);
  const out = new Uint8Array((serial.length + 1) / 3);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(serial.slice(i * 3, i * 3 + 2), 16);
  return out;
}

/** The colon hex of a stored serial BLOB. */
export function serialText(v: BlobValue): string {
  return serialFromHex(bytesToHex(blobBytes(v) ?? new Uint8Array(0)));
}

/**
 * The colon hex of a stored serial read as `lower(hex(serial))`. A long list reads serials this
 * way: D1 hands a BLOB back as an array of numbers, about ten times the memory of the text, which
 * at a million serials is the difference between fitting in a Worker's 128 MB and not.
 */
export function serialFromHex(hex: string): string {
  return hex.replace(/(..)(?!$)/g, "$1:");
}

const HEX = "0123456789abcdef";

/** The valid characters at position `i` of canonical colon hex, in order. */
const charsAt = (i: number): string => (i % 3 === 2 ? ":" : HEX);

/** `p` (a prefix of canonical colon hex) completed with the fewest, smallest characters. */
function complete(p: string): string {
  let s = p;
  while (s.length % 3 !== 2) s += charsAt(s.length)[0];
  return s;
}

/**
 * For a LIST's `after` (any text: Vault's list pages take any key): the octets of the first serial
 * whose colon hex sorts strictly after it, as the lower bound (inclusive) of the page; null when
 * none can (e.g. "g"). Keeps a page cut in SQL on the (mount, serial) index exactly where the text
 * comparison `serial > after` cut it.
 */
export function firstSerialAfter(after: string): Uint8Array | null {
  // The longest prefix of `after` that is a prefix of canonical colon hex.
  let n = 0;
  while (n < after.length && charsAt(n).includes(after.charAt(n))) n++;
  // `after` itself is such a prefix: its shortest proper completion is the next text.
  if (n === after.length) return serialOctets(complete(after.length % 3 === 2 ? `${after}:` : after));
  // Else raise the first character that can be raised, from the first invalid one backwards.
  for (let i = n; i >= 0; i--) {
    const c = [...charsAt(i)].find((ch) => ch > after.charAt(i));
    if (c !== undefined) return serialOctets(complete(after.slice(0, i) + c));
  }
  return null;
}

/** The Drizzle column type: colon hex in TypeScript, octets in D1. */
export const serialBlob = customType<{ data: string; driverData: BlobValue }>({
  dataType: () => "blob",
  toDriver: (v) => serialOctets(v),
  fromDriver: (v) => serialText(v),
});
