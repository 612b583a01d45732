/**
 * The hex renderings of serials and key ids. PEM armor lives in core/encoding.ts (the one
 * implementation, shared with the sync engine's key parsing) and is re-exported here for PKI.
 */
import { bytesToHex } from "../../../core/encoding";

export { PemError, decodePemBlocks, toPem, type PemBlock } from "../../../core/encoding";

/** Colon-separated lowercase hex, as Vault writes serial_number. */
export function colonHex(hex: string): string {
  const h = hex.length % 2 ? `0${hex}` : hex;
  return (h.match(/../g) ?? []).join(":").toLowerCase();
}

export function bytesColonHex(b: Uint8Array): string {
  return colonHex(bytesToHex(b));
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
