/** PEM (RFC 7468) encoding and decoding, and the hex renderings of serials and key ids. */
import { base64ToBytes, bytesToBase64 } from "../../../core/encoding";

export interface PemBlock {
  label: string;
  der: Uint8Array<ArrayBuffer>;
}

/** Encodes DER as PEM with 64-character lines and no trailing newline. */
export function toPem(label: string, der: Uint8Array): string {
  const b64 = bytesToBase64(der);
  const lines: string[] = [];
  for (let i = 0; i < b64.length; i += 64) lines.push(b64.slice(i, i + 64));
  return `-----BEGIN ${label}-----\n${lines.join("\n")}\n-----END ${label}-----`;
}

export class PemError extends Error {}

/**
 * Decodes every PEM block in `text`, in order; text between blocks is tolerated. A block whose
 * body is not base64 throws PemError naming its position (pki-engine.md §4.4 step 3).
 */
export function decodePemBlocks(text: string): PemBlock[] {
  const out: PemBlock[] = [];
  const re = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/g;
  let m: RegExpExecArray | null;
  let n = 0;
  while ((m = re.exec(text)) !== null) {
    const body = (m[2] ?? "").replace(/\s+/g, "");
    // Headers such as Proc-Type are not supported: the body must be pure base64.
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(body) || body.length === 0) throw new PemError(`error when parsing block ${n}: invalid PEM data`);
    try {
      out.push({ label: m[1] ?? "", der: base64ToBytes(body) });
    } catch {
      throw new PemError(`error when parsing block ${n}: invalid PEM data`);
    }
    n++;
  }
  return out;
}

/** Colon-separated lowercase hex (pki-engine.md §1.7). */
export function colonHex(hex: string): string {
  const h = hex.length % 2 ? `0${hex}` : hex;
  return (h.match(/../g) ?? []).join(":").toLowerCase();
}

export function bytesColonHex(b: Uint8Array): string {
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join(":");
}

/**
 * Normalises a serial given by a client ("AB:CD", "ab-cd", "abcd") to colon hex, or null when
 * it is not hex.
 */
export function normalizeSerial(input: string): string | null {
  const s = input.trim().toLowerCase();
  if (!/^[0-9a-f]+([:-][0-9a-f]+)*$/.test(s)) return null;
  if (/[:-]/.test(s)) return s.replace(/-/g, ":");
  return colonHex(s);
}
