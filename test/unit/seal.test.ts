import { describe, expect, it } from "vitest";
import { currentKeyId, isValidSealKey, seal, unseal } from "../../src/core/db/seal";

const KEY_A = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const KEY_B = btoa(String.fromCharCode(...new Uint8Array(32).fill(7)));

describe("seal", () => {
  it("round-trips and records the key id", async () => {
    const sealed = await seal({ current: KEY_A }, "s3cret", "kv:m:p:1");
    expect(sealed).toMatch(new RegExp(`^v1:${await currentKeyId({ current: KEY_A })}:`));
    expect(sealed).not.toContain("s3cret");
    expect(await unseal({ current: KEY_A }, sealed, "kv:m:p:1")).toBe("s3cret");
  });

  it("uses a fresh IV each time", async () => {
    const a = await seal({ current: KEY_A }, "same", "c");
    const b = await seal({ current: KEY_A }, "same", "c");
    expect(a).not.toBe(b);
  });

  it("refuses a value moved to another context", async () => {
    const sealed = await seal({ current: KEY_A }, "s3cret", "row-1");
    await expect(unseal({ current: KEY_A }, sealed, "row-2")).rejects.toThrow();
  });

  it("opens values sealed under a previous key after rotation", async () => {
    const old = await seal({ current: KEY_A }, "before", "c");
    const rotated = { current: KEY_B, previous: KEY_A };
    expect(await unseal(rotated, old, "c")).toBe("before");
    const fresh = await seal(rotated, "after", "c");
    expect(fresh.split(":")[1]).toBe(await currentKeyId({ current: KEY_B }));
    await expect(unseal({ current: KEY_B }, old, "c")).rejects.toThrow("SEAL_KEYS_PREVIOUS");
  });

  it("validates key material", () => {
    expect(isValidSealKey(KEY_A)).toBe(true);
    expect(isValidSealKey("c2hvcnQ=")).toBe(false);
    expect(isValidSealKey("not base64!")).toBe(false);
    expect(isValidSealKey(undefined)).toBe(false);
  });
});
