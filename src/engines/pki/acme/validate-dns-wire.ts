/**
 * The DNS wire format (RFC 1035 §4), as much as ACME validation needs: a query with one
 * question, and a response's answers (TXT for dns-01; A/AAAA/CNAME to reach an http-01 host
 * through the configured resolver), with name compression pointers (§4.1.4). Also the length
 * prefix of DNS over TCP (§4.2.2). Written here because the Workers runtime has no resolver API:
 * dns-01 talks to a resolver itself, over TCP or DNS over HTTPS (RFC 8484), which carry the same
 * message. Every read is bounds-checked; malformed input throws DnsWireError, never loops.
 */
import { formatIp } from "../../../core/ip";

export class DnsWireError extends Error {}

export const DNS_TYPE = { A: 1, CNAME: 5, TXT: 16, AAAA: 28 } as const;
export const DNS_CLASS_IN = 1;

/** Response codes (RFC 1035 §4.1.1, RFC 6895 §2.3) by name, for messages. */
const RCODE_NAMES: Record<number, string> = { 0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED" };

export function rcodeName(rcode: number): string {
  return RCODE_NAMES[rcode] ?? `RCODE ${rcode}`;
}

export interface DnsQuestion {
  name: string;
  type: number;
  class: number;
}

export interface DnsRecord {
  name: string;
  type: number;
  class: number;
  ttl: number;
  rdata: Uint8Array;
}

export interface DnsMessage {
  id: number;
  /** QR: a response, not a query. */
  response: boolean;
  opcode: number;
  /** TC: the message was truncated (only UDP truncates; over TCP and DoH it is an error). */
  truncated: boolean;
  recursionDesired: boolean;
  rcode: number;
  questions: DnsQuestion[];
  answers: DnsRecord[];
}

/** The labels of a name (a trailing dot, the root, ignored); throws when a label or the name is too long. */
function labelsOf(name: string): Uint8Array[] {
  const trimmed = name.endsWith(".") ? name.slice(0, -1) : name;
  if (trimmed === "") return [];
  const labels = trimmed.split(".").map((l) => new TextEncoder().encode(l));
  let wire = 1;
  for (const l of labels) {
    if (l.length === 0) throw new DnsWireError(`empty label in "${name}"`);
    if (l.length > 63) throw new DnsWireError(`label longer than 63 octets in "${name}"`);
    wire += l.length + 1;
  }
  if (wire > 255) throw new DnsWireError(`name longer than 255 octets: "${name}"`);
  return labels;
}

class Writer {
  private readonly bytes: number[] = [];
  u8(v: number): void {
    this.bytes.push(v & 0xff);
  }
  u16(v: number): void {
    this.bytes.push((v >> 8) & 0xff, v & 0xff);
  }
  u32(v: number): void {
    this.u16(Math.floor(v / 0x10000) & 0xffff);
    this.u16(v & 0xffff);
  }
  raw(b: Uint8Array): void {
    for (const x of b) this.bytes.push(x);
  }
  /** A name, uncompressed (compression is optional for a writer, RFC 1035 §4.1.4). */
  name(n: string): void {
    for (const l of labelsOf(n)) {
      this.u8(l.length);
      this.raw(l);
    }
    this.u8(0);
  }
  done(): Uint8Array<ArrayBuffer> {
    return Uint8Array.from(this.bytes);
  }
}

/** Encodes a message (RFC 1035 §4.1). Queries use it with no answers; tests build responses with it. */
export function encodeDnsMessage(m: Partial<DnsMessage> & { id: number; questions: DnsQuestion[] }): Uint8Array<ArrayBuffer> {
  const w = new Writer();
  w.u16(m.id);
  const flags = (m.response ? 0x8000 : 0) | (((m.opcode ?? 0) & 0xf) << 11) | (m.truncated ? 0x0200 : 0) | ((m.recursionDesired ?? true) ? 0x0100 : 0) | (m.response ? 0x0080 : 0) | ((m.rcode ?? 0) & 0xf);
  w.u16(flags);
  const answers = m.answers ?? [];
  w.u16(m.questions.length);
  w.u16(answers.length);
  w.u16(0);
  w.u16(0);
  for (const q of m.questions) {
    w.name(q.name);
    w.u16(q.type);
    w.u16(q.class);
  }
  for (const a of answers) {
    w.name(a.name);
    w.u16(a.type);
    w.u16(a.class);
    w.u32(a.ttl);
    if (a.rdata.length > 0xffff) throw new DnsWireError("rdata longer than 65535 octets");
    w.u16(a.rdata.length);
    w.raw(a.rdata);
  }
  return w.done();
}

/** A query for one name and type, recursion desired. */
export function encodeDnsQuery(id: number, name: string, type: number): Uint8Array<ArrayBuffer> {
  return encodeDnsMessage({ id, recursionDesired: true, questions: [{ name, type, class: DNS_CLASS_IN }] });
}

/** TXT rdata (RFC 1035 §3.3.14): each string as <length><bytes>, split at 255 octets. */
export function encodeTxtRdata(strings: string[]): Uint8Array<ArrayBuffer> {
  const out: number[] = [];
  for (const s of strings) {
    const b = new TextEncoder().encode(s);
    if (b.length === 0) out.push(0);
    for (let i = 0; i < b.length; i += 255) {
      const part = b.subarray(i, i + 255);
      out.push(part.length, ...part);
    }
  }
  return Uint8Array.from(out);
}

/** A name as rdata (CNAME), uncompressed. */
export function encodeNameRdata(name: string): Uint8Array<ArrayBuffer> {
  const w = new Writer();
  w.name(name);
  return w.done();
}

class Reader {
  constructor(
    readonly buf: Uint8Array,
    public pos = 0,
  ) {}
  need(n: number): void {
    if (this.pos + n > this.buf.length) throw new DnsWireError(`message truncated at offset ${this.pos}`);
  }
  u8(): number {
    this.need(1);
    return this.buf[this.pos++] ?? 0;
  }
  u16(): number {
    return (this.u8() << 8) | this.u8();
  }
  u32(): number {
    return this.u16() * 0x10000 + this.u16();
  }
  bytes(n: number): Uint8Array {
    this.need(n);
    const b = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return b;
  }
}

/**
 * Reads a name at `start` of `buf`, following compression pointers (RFC 1035 §4.1.4). Every
 * pointer must point before the start of everything read so far (an encoder only points back at
 * names already written), so a name cannot loop; the result is lower-cased without the final dot.
 * Returns the name and the offset just after it where it started.
 */
export function readName(buf: Uint8Array, start: number): { name: string; next: number } {
  const labels: string[] = [];
  let pos = start;
  let lowest = start;
  let next = -1;
  let wire = 1;
  for (;;) {
    if (pos >= buf.length) throw new DnsWireError(`name runs past the message at offset ${pos}`);
    const len = buf[pos] ?? 0;
    if (len === 0) {
      if (next < 0) next = pos + 1;
      break;
    }
    if ((len & 0xc0) === 0xc0) {
      if (pos + 1 >= buf.length) throw new DnsWireError(`compression pointer runs past the message at offset ${pos}`);
      const target = ((len & 0x3f) << 8) | (buf[pos + 1] ?? 0);
      if (target >= lowest) throw new DnsWireError(`compression pointer at offset ${pos} does not point backwards`);
      if (next < 0) next = pos + 2;
      pos = target;
      lowest = target;
      continue;
    }
    if ((len & 0xc0) !== 0) throw new DnsWireError(`unsupported label type 0x${(len & 0xc0).toString(16)} at offset ${pos}`);
    if (pos + 1 + len > buf.length) throw new DnsWireError(`label runs past the message at offset ${pos}`);
    wire += len + 1;
    if (wire > 255) throw new DnsWireError("name longer than 255 octets");
    labels.push(new TextDecoder().decode(buf.subarray(pos + 1, pos + 1 + len)).toLowerCase());
    pos += 1 + len;
  }
  return { name: labels.join("."), next };
}

/** Decodes a message: header, questions and the answer section (authority and additional are not needed). */
export function decodeDnsMessage(buf: Uint8Array): DnsMessage {
  const r = new Reader(buf);
  if (buf.length < 12) throw new DnsWireError(`message shorter than its 12-octet header (${buf.length})`);
  const id = r.u16();
  const flags = r.u16();
  const qd = r.u16();
  const an = r.u16();
  r.u16();
  r.u16();
  const questions: DnsQuestion[] = [];
  for (let i = 0; i < qd; i++) {
    const { name, next } = readName(buf, r.pos);
    r.pos = next;
    questions.push({ name, type: r.u16(), class: r.u16() });
  }
  const answers: DnsRecord[] = [];
  for (let i = 0; i < an; i++) {
    const { name, next } = readName(buf, r.pos);
    r.pos = next;
    const type = r.u16();
    const cls = r.u16();
    const ttl = r.u32();
    const len = r.u16();
    const rdataStart = r.pos;
    const rdata = r.bytes(len);
    // A CNAME's target may itself be compressed: expand it against the whole message now.
    const expanded = type === DNS_TYPE.CNAME ? encodeNameRdata(readName(buf, rdataStart).name) : rdata;
    answers.push({ name, type, class: cls, ttl, rdata: expanded });
  }
  return {
    id,
    response: (flags & 0x8000) !== 0,
    opcode: (flags >> 11) & 0xf,
    truncated: (flags & 0x0200) !== 0,
    recursionDesired: (flags & 0x0100) !== 0,
    rcode: flags & 0xf,
    questions,
    answers,
  };
}

/**
 * A TXT record's strings joined into one value, as Go's net.LookupTXT (Vault's resolver) and
 * Let's Encrypt read them: a value longer than 255 octets arrives split in several strings.
 */
export function decodeTxtRdata(rdata: Uint8Array): string {
  const parts: Uint8Array[] = [];
  let pos = 0;
  while (pos < rdata.length) {
    const len = rdata[pos] ?? 0;
    if (pos + 1 + len > rdata.length) throw new DnsWireError("TXT string runs past its record");
    parts.push(rdata.subarray(pos + 1, pos + 1 + len));
    pos += 1 + len;
  }
  return parts.map((p) => new TextDecoder().decode(p)).join("");
}

/** An A or AAAA record's address in canonical text form (src/core/ip.ts). */
export function decodeAddressRdata(type: number, rdata: Uint8Array): string {
  if (type === DNS_TYPE.A) {
    if (rdata.length !== 4) throw new DnsWireError(`A record of ${rdata.length} octets`);
    return formatIp(rdata);
  }
  if (type === DNS_TYPE.AAAA) {
    if (rdata.length !== 16) throw new DnsWireError(`AAAA record of ${rdata.length} octets`);
    return formatIp(rdata);
  }
  throw new DnsWireError(`record type ${type} is not an address`);
}

const normal = (n: string): string => (n.endsWith(".") ? n.slice(0, -1) : n).toLowerCase();

/**
 * The answers of type `type` for `name`, following the CNAME chain the resolver put in the answer
 * section (a delegated `_acme-challenge` CNAME is common). At most 16 hops, so a CNAME loop ends.
 */
export function answersFor(msg: DnsMessage, name: string, type: number): DnsRecord[] {
  let owner = normal(name);
  const seen = new Set<string>();
  for (let hop = 0; hop < 16 && !seen.has(owner); hop++) {
    seen.add(owner);
    const direct = msg.answers.filter((a) => a.class === DNS_CLASS_IN && a.type === type && a.name === owner);
    if (direct.length > 0) return direct;
    const cname = msg.answers.find((a) => a.class === DNS_CLASS_IN && a.type === DNS_TYPE.CNAME && a.name === owner);
    if (!cname) return [];
    owner = readName(cname.rdata, 0).name;
  }
  return [];
}

/** DNS over TCP frames every message with a two-octet length (RFC 1035 §4.2.2). */
export function frameTcp(message: Uint8Array): Uint8Array<ArrayBuffer> {
  if (message.length > 0xffff) throw new DnsWireError("message longer than 65535 octets");
  const out = new Uint8Array(message.length + 2);
  out[0] = message.length >> 8;
  out[1] = message.length & 0xff;
  out.set(message, 2);
  return out;
}

/** The first framed message in `received`, or null while it is incomplete. */
export function unframeTcp(received: Uint8Array): Uint8Array | null {
  if (received.length < 2) return null;
  const len = ((received[0] ?? 0) << 8) | (received[1] ?? 0);
  if (received.length < 2 + len) return null;
  return received.subarray(2, 2 + len);
}
