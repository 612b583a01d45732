/**
 * The CRL as DER (RFC 5280 §5), hand-encoded: a pure builder with no I/O and no key handling.
 * crl-rebuild.ts feeds it revocations and signs the TBSCertList it returns.
 *
 * The revoked-certificate list is written entry by entry into fixed-size byte chunks
 * (`RevokedListWriter`) instead of one small array per entry: a 1,000,000-entry CRL is ≈ 27 MiB
 * of DER, and per-entry objects would cost several times that in heap (Workers allow 128 MB).
 * `signCertificateList` then lays the whole CRL out in one buffer and signs it there, so a build
 * holds the list about twice at most (chunks, then the CRL), never the four copies that framing
 * the list, the TBSCertList and the CertificateList separately would make.
 */
import { OID, akiExtension, distributionPointsExtension, type ExtensionDer } from "./asn1";
import { TAG, bitString, bool, concat, ctxCons, ctxPrim, int, nullValue, octets, oid, seq, time, uintBytes } from "./der";

/** RFC 5280 §5.2.3 CRL Number, §5.2.4 Delta CRL Indicator, §5.2.5 Issuing Distribution Point. */
export const CRL_OID = { crlNumber: "2.5.29.20", deltaCrlIndicator: "2.5.29.27", issuingDistributionPoint: "2.5.29.28" } as const;

/**
 * RFC 5280 §5.2.5, always critical: IssuingDistributionPoint ::= SEQUENCE { distributionPoint [0]
 * DistributionPointName (fullName [0] GeneralNames of URIs [6]), onlyContainsUserCerts [1] }.
 * Every URL goes into the one fullName, so a certificate naming any of them matches (RFC 5280
 * §6.3.3 (b)(2)(i): one name in common suffices).
 */
export function issuingDistributionPointExtension(urls: string[], onlyUserCerts: boolean): ExtensionDer {
  const parts: Uint8Array[] = [];
  if (urls.length > 0) parts.push(ctxCons(0, ctxCons(0, concat(urls.map((u) => ctxPrim(6, new TextEncoder().encode(u)))))));
  if (onlyUserCerts) parts.push(ctxPrim(1, Uint8Array.of(0xff)));
  return { oid: CRL_OID.issuingDistributionPoint, critical: true, value: seq(...parts) };
}

/** The signature algorithms an issuer's revocation_signature_algorithm can name (Vault API /pki/issuer/:issuer_ref). */
export type RevocationAlgorithm =
  | "SHA256WithRSA"
  | "SHA384WithRSA"
  | "SHA512WithRSA"
  | "ECDSAWithSHA256"
  | "ECDSAWithSHA384"
  | "ECDSAWithSHA512"
  | "SHA256WithRSAPSS"
  | "SHA384WithRSAPSS"
  | "SHA512WithRSAPSS"
  | "Ed25519";

export interface AlgorithmSpec {
  family: "rsa" | "rsa-pss" | "ec" | "ed25519";
  /** "SHA-256" etc.; "" for Ed25519. */
  hash: string;
}

export function algorithmSpec(name: RevocationAlgorithm): AlgorithmSpec {
  if (name === "Ed25519") return { family: "ed25519", hash: "" };
  const bits = /SHA(\d{3})/.exec(name)?.[1] ?? "256";
  const hash = `SHA-${bits}`;
  if (name.startsWith("ECDSA")) return { family: "ec", hash };
  return { family: name.endsWith("PSS") ? "rsa-pss" : "rsa", hash };
}

const HASH_OID: Record<string, string> = {
  "SHA-256": "2.16.840.1.101.3.4.2.1",
  "SHA-384": "2.16.840.1.101.3.4.2.2",
  "SHA-512": "2.16.840.1.101.3.4.2.3",
};

const SIG_OID: Record<string, string> = {
  "rsa/SHA-256": "1.2.840.113549.1.1.11",
  "rsa/SHA-384": "1.2.840.113549.1.1.12",
  "rsa/SHA-512": "1.2.840.113549.1.1.13",
  "ec/SHA-256": "1.2.840.10045.4.3.2",
  "ec/SHA-384": "1.2.840.10045.4.3.3",
  "ec/SHA-512": "1.2.840.10045.4.3.4",
};

