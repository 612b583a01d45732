/**
 * The one module for byte encodings (no Node Buffer in Workers without nodejs_compat): hex,
 * base64 and base64url, SHA-256 digests, PEM armor (RFC 7468), and the byte concatenation and
 * DER TLV framing that the PKI's DER writer (engines/pki/x509/der.ts) builds on. Every engine
 * uses these; do not write another.
 */

/** The parts one after the other in one new buffer. */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array<ArrayBuffer> {
  let size = 0;
  for (const p of parts) size += p.length;
  const out = new Uint8Array(size);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

/** DER length octets (X.690 §8.1.3, definite form). */
function derLengthBytes(len: number): number[] {
  if (len < 0x80) return [len];
  const out: number[] = [];
  let n = len;
  while (n > 0) {
    out.unshift(n & 0xff);
    n = Math.floor(n / 256);
  }
  return [0x80 | out.length, ...out];
}

/** "00"…"ff" by byte value: one lookup a byte instead of a number-to-string and a pad (every audit HMAC is 32 bytes of hex). */
const HEX_PAIRS = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/** One DER TLV with the given tag byte and content. */
export function derTlv(tag: number, content: Uint8Array): Uint8Array<ArrayBuffer> {
  return concatBytes([Uint8Array.from([tag, ...derLengthBytes(content.length)]), content]);
}

export function bytesToHex(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += HEX_PAIRS[b] as string;
  return s;
}

/** Bytes of an even-length hex string (either case); the caller has checked it is hex. */
export function hexToBytes(hex: string): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(hex.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

const B64 = new TextEncoder().encode("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");

/**
 * Standard base64, table-driven into one byte buffer: a 4 MB CRL takes a few milliseconds, where
 * String.fromCharCode + btoa took hundreds.
 */
export function bytesToBase64(der: Uint8Array): string {
  const out = new Uint8Array(Math.ceil(der.length / 3) * 4);
  let o = 0;
  let i = 0;
  for (; i + 2 < der.length; i += 3) {
    const v = ((der[i] ?? 0) << 16) | ((der[i + 1] ?? 0) << 8) | (der[i + 2] ?? 0);
    out[o++] = B64[v >> 18] ?? 0;
    out[o++] = B64[(v >> 12) & 63] ?? 0;
    out[o++] = B64[(v >> 6) & 63] ?? 0;
    out[o++] = B64[v & 63] ?? 0;
  }
  const rest = der.length - i;
  if (rest > 0) {
    const v = ((der[i] ?? 0) << 16) | (rest === 2 ? (der[i + 1] ?? 0) << 8 : 0);
    out[o++] = B64[v >> 18] ?? 0;
    out[o++] = B64[(v >> 12) & 63] ?? 0;
    out[o++] = rest === 2 ? (B64[(v >> 6) & 63] ?? 0) : 61;
    out[o++] = 61; // '='
  }
  return new TextDecoder().decode(out);
}

const B64_VALUE = new Int16Array(256).fill(-1);
B64.forEach((c, i) => {
  B64_VALUE[c] = i;
});

/**
 * Strict, fast decoding of base64 this service wrote itself (stored CRLs, read on every CRL
 * request). Unlike base64ToBytes (atob), it allows no whitespace and throws on any other byte.
 */
export function base64ToBytesStrict(b64: string): Uint8Array<ArrayBuffer> {
  const text = new TextEncoder().encode(b64);
  let len = text.length;
  while (len > 0 && text[len - 1] === 61) len--;
  const out = new Uint8Array(Math.floor((len * 3) / 4));
  let o = 0;
  let acc = 0;
  let bits = 0;
  for (let i = 0; i < len; i++) {
    const v = B64_VALUE[text[i] ?? 0] ?? -1;
    if (v < 0) throw new Error("invalid base64");
    acc = ((acc << 6) | v) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 0xff;
    }
  }
  return out.subarray(0, o);
}

/** Forgiving base64 decoding (atob: whitespace and missing padding allowed); throws on bad input. */
export function base64ToBytes(b64: string): Uint8Array<ArrayBuffer> {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** base64url without padding (RFC 4648 §5), as JWTs use it. */
export function bytesToBase64Url(bytes: Uint8Array): string {
  return bytesToBase64(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/={1,2}$/, "");
}

/** Decodes base64url, padded or not (RFC 4648 §5); throws on bad input. */
export function base64UrlToBytes(b64url: string): Uint8Array<ArrayBuffer> {
  return base64ToBytes(b64url.replace(/-/g, "+").replace(/_/g, "/"));
}

/** Random identifier of `bytes` random bytes in hex. */
export function randomHex(bytes: number): string {
  return bytesToHex(crypto.getRandomValues(new Uint8Array(bytes)));
}

/** SHA-256 of bytes, or of a string's UTF-8 encoding. */
export async function sha256(data: string | Uint8Array<ArrayBuffer>): Promise<Uint8Array<ArrayBuffer>> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", typeof data === "string" ? new TextEncoder().encode(data) : data));
}

/** SHA-256 in lowercase hex, of bytes or of a string's UTF-8 encoding. */
export async function sha256Hex(data: string | Uint8Array<ArrayBuffer>): Promise<string> {
  return bytesToHex(await sha256(data));
}

/** Constant-time comparison of two strings (lengths are not secret here: both are hashes or tokens). */
export function timingSafeEqual(a: string, b: string): boolean {
  // UTF-16 code units, compared without encoding either string first: it runs on every request
  // (the root-token check), where two TextEncoder copies cost ~3% of an OCSP answer's CPU.
  // Equal code units are equal strings; the loop's length does not depend on where they differ.
  let diff = a.length ^ b.length;
  const n = Math.max(a.length, b.length);
  for (let i = 0; i < n; i++) diff |= (a.charCodeAt(i) | 0) ^ (b.charCodeAt(i) | 0);
  return diff === 0;
}

export interface PemBlock {
  label: string;
  der: Uint8Array<ArrayBuffer>;
}

export class PemError extends Error {}

/** Encodes DER as PEM with 64-character lines and no trailing newline. */
export function toPem(label: string, der: Uint8Array): string {
  const b64 = bytesToBase64(der);
  const lines: string[] = [];
  for (let i = 0; i < b64.length; i += 64) lines.push(b64.slice(i, i + 64));
  return `-----BEGIN ${label}-----\n${lines.join("\n")}\n-----END ${label}-----`;
}

const isLabelChar = (c: number): boolean => (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c === 0x20;

/** The label of an armor line `<prefix>LABEL-----` starting at `at` ([A-Z0-9 ]+), or null. */
function armorLabel(text: string, at: number, prefix: string): string | null {
  let end = at + prefix.length;
  while (end < text.length && isLabelChar(text.charCodeAt(end))) end++;
  if (end === at + prefix.length || !text.startsWith("-----", end)) return null;
  return text.slice(at + prefix.length, end);
}

/**
 * The armored blocks of a text in order, each body as written (text between blocks is skipped):
 * the matches of `/-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/g`, found in linear
 * time. That regex rescans the rest of the text from every BEGIN line that has no END, which is
 * quadratic (20,000 unclosed BEGIN lines took 5.6 s in V8). Here every END line is indexed once
 * by label, and each BEGIN takes the first END of its label after it.
 */
export function pemArmor(text: string): { label: string; body: string }[] {
  const ends = new Map<string, { at: number[]; next: number }>();
  for (let e = text.indexOf("-----END "); e >= 0; e = text.indexOf("-----END ", e + 1)) {
    const label = armorLabel(text, e, "-----END ");
    if (label === null) continue;
    const list = ends.get(label) ?? { at: [], next: 0 };
    list.at.push(e);
    ends.set(label, list);
  }
  const out: { label: string; body: string }[] = [];
  for (let b = text.indexOf("-----BEGIN "); b >= 0; ) {
    const label = armorLabel(text, b, "-----BEGIN ");
    const bodyStart = label === null ? -1 : b + "-----BEGIN ".length + label.length + 5;
    const list = label === null ? undefined : ends.get(label);
    // BEGIN lines are visited in ascending order, so each label's cursor only moves forward.
    while (list && (list.at[list.next] ?? Infinity) < bodyStart) list.next++;
    const end = list?.at[list.next];
    if (label === null || end === undefined) {
      b = text.indexOf("-----BEGIN ", b + 1);
      continue;
    }
    out.push({ label, body: text.slice(bodyStart, end) });
    b = text.indexOf("-----BEGIN ", end + "-----END ".length + label.length + 5);
  }
  return out;
}

/**
 * The DER of one PEM body: whitespace is dropped and the rest must be base64 (headers such as
 * Proc-Type are not supported); null when it is not, or when the body is empty.
 */
export function pemBodyBytes(body: string): Uint8Array<ArrayBuffer> | null {
  const b64 = body.replace(/\s+/g, "");
  if (b64.length === 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(b64)) return null;
  try {
    return base64ToBytes(b64);
  } catch {
    return null;
  }
}

/**
 * Decodes every PEM block in `text`, in order; text between blocks is tolerated. A block whose
 * body is not base64 throws PemError naming its position (OpenBao builtin/logical/pki/path_manage_issuers.go).
 */
export function decodePemBlocks(text: string): PemBlock[] {
  return pemArmor(text).map(({ label, body }, n) => {
    const der = pemBodyBytes(body);
    if (der === null) throw new PemError(`error when parsing block ${n}: invalid PEM data`);
    return { label, der };
  });
}

/**
 * The bytes of a BLOB as D1 hands it back (an ArrayBuffer, a typed array, or an array of
 * numbers, depending on the runtime and the read method); null for any other value.
 */
export function blobBytes(v: unknown): Uint8Array | null {
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  if (Array.isArray(v)) return Uint8Array.from(v as number[]);
  return null;
}
