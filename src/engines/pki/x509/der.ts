/**
 * A minimal DER (X.690) reader and writer: enough for names, extensions and key containers.
 * Hand-encoding these small structures keeps the hot issuance path off the generic ASN.1
 * schema machinery, and keeps the structures visible next to the RFC sections that define them.
 */

import { BoundedCache } from "../../../core/bounded-cache";
import { concatBytes as concat, derTlv as tlv } from "../../../core/encoding";

export const TAG = {
  BOOLEAN: 0x01,
  INTEGER: 0x02,
  BIT_STRING: 0x03,
  OCTET_STRING: 0x04,
  NULL: 0x05,
  OID: 0x06,
  UTF8_STRING: 0x0c,
  PRINTABLE_STRING: 0x13,
  IA5_STRING: 0x16,
  UTC_TIME: 0x17,
  GENERALIZED_TIME: 0x18,
  SEQUENCE: 0x30,
  SET: 0x31,
} as const;

export class DerError extends Error {}

// Byte concatenation and one TLV are core's (shared with the sync engine's PKCS#8 wrapping).
export { concat, tlv };

const ENCODER = new TextEncoder();

/**
 * One TLV around the concatenation of `parts`, written into a single buffer: the constructed
 * types (SEQUENCE, SET, [n]) of every certificate go through here, so the parts are not first
 * joined into a buffer of their own (X.690 §8.1: definite-length header, then the content).
 */