/**
 * The signature AlgorithmIdentifier. RFC 4055 §5: PKCS#1 v1.5 carries NULL parameters; RFC 4055
 * §3.1: RSASSA-PSS carries its hash, MGF1 with the same hash and a salt as long as the hash;
 * RFC 5758 §3.2 and RFC 8410 §3: ECDSA and Ed25519 have no parameters.
 */
export function algorithmIdentifier(spec: AlgorithmSpec): Uint8Array<ArrayBuffer> {
  if (spec.family === "ed25519") return seq(oid(OID.ed25519));
  if (spec.family === "rsa-pss") {
    const hashOid = HASH_OID[spec.hash];
    if (!hashOid) throw new Error(`unsupported hash ${spec.hash}`);
    const hashAlg = seq(oid(hashOid), nullValue());
    const mgf = seq(oid("1.2.840.113549.1.1.8"), hashAlg);
    const salt = Number(spec.hash.slice(4)) / 8;
    return seq(oid("1.2.840.113549.1.1.10"), seq(ctxCons(0, hashAlg), ctxCons(1, mgf), ctxCons(2, int(salt))));
  }
  const id = SIG_OID[`${spec.family}/${spec.hash}`];
  if (!id) throw new Error(`unsupported signature algorithm ${spec.family}/${spec.hash}`);
  return spec.family === "rsa" ? seq(oid(id), nullValue()) : seq(oid(id));
}

