/** Byte encodings used across modules (no Node Buffer in Workers without nodejs_compat). */

export function bytesToHex(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += b.toString(16).padStart(2, "0");
  return s;
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

export function base64ToBytes(b64: string): Uint8Array<ArrayBuffer> {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function bytesToBase64Url(bytes: Uint8Array): string {
  return bytesToBase64(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** Random identifier of `bytes` random bytes in hex. */
export function randomHex(bytes: number): string {
  return bytesToHex(crypto.getRandomValues(new Uint8Array(bytes)));
}

export async function sha256Hex(text: string): Promise<string> {
  return bytesToHex(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text))));
}

/** Constant-time comparison of two strings (lengths are not secret here: both are hashes or tokens). */
export function timingSafeEqual(a: string, b: string): boolean {
  const ea = new TextEncoder().encode(a);
  const eb = new TextEncoder().encode(b);
  let diff = ea.length ^ eb.length;
  const n = Math.max(ea.length, eb.length);
  for (let i = 0; i < n; i++) diff |= (ea[i] ?? 0) ^ (eb[i] ?? 0);
  return diff === 0;
}
