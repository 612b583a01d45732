/**
 * Serials as pki_certs stores them (src/core/db/schema/pki-serial.ts): colon hex and octets
 * convert both ways, the octets sort as the colon hex did (so LIST and sort=serial keep their
 * order), and a LIST's `after` of any text cuts the octets where the text comparison cut it.
 */
import { describe, expect, it } from "vitest";
import { firstSerialAfter, serialFromHex, serialOctets, serialText } from "../../src/core/db/schema/pki-serial";

/** SQLite's BLOB order (memcmp, then length). */
function cmp(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return (a[i] ?? 0) - (b[i] ?? 0);
  return a.length - b.length;
}

/** Serials of 1-4 octets drawn from a few values, so that prefixes and ties are frequent. */
function serials(n: number): string[] {
  const out = new Set<string>();
  for (let k = 0; k < n; k++) {
    const len = 1 + (k % 4);
    out.add(serialText(Array.from({ length: len }, (_, i) => [0x00, 0x09, 0x0a, 0x7f, 0x80, 0xff][(k * 7 + i * 13 + (k >> 3)) % 6] ?? 0)));
  }
  return [...out].sort();
}

describe("pki_certs serials", () => {
  it("convert both ways; non-canonical text matches nothing", () => {
    expect(serialText(serialOctets("17:67:16:0a:ff"))).toBe("17:67:16:0a:ff");
    expect(Array.from(serialOctets("00:80"))).toEqual([0, 0x80]);
    expect(serialText([1, 2, 255])).toBe("01:02:ff");
    expect(serialText(new Uint8Array([0xab]).buffer)).toBe("ab");
    for (const bad of ["", "1:2", "AB:CD", "ab-cd", "abc", "ab:", "zz"]) expect(serialOctets(bad).length, bad).toBe(0);
    // As SQLite's lower(hex(serial)) gives it, for long lists.
    for (const t of ["ab", "01:02:ff", "17:67:16:0a:ff:00:80:7f:09:0a:11:22:33:44:55:66:77:88:99:aa"]) expect(serialFromHex(t.replaceAll(":", ""))).toBe(t);
  });

  it("sort as octets exactly as they sorted as colon hex", () => {
    const texts = serials(400);
    const octets = texts.map(serialOctets);
    for (let i = 1; i < octets.length; i++) expect(cmp(octets[i - 1] as Uint8Array, octets[i] as Uint8Array), texts[i]).toBeLessThan(0);
  });

  it("cut a LIST after any text where `serial > after` cut the colon hex", () => {
    const texts = serials(400);
    const octets = texts.map(serialOctets);
    const afters = ["", "0", "00", "00:", "00:0", "7f:", "8", "ff", "ff:ff:ff:ff:ff", "g", "a:", ":", "0g", "ff:g", "AB", "09:z", "\u00e9"];
    for (const t of texts) afters.push(t, t.slice(0, -1), `${t}x`, `${t}:`);
    for (const after of afters) {
      const from = firstSerialAfter(after);
      const cut = from === null ? [] : texts.filter((_, i) => cmp(octets[i] as Uint8Array, from) >= 0);
      expect(cut, JSON.stringify(after)).toEqual(texts.filter((t) => t > after));
    }
  });
});
