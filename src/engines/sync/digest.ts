/**
 * What Lanyard last wrote to an external secret, without keeping the value (docs/secrets-sync.md "3. Drift is detected and repaired"):
 * HMAC-SHA256 of the value under a key derived from the seal key (SHA-256 of a label and the
 * key's bytes), bound to the destination and the external name. A plain hash of a short secret
 * could be guessed from a copy of D1; the HMAC cannot without SEAL_KEY. The digest records the
 * seal key's id ("<kid>:<hex>"), so a digest made before a key rotation is checked with the
 * previous key (SEAL_KEYS_PREVIOUS) instead of reading as drift.
 */
import { base64ToBytes, bytesToHex, concatBytes, sha256, sha256Hex, timingSafeEqual } from "../../core/encoding";
import type { SealKeys } from "../../core/db/seal";
import { BoundedCache } from "../../core/bounded-cache";

const LABEL = new TextEncoder().encode("lanyard-sync-value-digest\u0000");
/** Derived keys by seal key text (a pure function of it); the current and previous keys are a handful. */
const cache = new BoundedCache<{ id: string; key: CryptoKey }>("sync.digestKeys", 16);

async function hmacKey(b64: string): Promise<{ id: string; key: CryptoKey }> {
  const hit = cache.get(b64);
  if (hit) return hit;
  const raw = base64ToBytes(b64.trim());
  // The same id the seal records (src/core/db/seal.ts): the first 8 hex digits of SHA-256(key).
  const id = (await sha256Hex(raw)).slice(0, 8);
  const derived = await sha256(concatBytes([LABEL, raw]));
  const loaded = { id, key: await crypto.subtle.importKey("raw", derived, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]) };
  cache.set(b64, loaded);
  return loaded;
}

async function mac(key: CryptoKey, context: string, value: string): Promise<string> {
  const data = new TextEncoder().encode(`${context}\u0000${value}`);
  return bytesToHex(new Uint8Array(await crypto.subtle.sign("HMAC", key, data)));
}

/** `context` names where the value went, e.g. `${namespaceId}/${type}/${name}/${externalName}`. */
export async function valueDigest(keys: SealKeys, context: string, value: string): Promise<string> {
  const { id, key } = await hmacKey(keys.current);
  return `${id}:${await mac(key, context, value)}`;
}

/** Whether `value` is what a stored digest was made of (with whichever seal key made it). */
export async function digestMatches(keys: SealKeys, stored: string, context: string, value: string): Promise<boolean> {
  const [kid, hex] = stored.split(":");
  if (!kid || !hex) return false;
  for (const candidate of [keys.current, ...(keys.previous ?? "").split(",")].filter((k) => k.trim() !== "")) {
    const { id, key } = await hmacKey(candidate);
    if (id === kid) return timingSafeEqual(await mac(key, context, value), hex);
  }
  return false;
}

/** The digest context of one external secret of a destination. */
export function digestContext(k: { namespaceId: string; type: string; name: string }, externalName: string): string {
  return `${k.namespaceId}/${k.type}/${k.name}/${externalName}`;
}
