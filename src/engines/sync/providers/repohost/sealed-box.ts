/**
 * libsodium's sealed box (`crypto_box_seal`, GitHub REST API, Actions secrets): an ephemeral X25519 key pair,
 * nonce = BLAKE2b-192(ephemeral pk ‖ recipient pk), XSalsa20-Poly1305 box, output
 * ephemeral pk ‖ ciphertext. Pure JS (tweetnacl, blakejs): WebCrypto has neither primitive.
 */
import { blake2b } from "blakejs";
import * as nacl from "tweetnacl";
import { concatBytes } from "../../../../core/encoding";

function nonceFor(ephemeralPk: Uint8Array, recipientPk: Uint8Array): Uint8Array {
  return blake2b(concatBytes([ephemeralPk, recipientPk]), undefined, nacl.box.nonceLength);
}

export function seal(message: Uint8Array, recipientPk: Uint8Array): Uint8Array {
  if (recipientPk.length !== nacl.box.publicKeyLength) throw new Error("the recipient public key must be 32 bytes");
  const eph = nacl.box.keyPair();
  const boxed = nacl.box(message, nonceFor(eph.publicKey, recipientPk), recipientPk, eph.secretKey);
  eph.secretKey.fill(0);
  return concatBytes([eph.publicKey, boxed]);
}

/** Opens a sealed box (used by the test fake, which holds the private key); null if invalid. */
export function openSealed(sealed: Uint8Array, recipientPk: Uint8Array, recipientSk: Uint8Array): Uint8Array | null {
  if (sealed.length < nacl.box.publicKeyLength + nacl.box.overheadLength) return null;
  const epk = sealed.subarray(0, nacl.box.publicKeyLength);
  return nacl.box.open(sealed.subarray(nacl.box.publicKeyLength), nonceFor(epk, recipientPk), epk, recipientSk);
}