/** WebCrypto's raw r‖s ECDSA signature → the DER Ecdsa-Sig-Value of RFC 3279 §2.2.3. */
export function ecdsaSignatureDer(raw: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> {
  const half = raw.length / 2;
  return seq(uintBytes(raw.subarray(0, half)), uintBytes(raw.subarray(half)));
}

/**
 * Appends DER bytes to a list of fixed-size chunks: growing never copies what is written (a
 * doubling buffer holds the old and the new copy at once: 48 MiB to grow a 27 MiB list), and the
 * unused tail is at most one chunk. Writers reserve the room of a whole entry first (`room`).
 */
class ChunkedBytes {
  private readonly full: Uint8Array<ArrayBuffer>[] = [];
  private cur: Uint8Array<ArrayBuffer> = new Uint8Array(0);
  private pos = 0;
  length = 0;

  constructor(private readonly chunkSize: number) {}

  /** Makes room for `n` ≤ chunkSize contiguous bytes; returns the chunk to write them into at `at()`. */
  room(n: number): Uint8Array<ArrayBuffer> {
    if (this.cur.length - this.pos < n) {
      if (this.pos > 0) this.full.push(this.cur.subarray(0, this.pos));
      // Chunks start small and double up to chunkSize, so the many tiny CRLs (deltas, small mounts) stay tiny.
      this.cur = new Uint8Array(Math.min(this.chunkSize, Math.max(256, this.length)));
      this.pos = 0;
    }
    return this.cur;
  }

  at(): number {
    return this.pos;
  }

  advance(n: number): void {
    this.pos += n;
    this.length += n;
  }

  /** Copies every byte written into `out` at `offset`; returns the offset after them. */
  copyTo(out: Uint8Array, offset: number): number {
    let o = offset;
    for (const c of this.full) {
      out.set(c, o);
      o += c.length;
    }
    out.set(this.cur.subarray(0, this.pos), o);
    return o + this.pos;
  }

  /** Drops the chunks (the bytes have been copied out). */
  clear(): void {
    this.full.length = 0;
    this.cur = new Uint8Array(0);
    this.pos = 0;
    this.length = 0;
  }
}

/** A DER definite-length header (X.690 §8.1.3) of `tag` over `len` content bytes; as `frame` writes it. */
function derHeader(tag: number, len: number): Uint8Array<ArrayBuffer> {
  const head = len < 0x80 ? 2 : len < 0x100 ? 3 : len < 0x10000 ? 4 : len < 0x1000000 ? 5 : 6;
  const out = new Uint8Array(head);
  out[0] = tag;
  if (head === 2) out[1] = len;
  else {
    out[1] = 0x80 | (head - 2);
    for (let i = head - 1, v = len; i >= 2; i--, v = Math.floor(v / 256)) out[i] = v & 0xff;
  }
  return out;
}

/** Value of one hex digit character code, or -1. */
function hexDigit(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}

/**
 * The revokedCertificates list (RFC 5280 §5.1.2.6): for each entry
 * `SEQUENCE { userCertificate INTEGER, revocationDate Time, crlEntryExtensions }`, the
 * extensions only for a revocation with a reason other than unspecified: the non-critical
 * reasonCode (RFC 5280 §5.3.1, which says to leave it out rather than write unspecified; Vault
 * writes none since it records none). Serials and times are written digit by digit into
 * the buffer: this loop is the CRL's hot path (100,000 entries per rebuild).
 */
/**
 * `Extensions ::= SEQUENCE { Extension { extnID id-ce-cRLReasons (2.5.29.21), extnValue OCTET
 * STRING { ENUMERATED reason } } }` (RFC 5280 §5.3.1), all but the reason's own octet.
 */
const REASON_EXTENSIONS_HEAD = new Uint8Array([0x30, 0x0c, 0x30, 0x0a, 0x06, 0x03, 0x55, 0x1d, 0x15, 0x04, 0x03, 0x0a, 0x01]);
const REASON_EXTENSIONS_LEN = REASON_EXTENSIONS_HEAD.length + 1;

/** The longest entry: SEQUENCE header 2, INTEGER 2 + 21, GeneralizedTime 17, reason extensions 14. */
const MAX_ENTRY = 56;

export class RevokedListWriter {
  /** 1 MiB chunks: a million entries (≈ 27 MiB) take 27 of them, and never a copy while growing. */
  private readonly out = new ChunkedBytes(1 << 20);
  private readonly serialBytes = new Uint8Array(20);
  private readonly timeBytes = new Uint8Array(17);
  private lastSecond = Number.NaN;
  private timeLen = 0;
  count = 0;

  /** `serial` is colon-separated (or plain) hex; `revokedAt` Unix seconds; `reason` a CRLReason (0: none written). */
  add(serial: string, revokedAt: number, reason = 0): void {
    const raw = this.serialBytes;
    // Parse from the end so an odd number of digits gets its implied leading zero.
    let n = 0;
    let nibble = 0;
    let acc = 0;
    for (let i = serial.length - 1; i >= 0; i--) {
      const c = serial.charCodeAt(i);
      if (c === 58) continue; // ':'
      const v = hexDigit(c);
      if (v < 0) throw new Error(`invalid serial ${serial}`);
      acc |= v << (4 * nibble);
      if (++nibble === 2) {
        if (n === 20) throw new Error(`serial ${serial} is longer than 20 octets`);
        raw[19 - n++] = acc;
        nibble = 0;
        acc = 0;
      }
    }
    if (nibble === 1) {
      if (n === 20) throw new Error(`serial ${serial} is longer than 20 octets`);
      raw[19 - n++] = acc;
    }
    if (n === 0) throw new Error(`invalid serial ${serial}`);
    // Minimal two's-complement encoding of a positive INTEGER (X.690 §8.3.2).
    let start = 20 - n;
    while (start < 19 && raw[start] === 0) start++;
    const pad = ((raw[start] ?? 0) & 0x80) !== 0 ? 1 : 0;
    const intLen = 20 - start + pad;
    if (revokedAt !== this.lastSecond) this.encodeTime(revokedAt);
    // Every entry is shorter than 128 bytes (INTEGER ≤ 21 octets, GeneralizedTime 17), so both
    // lengths fit the short form.
    const withReason = reason > 0 && reason <= 10 && reason !== 7;
    const chunk = this.out.room(MAX_ENTRY);
    let o = this.out.at();
    const begin = o;
    chunk[o++] = TAG.SEQUENCE;
    chunk[o++] = 2 + intLen + this.timeLen + (withReason ? REASON_EXTENSIONS_LEN : 0);
    chunk[o++] = TAG.INTEGER;
    chunk[o++] = intLen;
    if (pad) chunk[o++] = 0;
    chunk.set(raw.subarray(start, 20), o);
    o += 20 - start;
    chunk.set(this.timeBytes.subarray(0, this.timeLen), o);
    o += this.timeLen;
    if (withReason) {
      chunk.set(REASON_EXTENSIONS_HEAD, o);
      o += REASON_EXTENSIONS_HEAD.length;
      chunk[o++] = reason;
    }
    this.out.advance(o - begin);
    this.count++;
  }

  /** UTCTime through 2049, GeneralizedTime from 2050 (RFC 5280 §5.1.2.6 → §4.1.2.5), in seconds, Z. */
  private encodeTime(sec: number): void {
    this.lastSecond = sec;
    const d = new Date(sec * 1000);
    const y = d.getUTCFullYear();
    const t = this.timeBytes;
    let i = 0;
    const two = (v: number) => {
      t[i++] = 48 + Math.floor(v / 10);
      t[i++] = 48 + (v % 10);
    };
    const generalized = y >= 2050 || y < 1950;
    t[i++] = generalized ? TAG.GENERALIZED_TIME : TAG.UTC_TIME;
    t[i++] = generalized ? 15 : 13;
    if (generalized) two(Math.floor(y / 100));
    two(y % 100);
    two(d.getUTCMonth() + 1);
    two(d.getUTCDate());
    two(d.getUTCHours());
    two(d.getUTCMinutes());
    two(d.getUTCSeconds());
    t[i++] = 90; // 'Z'
    this.timeLen = i;
  }

  /** Bytes of the encoded SEQUENCE OF entries (header included); 0 when empty (then absent). */
  get encodedLength(): number {
    return this.count === 0 ? 0 : derHeader(TAG.SEQUENCE, this.out.length).length + this.out.length;
  }

  /** Writes the SEQUENCE OF entries into `out` at `offset` (nothing when empty); returns the offset after it. */
  writeTo(out: Uint8Array, offset: number): number {
    if (this.count === 0) return offset;
    const head = derHeader(TAG.SEQUENCE, this.out.length);
    out.set(head, offset);
    return this.out.copyTo(out, offset + head.length);
  }

  /** Frees the entries' bytes once they have been written out (the writer then reads as empty). */
  release(): void {
    this.out.clear();
    this.count = 0;
  }

  /** The encoded SEQUENCE OF entries, or null when empty (RFC 5280 §5.1.2.6: then absent). */
  finish(): Uint8Array<ArrayBuffer> | null {
    if (this.count === 0) return null;
    const out = new Uint8Array(this.encodedLength);
    this.writeTo(out, 0);
    return out;
  }
}

export interface TbsCertListParams {
  algorithm: AlgorithmSpec;
  /** DER of the issuer's subject Name. */
  issuer: Uint8Array<ArrayBuffer>;
  thisUpdate: Date;
  nextUpdate: Date;
  /** From RevokedListWriter.finish(). */
  revoked: Uint8Array<ArrayBuffer> | null;
  /** The issuer's Subject Key Identifier (AKI keyIdentifier, RFC 5280 §5.2.1). */
  authorityKeyId: Uint8Array;
  crlNumber: number;
  /** Set for a delta CRL: the number of the complete CRL it updates (RFC 5280 §5.2.4). */
  deltaOf?: number;
  /** Delta CRL URLs for the Freshest CRL extension of a complete CRL (RFC 5280 §5.2.6). */
  freshestCrlUrls?: string[];
  /** A CRL shard's scope (RFC 5280 §5.2.5); a delta repeats its complete CRL's (§5.2.4). */
  issuingDistributionPoint?: { urls: string[]; onlyUserCerts: boolean };
}

function extensionDer(e: ExtensionDer): Uint8Array<ArrayBuffer> {
  return e.critical ? seq(oid(e.oid), bool(true), octets(e.value)) : seq(oid(e.oid), octets(e.value));
}

/** The TBSCertList's fields before the revoked list, and its [0] extensions after it. */
function tbsParts(p: Omit<TbsCertListParams, "revoked">): { before: Uint8Array<ArrayBuffer>[]; extensions: Uint8Array<ArrayBuffer> } {
  const exts: ExtensionDer[] = [akiExtension(p.authorityKeyId), { oid: CRL_OID.crlNumber, critical: false, value: int(p.crlNumber) }];
  const idp = p.issuingDistributionPoint;
  if (idp) exts.push(issuingDistributionPointExtension(idp.urls, idp.onlyUserCerts));
  if (p.deltaOf !== undefined) {
    // RFC 5280 §5.2.4: the Delta CRL Indicator is critical.
    exts.push({ oid: CRL_OID.deltaCrlIndicator, critical: true, value: int(p.deltaOf) });
  } else if (p.freshestCrlUrls && p.freshestCrlUrls.length > 0) {
    const fresh = distributionPointsExtension(p.freshestCrlUrls, "delta");
    if (fresh) exts.push(fresh);
  }
  const before = [
    int(1), // v2 (RFC 5280 §5.1.2.1: required when extensions are present)
    algorithmIdentifier(p.algorithm),
    p.issuer,
    time(p.thisUpdate),
    time(p.nextUpdate),
  ];
  return { before, extensions: ctxCons(0, seq(...exts.map(extensionDer))) };
}

/** TBSCertList (RFC 5280 §5.1.2): version v2, with AKI, CRL Number and, as applicable, delta extensions. */
export function encodeTbsCertList(p: TbsCertListParams): Uint8Array<ArrayBuffer> {
  const { before, extensions } = tbsParts(p);
  return seq(...before, ...(p.revoked ? [p.revoked] : []), extensions);
}

/** Room kept after the TBSCertList for the AlgorithmIdentifier and the BIT STRING of the signature. */
const SIGNATURE_ROOM = 8 + 1024; // RSA-8192 signs 1,024 octets; ECDSA-P521 DER ≤ 139; Ed25519 64.

/**
 * The signed CertificateList (RFC 5280 §5.1.1) in one allocation, for CRLs of any size: the
 * TBSCertList is laid out once, with the entries copied straight from the writer (which is then
 * released), signed in place, and the signature written after it; the outer header goes in room
 * left before it. Byte for byte what assembleCertificateList(encodeTbsCertList(…)) gives, without
 * the three copies of the list those make (a million entries: ≈ 27 MiB each).
 */
export async function signCertificateList(
  p: Omit<TbsCertListParams, "revoked"> & { revoked: RevokedListWriter | null },
  sign: (tbs: Uint8Array<ArrayBuffer>) => Promise<Uint8Array<ArrayBuffer>>,
): Promise<Uint8Array<ArrayBuffer>> {
  const { before, extensions } = tbsParts(p);
  let content = (p.revoked?.encodedLength ?? 0) + extensions.length;
  for (const b of before) content += b.length;
  const tbsHead = derHeader(TAG.SEQUENCE, content);
  const tbsLen = tbsHead.length + content;
  const alg = algorithmIdentifier(p.algorithm);
  const lead = 6; // the longest outer SEQUENCE header (a length of up to 4 octets)
  const buf = new Uint8Array(lead + tbsLen + alg.length + SIGNATURE_ROOM);
  let o = lead;
  buf.set(tbsHead, o);
  o += tbsHead.length;
  for (const b of before) {
    buf.set(b, o);
    o += b.length;
  }
  if (p.revoked) {
    o = p.revoked.writeTo(buf, o);
    p.revoked.release();
  }
  buf.set(extensions, o);
  o += extensions.length;
  const sig = bitString(await sign(buf.subarray(lead, o)));
  if (alg.length + sig.length > alg.length + SIGNATURE_ROOM) throw new Error(`signature of ${sig.length} bytes does not fit the CRL's buffer`);
  buf.set(alg, o);
  o += alg.length;
  buf.set(sig, o);
  o += sig.length;
  const outer = derHeader(TAG.SEQUENCE, o - lead);
  buf.set(outer, lead - outer.length);
  return buf.subarray(lead - outer.length, o);
}

/** CertificateList (RFC 5280 §5.1.1) from a TBSCertList and its signature (ECDSA already DER). */
export function assembleCertificateList(tbs: Uint8Array<ArrayBuffer>, algorithm: AlgorithmSpec, signature: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> {
  return seq(tbs, algorithmIdentifier(algorithm), bitString(signature));
}

export { concat };