export function frame(tag: number, parts: readonly Uint8Array[]): Uint8Array<ArrayBuffer> {
  let len = 0;
  for (const p of parts) len += p.length;
  const head = len < 0x80 ? 2 : len < 0x100 ? 3 : len < 0x10000 ? 4 : len < 0x1000000 ? 5 : 6;
  const out = new Uint8Array(head + len);
  out[0] = tag;
  if (head === 2) out[1] = len;
  else {
    out[1] = 0x80 | (head - 2);
    for (let i = head - 1, v = len; i >= 2; i--, v = Math.floor(v / 256)) out[i] = v & 0xff;
  }
  let off = head;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

export const seq = (...items: Uint8Array[]): Uint8Array<ArrayBuffer> => frame(TAG.SEQUENCE, items);
export const set = (...items: Uint8Array[]): Uint8Array<ArrayBuffer> => frame(TAG.SET, items);
export const octets = (b: Uint8Array): Uint8Array<ArrayBuffer> => frame(TAG.OCTET_STRING, [b]);
export const nullValue = (): Uint8Array<ArrayBuffer> => Uint8Array.of(TAG.NULL, 0);
export const bool = (v: boolean): Uint8Array<ArrayBuffer> => Uint8Array.of(TAG.BOOLEAN, 1, v ? 0xff : 0);
export const utf8 = (s: string): Uint8Array<ArrayBuffer> => frame(TAG.UTF8_STRING, [ENCODER.encode(s)]);
export const ia5 = (s: string): Uint8Array<ArrayBuffer> => frame(TAG.IA5_STRING, [ENCODER.encode(s)]);
/** [n] IMPLICIT primitive. */
export const ctxPrim = (n: number, content: Uint8Array): Uint8Array<ArrayBuffer> => frame(0x80 | n, [content]);
/** [n] constructed (EXPLICIT, or IMPLICIT over a constructed type). */
export const ctxCons = (n: number, content: Uint8Array): Uint8Array<ArrayBuffer> => frame(0xa0 | n, [content]);

/** Non-negative INTEGER from a small number. */
export function int(n: number): Uint8Array<ArrayBuffer> {
  const bytes: number[] = [];
  let v = n;
  do {
    bytes.unshift(v & 0xff);
    v = Math.floor(v / 256);
  } while (v > 0);
  if ((bytes[0] ?? 0) & 0x80) bytes.unshift(0);
  return tlv(TAG.INTEGER, Uint8Array.from(bytes));
}

/** INTEGER from unsigned big-endian bytes: minimal, with a 0x00 prefix when the top bit is set. */
export function uintBytes(b: Uint8Array): Uint8Array<ArrayBuffer> {
  let start = 0;
  while (start < b.length - 1 && b[start] === 0) start++;
  const body = b.subarray(start);
  return (body[0] ?? 0) & 0x80 ? frame(TAG.INTEGER, [ZERO, body]) : frame(TAG.INTEGER, [body]);
}

const ZERO = Uint8Array.of(0);

/** UTCTime through 2049, GeneralizedTime from 2050 (RFC 5280 §4.1.2.5), whole seconds, Z. */
export function time(d: Date): Uint8Array<ArrayBuffer> {
  const year = d.getUTCFullYear();
  if (!(year >= 0 && year <= 9999)) throw new DerError("time out of range");
  const utc = year < 2050;
  const fields = [year, d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds()];
  const out = new Uint8Array(utc ? 15 : 17);
  out[0] = utc ? TAG.UTC_TIME : TAG.GENERALIZED_TIME;
  out[1] = out.length - 2;
  // YYMMDDHHMMSSZ or YYYYMMDDHHMMSSZ (RFC 5280 §4.1.2.5.1-2: seconds, Zulu, no fraction).
  let o = 2;
  if (!utc) o = put2(out, o, Math.floor(year / 100));
  o = put2(out, o, year % 100);
  for (let i = 1; i < fields.length; i++) o = put2(out, o, fields[i] ?? 0);
  out[o] = 0x5a; // "Z"
  return out;
}

/** Two ASCII digits of `v` at `o`; the offset after them. */
function put2(out: Uint8Array, o: number, v: number): number {
  out[o] = 0x30 + Math.floor(v / 10);
  out[o + 1] = 0x30 + (v % 10);
  return o + 2;
}

/** BIT STRING with no unused bits. */
export const bitString = (b: Uint8Array): Uint8Array<ArrayBuffer> => frame(TAG.BIT_STRING, [ZERO, b]);

/**
 * Encodings of the OIDs seen so far: the engine encodes the same few dozen on every
 * certificate. Bounded (the oldest evicted first), since request fields (other SANs, policy
 * OIDs) can name any OID; the arrays handed out are shared, and no caller writes into a DER
 * value it did not build.
 */
const OID_CACHE = new BoundedCache<Uint8Array<ArrayBuffer>>("pki.oidEncodings", 512);

export function oid(dotted: string): Uint8Array<ArrayBuffer> {
  const hit = OID_CACHE.get(dotted);
  if (hit) return hit;
  const der = encodeOid(dotted);
  OID_CACHE.set(dotted, der);
  return der;
}

function encodeOid(dotted: string): Uint8Array<ArrayBuffer> {
  const parts = dotted.split(".").map((p) => Number(p));
  if (parts.length < 2 || parts.some((p) => !Number.isInteger(p) || p < 0)) throw new DerError(`invalid OID ${dotted}`);
  const out: number[] = [(parts[0] ?? 0) * 40 + (parts[1] ?? 0)];
  for (const p of parts.slice(2)) {
    const chunk: number[] = [p & 0x7f];
    let v = Math.floor(p / 128);
    while (v > 0) {
      chunk.unshift((v & 0x7f) | 0x80);
      v = Math.floor(v / 128);
    }
    out.push(...chunk);
  }
  return tlv(TAG.OID, Uint8Array.from(out));
}

export function isValidOid(dotted: string): boolean {
  return /^[0-2](\.(0|[1-9]\d*))+$/.test(dotted) && dotted.split(".").length >= 2;
}

export function decodeOid(content: Uint8Array): string {
  if (content.length === 0) throw new DerError("empty OID");
  const first = content[0] ?? 0;
  const parts = [Math.min(2, Math.floor(first / 40)), first - Math.min(2, Math.floor(first / 40)) * 40];
  let v = 0;
  for (let i = 1; i < content.length; i++) {
    const b = content[i] ?? 0;
    v = v * 128 + (b & 0x7f);
    if (!(b & 0x80)) {
      parts.push(v);
      v = 0;
    }
  }
  return parts.join(".");
}

/** A parsed TLV: tag byte, content, and the whole encoding. */
export interface Node {
  tag: number;
  content: Uint8Array<ArrayBuffer>;
  raw: Uint8Array<ArrayBuffer>;
}

/** Reads one TLV at `offset`; returns it and the offset after it. */
export function readNode(buf: Uint8Array<ArrayBuffer>, offset = 0): { node: Node; next: number } {
  if (offset + 2 > buf.length) throw new DerError("truncated DER");
  const tag = buf[offset] ?? 0;
  if ((tag & 0x1f) === 0x1f) throw new DerError("multi-byte tags are not supported");
  let len = buf[offset + 1] ?? 0;
  let pos = offset + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4) throw new DerError("unsupported DER length");
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + (buf[pos + i] ?? 0);
    pos += n;
  }
  if (pos + len > buf.length) throw new DerError("truncated DER");
  return {
    node: { tag, content: buf.subarray(pos, pos + len), raw: buf.subarray(offset, pos + len) },
    next: pos + len,
  };
}

export function parse(buf: Uint8Array<ArrayBuffer>): Node {
  const { node, next } = readNode(buf);
  if (next !== buf.length) throw new DerError("trailing data after DER value");
  return node;
}

/** Children of a constructed node. */
export function children(node: Node): Node[] {
  const out: Node[] = [];
  let off = 0;
  while (off < node.content.length) {
    const { node: child, next } = readNode(node.content, off);
    out.push(child);
    off = next;
  }
  return out;
}

export function expectTag(node: Node | undefined, tag: number, what: string): Node {
  if (!node || node.tag !== tag) throw new DerError(`malformed ${what}`);
  return node;
}
