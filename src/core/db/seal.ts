/**
 * The seal: AES-256-GCM encryption of sensitive values before they reach D1 (KV secret data,
 * private keys, destination credentials). Each sealed value records the id of the key that
 * sealed it (`v1:<kid>:<base64(iv ‖ ciphertext)>`), so SEAL_KEY can be rotated: put the old key
 * in SEAL_KEYS_PREVIOUS (comma-separated) and new writes use the new key while old rows still
 * open. The caller's context string is bound in as additional authenticated data, so a sealed
 * value copied to another row does not open there.
 */
import { BoundedCache } from "../bounded-cache";
import { base64ToBytes, bytesToBase64, concatBytes, sha256Hex } from "../encoding";

export interface SealKeys {
  current: string;
  previous?: string;
}

interface LoadedKey {
  id: string;
  key: CryptoKey;
}

// Imported keys are derived purely from the key text, so caching them per isolate is safe. The
// current key and the previous ones are a handful; the bound only guards against a churn of them.
const keyCache = new BoundedCache<LoadedKey>("core.sealKeys", 16);

async function loadKey(b64: string): Promise<LoadedKey> {
  const hit = keyCache.get(b64);
  if (hit) return hit;
  const raw = base64ToBytes(b64.trim());
  if (raw.length !== 32) throw new Error("SEAL_KEY must be base64 of exactly 32 bytes");
  const key = await crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
  const loaded = { id: (await sha256Hex(raw)).slice(0, 8), key };
  keyCache.set(b64, loaded);
  return loaded;
}

/** Whether a SEAL_KEY value is usable (base64 of 32 bytes). */
export function isValidSealKey(b64: string | undefined): boolean {
  if (!b64) return false;
  try {
    return base64ToBytes(b64.trim()).length === 32;
  } catch {
    return false;
  }
}

/** The id of the current key, as recorded in sealed values. */
export async function currentKeyId(keys: SealKeys): Promise<string> {
  return (await loadKey(keys.current)).id;
}

export async function seal(keys: SealKeys, plaintext: string, context: string): Promise<string> {
  const { id, key } = await loadKey(keys.current);
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const ct = new Uint8Array(
    await crypto.subtle.encrypt(
      { name: "AES-GCM", iv, additionalData: new TextEncoder().encode(context) },
      key,
      new TextEncoder().encode(plaintext),
    ),
  );
  return `v1:${id}:${bytesToBase64(concatBytes([iv, ct]))}`;
}

export async function unseal(keys: SealKeys, sealed: string, context: string): Promise<string> {
  const [version, kid, body] = sealed.split(":");
  if (version !== "v1" || !kid || !body) throw new Error("sealed value has an unknown format");
  const candidates = [keys.current, ...(keys.previous ?? "").split(",")].filter((k) => k.trim() !== "");
  for (const candidate of candidates) {
    const { id, key } = await loadKey(candidate);
    if (id !== kid) continue;
    const bytes = base64ToBytes(body);
    const pt = await crypto.subtle.decrypt(
      { name: "AES-GCM", iv: bytes.slice(0, 12), additionalData: new TextEncoder().encode(context) },
      key,
      bytes.slice(12),
    );
    return new TextDecoder().decode(pt);
  }
  throw new Error(`no seal key with id ${kid} is configured (was SEAL_KEY rotated without SEAL_KEYS_PREVIOUS?)`);
}
