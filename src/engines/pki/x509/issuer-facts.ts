/**
 * Facts of CA certificates that every issuance reads again (the DER and base64 of the issuer's
 * certificate, its key identifier for the AKI), cached per isolate by the certificate's PEM
 * text. A certificate is immutable data, so the text is its own version: an issuer whose
 * certificate changes has a new text and a new entry; nothing needs invalidating, and no
 * entry can outlive what it describes in a way a reader could see.
 *
 * Invariants: a `BoundedCache` of at most 256 entries, the oldest evicted first (a flood of
 * distinct certificates costs recomputation, never memory); values, never promises (workerd ties
 * promises to the request that made them); the arrays handed out are shared and must not be
 * written to (every caller copies them into new DER).
 */
import { BoundedCache } from "../../../core/bounded-cache";
import { base64ToBytes, bytesToBase64 } from "../../../core/encoding";
import { publicKeyFacts } from "./asn1";
import { subjectKeyIdOf } from "./resign";

interface Entry {
  der: Uint8Array<ArrayBuffer>;
  base64: string;
  /** Filled on first use by issuerKeyIdOf, with the public key it was computed from. */
  keyId?: { publicKeyB64: string; id: Uint8Array<ArrayBuffer> };
}

const byPem = new BoundedCache<Entry>("pki.issuerFacts", 256);

function entryOf(pem: string): Entry {
  const hit = byPem.get(pem);
  if (hit) return hit;
  // The body of every armor block, as the issuer rows store one certificate per PEM.
  const der = base64ToBytes(pem.replace(/-----[A-Z ]+-----/g, "").replace(/\s+/g, ""));
  const entry: Entry = { der, base64: bytesToBase64(der) };
  byPem.set(pem, entry);
  return entry;
}

/** The DER of a stored CA certificate (its normalised PEM text). */
export function caCertDer(pem: string): Uint8Array<ArrayBuffer> {
  return entryOf(pem).der;
}

/** The base64 DER of a stored CA certificate: what format=der answers for it. */
export function caCertBase64(pem: string): string {
  return entryOf(pem).base64;
}

/**
 * The key identifier certificates signed by this CA name in their AKI: the CA's own SKI
 * extension (an imported CA may have made it another way than RFC 5280 §4.2.1.2 method 1, and
 * OpenSSL matches AKI to SKI byte for byte), else method 1 over `publicKeyB64` (base64 SPKI).
 */
export async function issuerKeyIdOf(pem: string, publicKeyB64: string): Promise<Uint8Array<ArrayBuffer>> {
  const entry = entryOf(pem);
  if (entry.keyId?.publicKeyB64 === publicKeyB64) return entry.keyId.id;
  const keyId = subjectKeyIdOf(entry.der) ?? (await publicKeyFacts(base64ToBytes(publicKeyB64))).ski;
  entry.keyId = { publicKeyB64, id: keyId }; // one key per certificate in practice
  return keyId;
}
