/** Key types, sizes and signature sizes (key_type, key_bits, signature_bits of Vault API /pki/roles/:name). Pure functions. */
import { badRequest } from "../../../core/errors";

export type RoleKeyType = "rsa" | "ec" | "ed25519" | "any";

export interface KeySpec {
  keyType: RoleKeyType;
  keyBits: number;
  signatureBits: number;
}

/**
 * Validates and normalises key_type / key_bits / signature_bits: `0` bits means the type's
 * default; upstream's error messages are kept. `forGeneration` refuses what cannot be generated
 * (type "any"). Every listed EC size works: P-224, which WebCrypto lacks, is done in software
 * (p224.ts).
 */
export function validateKeySpec(keyType: string, keyBits: number, signatureBits: number, forGeneration = false): KeySpec {
  let bits = keyBits;
  let sigBits = signatureBits;
  switch (keyType) {
    case "rsa":
      if (bits === 0) bits = 2048;
      if (bits < 2048) throw badRequest(`key_bits: RSA keys < 2048 bits are unsafe and not supported: got ${bits}`);
      if (![2048, 3072, 4096, 8192].includes(bits)) throw badRequest(`key_bits: unsupported bit length for RSA key: ${bits}`);
      if (sigBits === 0) sigBits = 256;
      if (![256, 384, 512].includes(sigBits)) throw badRequest(`signature_bits: unsupported hash signature algorithm: ${sigBits}`);
      break;
    case "ec":
      if (bits === 0) bits = 256;
      if (![224, 256, 384, 521].includes(bits)) throw badRequest(`key_bits: unsupported bit length for EC key: ${bits}`);
      sigBits = 0;
      break;
    case "ed25519":
      bits = 0;
      sigBits = 0;
      break;
    case "any":
      bits = 0;
      sigBits = 0;
      if (forGeneration) throw badRequest(`key_type: a key of type "any" cannot be generated; choose rsa, ec or ed25519`);
      break;
    default:
      throw badRequest(`key_type: unknown key type ${keyType}`);
  }
  return { keyType: keyType as RoleKeyType, keyBits: bits, signatureBits: sigBits };
}

/**
 * The largest RSA modulus workerd's WebCrypto (BoringSSL) imports: a bigger key fails there as
 * "Invalid SPKI input" / "Invalid PKCS8 input", which would reach clients as a bad signature or
 * an unparsable key. Generation is limited further, to the sizes validateKeySpec lists.
 */
export const MAX_RSA_BITS = 8192;

/**
 * Why a key read from a request cannot be used, or null when it can: checked on the key's DER
 * before any WebCrypto import, so the client learns the real reason. Other types have no size
 * of their own (an unknown EC curve fails earlier, when the key is parsed).
 */
export function unsupportedKeySize(key: { type: string; bits: number }): string | null {
  if (key.type === "rsa" && key.bits > MAX_RSA_BITS) return `unsupported key size: RSA ${key.bits} bits (supported: up to ${MAX_RSA_BITS} bits)`;
  return null;
}

/** unsupportedKeySize as a 400 naming the request field the key came from. */
export function checkKeySize(field: string, key: { type: string; bits: number }): void {
  const problem = unsupportedKeySize(key);
  if (problem) throw badRequest(`${field}: ${problem}`);
}
