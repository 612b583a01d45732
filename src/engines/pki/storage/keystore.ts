/**
 * Private keys at rest: sealed PKCS#8 (src/core/db/seal.ts), bound to the mount and key id, so a
 * sealed value copied to another row or mount does not open. Unsealed keys are never cached.
 */
import { loadConfig } from "../../../core/config";
import { seal, unseal } from "../../../core/db/seal";
import { base64ToBytes, bytesToBase64 } from "../../../core/encoding";
import type { KeyRow } from "./store";

const context = (mountId: string, keyId: string) => `pki-key:${mountId}:${keyId}`;

export async function sealPrivateKey(env: Env, mountId: string, keyId: string, pkcs8: Uint8Array): Promise<string> {
  return seal(loadConfig(env).seal, bytesToBase64(pkcs8), context(mountId, keyId));
}

export async function unsealPrivateKey(env: Env, key: KeyRow): Promise<Uint8Array<ArrayBuffer>> {
  return base64ToBytes(await unseal(loadConfig(env).seal, key.sealedPrivateKey, context(key.mountId, key.id)));
}
