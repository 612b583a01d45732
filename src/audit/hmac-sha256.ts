/**
 * HMAC-SHA256 (RFC 2104 over FIPS 180-4's SHA-256), synchronous, for the audit trail's many short
 * values. Each device's key is absorbed once (`hmacKey`: the inner and outer pads' states after
 * their first block), so a value up to 55 bytes costs two compressions.
 *
 * Why not WebCrypto: `crypto.subtle.sign` costs ~7–9 µs per call in workerd whatever the length
 * up to 1 KB, plus a promise each, and an audited KV read HMACs three or four short values
 * (docs/audit.md "What it costs"). Why not `@noble/hashes`' `hmac`: its per-value clone of the
 * keyed object costs ~5–6 µs for a 12-byte value under V8, this ~1.7 µs (8 µs for 1 KB, where
 * WebCrypto is about as fast). Checked against node:crypto in test/unit/audit-hmac-sha256.test.ts.
 *
 * No table is indexed by key or message bytes and no branch depends on them, so the time taken
 * depends only on the lengths.
 */
import { bytesToHex } from "../core/encoding";

/** FIPS 180-4 §4.2.2: the first 32 bits of the fractional parts of the cube roots of the first 64 primes. */
const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

/** FIPS 180-4 §5.3.3: the initial hash value. */
const IV = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);

const BLOCK = 64;

// Scratch space, reused: JavaScript runs one call at a time in an isolate and nothing here awaits.
const W = new Int32Array(64);
const tail = new Uint8Array(2 * BLOCK);
const innerDigest = new Uint8Array(32);
const digest = new Uint8Array(32);
const state = new Int32Array(8);

const rotr = (x: number, n: number): number => (x >>> n) | (x << (32 - n));

/** FIPS 180-4 §6.2.2: one 64-byte block at `off` of `bytes` into `st`. */
function compress(st: Int32Array, bytes: Uint8Array, off: number): void {
  for (let i = 0; i < 16; i++) {
    const j = off + 4 * i;
    W[i] = ((bytes[j] as number) << 24) | ((bytes[j + 1] as number) << 16) | ((bytes[j + 2] as number) << 8) | (bytes[j + 3] as number);
  }
  for (let i = 16; i < 64; i++) {
    const x = W[i - 15] as number;
    const y = W[i - 2] as number;
    const s0 = rotr(x, 7) ^ rotr(x, 18) ^ (x >>> 3);
    const s1 = rotr(y, 17) ^ rotr(y, 19) ^ (y >>> 10);
    W[i] = ((W[i - 16] as number) + s0 + (W[i - 7] as number) + s1) | 0;
  }
  let a = st[0] as number, b = st[1] as number, c = st[2] as number, d = st[3] as number;
  let e = st[4] as number, f = st[5] as number, g = st[6] as number, h = st[7] as number;
  for (let i = 0; i < 64; i++) {
    const t1 = (h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + (K[i] as number) + (W[i] as number)) | 0;
    const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
    h = g;
    g = f;
    f = e;
    e = (d + t1) | 0;
    d = c;
    c = b;
    b = a;
    a = (t1 + t2) | 0;
  }
  st[0] = ((st[0] as number) + a) | 0;
  st[1] = ((st[1] as number) + b) | 0;
  st[2] = ((st[2] as number) + c) | 0;
  st[3] = ((st[3] as number) + d) | 0;
  st[4] = ((st[4] as number) + e) | 0;
  st[5] = ((st[5] as number) + f) | 0;
  st[6] = ((st[6] as number) + g) | 0;
  st[7] = ((st[7] as number) + h) | 0;
}

/** Absorbs `msg` into `st`, which has taken `prior` bytes already, and pads (FIPS 180-4 §5.1.1). */
function finish(st: Int32Array, msg: Uint8Array, prior: number): void {
  let off = 0;
  for (; off + BLOCK <= msg.length; off += BLOCK) compress(st, msg, off);
  const rest = msg.length - off;
  tail.fill(0);
  tail.set(msg.subarray(off), 0);
  tail[rest] = 0x80;
  const end = rest < BLOCK - 8 ? BLOCK : 2 * BLOCK;
  // The length in bits as a 64-bit big-endian number (exact: a message here is far below 2^53 bits).
  const bits = (prior + msg.length) * 8;
  const hi = Math.floor(bits / 0x1_0000_0000);
  const lo = bits >>> 0;
  for (let i = 0; i < 4; i++) {
    tail[end - 8 + i] = hi >>> (24 - 8 * i);
    tail[end - 4 + i] = lo >>> (24 - 8 * i);
  }
  compress(st, tail, 0);
  if (end > BLOCK) compress(st, tail, BLOCK);
}

function toBytes(st: Int32Array, out: Uint8Array): Uint8Array {
  for (let i = 0; i < 8; i++) {
    const v = st[i] as number;
    out[4 * i] = v >>> 24;
    out[4 * i + 1] = v >>> 16;
    out[4 * i + 2] = v >>> 8;
    out[4 * i + 3] = v;
  }
  return out;
}

/** A key absorbed: the states after the inner (ipad) and outer (opad) key blocks. */
export interface HmacKey {
  readonly inner: Int32Array;
  readonly outer: Int32Array;
}

/** RFC 2104 §2: a key longer than a block is hashed first; the pads are the key XOR 0x36 / 0x5c. */
export function hmacKey(key: Uint8Array): HmacKey {
  const k = new Uint8Array(BLOCK);
  if (key.length > BLOCK) {
    const st = IV.slice();
    finish(st, key, 0);
    k.set(toBytes(st, new Uint8Array(32)));
  } else k.set(key);
  const pad = new Uint8Array(BLOCK);
  const inner = IV.slice();
  const outer = IV.slice();
  for (let i = 0; i < BLOCK; i++) pad[i] = (k[i] as number) ^ 0x36;
  compress(inner, pad, 0);
  for (let i = 0; i < BLOCK; i++) pad[i] = (k[i] as number) ^ 0x5c;
  compress(outer, pad, 0);
  return { inner, outer };
}

/** HMAC-SHA256(key, msg) as 64 lower-case hex digits. */
export function hmacSha256Hex(key: HmacKey, msg: Uint8Array): string {
  state.set(key.inner);
  finish(state, msg, BLOCK);
  toBytes(state, innerDigest);
  state.set(key.outer);
  finish(state, innerDigest, BLOCK);
  return bytesToHex(toBytes(state, digest));
}
