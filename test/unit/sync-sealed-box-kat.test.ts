/**
 * Known-answer test of the repository host's sealed box (libsodium `crypto_box_seal`, reference
 * GitHub REST API, Actions secrets), independent of src/: the vectors below were made by libsodium itself (1.0.18, the
 * Debian libsodium23 library, called from Python ctypes):
 *   sk = bytes(1..32); crypto_scalarmult_base(pk, sk)
 *   crypto_box_seal(c, msg, len(msg), pk)          # and once with an empty message
 *   crypto_generichash(nonce, 24, c[0:32] || pk)    # the nonce libsodium derived
 *   crypto_box_seal_open(...) == msg                # checked there
 * The test opens them with tweetnacl and blakejs directly (its own few lines, not the module
 * under test), then checks that src's seal() produces boxes this independent opener accepts and
 * that src's openSealed() opens libsodium's box: so what the connector sends is what the host's
 * libsodium can open, without trusting the code that made it.
 */
import { blake2b } from "blakejs";
import * as nacl from "tweetnacl";
import { describe, expect, it } from "vitest";
import { openSealed, seal } from "../../src/engines/sync/providers/repohost/sealed-box";

const b64 = (s: string) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
const hex = (b: Uint8Array) => [...b].map((x) => x.toString(16).padStart(2, "0")).join("");

const VECTOR = {
  sk: b64("AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA="),
  pk: b64("B6N8vBQgk8i3VdwbEOhstCY3StFqqFPtC9/AsrhtHHw="),
  message: "lanyard sealed-box known answer: s3cr3t ✓",
  sealed: b64("JMNoxD+YxE0bGLmmR2xeQHIPhNxJUI0StYECBtJUFnhThUzOGdrlsNFr45W3uPzlad9RjY/Ql5gRRYXcKWLr9DWlHFDk676eueHhrp4P93jK3qzLjH6xcPhuWg=="),
  nonce: "a894eccc255439510c313f82a12a450e78acae7967182dad",
  sealedEmpty: b64("nD295BKcPVT3ZyaZElye9uekzKwYa9Ks05ZPfQrRciWj2JWb+MFv1nxLoZLeGbOL"),
};

/** crypto_box_seal_open, written out here: epk ‖ box, nonce = BLAKE2b-192(epk ‖ pk). */
function independentOpen(sealed: Uint8Array, pk: Uint8Array, sk: Uint8Array): Uint8Array | null {
  if (sealed.length < 32 + 16) return null;
  const epk = sealed.slice(0, 32);
  const input = new Uint8Array(64);
  input.set(epk);
  input.set(pk, 32);
  const nonce = blake2b(input, undefined, 24);
  return nacl.box.open(sealed.slice(32), nonce, epk, sk);
}

describe("repohost sealed box: libsodium known answers", () => {
  it("the recipient key pair matches libsodium's X25519 base-point multiplication", () => {
    expect(hex(nacl.box.keyPair.fromSecretKey(VECTOR.sk).publicKey)).toBe(hex(VECTOR.pk));
  });

  it("the nonce is libsodium's BLAKE2b-192 of ephemeral pk ‖ recipient pk", () => {
    const input = new Uint8Array(64);
    input.set(VECTOR.sealed.slice(0, 32));
    input.set(VECTOR.pk, 32);
    expect(hex(blake2b(input, undefined, 24))).toBe(VECTOR.nonce);
  });

  it("libsodium's boxes open with the independent opener, and not once tampered with", () => {
    const opened = independentOpen(VECTOR.sealed, VECTOR.pk, VECTOR.sk);
    expect(opened && new TextDecoder().decode(opened)).toBe(VECTOR.message);
    expect(independentOpen(VECTOR.sealedEmpty, VECTOR.pk, VECTOR.sk)).toEqual(new Uint8Array(0));
    for (const i of [0, 31, 32, 47, VECTOR.sealed.length - 1]) {
      const bad = VECTOR.sealed.slice();
      bad[i] = (bad[i] ?? 0) ^ 1;
      expect(independentOpen(bad, VECTOR.pk, VECTOR.sk), `byte ${i}`).toBeNull();
    }
    const other = nacl.box.keyPair();
    expect(independentOpen(VECTOR.sealed, other.publicKey, other.secretKey)).toBeNull();
  });

  it("src's seal() makes boxes of libsodium's shape that the independent opener accepts; src's openSealed() opens libsodium's", () => {
    const message = new TextEncoder().encode(VECTOR.message);
    const sealed = seal(message, VECTOR.pk);
    expect(sealed.length).toBe(32 + 16 + message.length);
    expect(independentOpen(sealed, VECTOR.pk, VECTOR.sk)).toEqual(message);
    // A fresh ephemeral key each time: two seals of one message differ.
    expect(hex(seal(message, VECTOR.pk))).not.toBe(hex(sealed));
    expect(openSealed(VECTOR.sealed, VECTOR.pk, VECTOR.sk)).toEqual(message);
  });
});
