/** src/core/body.ts: the cap holds while reading, whatever Content-Length says (none here). */
import { describe, expect, it } from "vitest";
import { readCapped } from "../../src/core/body";

function stream(chunks: number, size: number, onCancel: () => void): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (sent++ < chunks) c.enqueue(new Uint8Array(size).fill(7));
      else c.close();
    },
    cancel: onCancel,
  });
}

describe("readCapped", () => {
  it("returns the bytes of a body within the limit", async () => {
    const bytes = await readCapped(stream(3, 10, () => undefined), 30);
    expect(bytes?.length).toBe(30);
    expect(await readCapped(null, 5)).toEqual(new Uint8Array(0));
  });

  it("stops and cancels a body that goes past the limit, without reading the rest", async () => {
    let cancelled = false;
    const endless = stream(Number.MAX_SAFE_INTEGER, 1024, () => void (cancelled = true));
    expect(await readCapped(endless, 4096)).toBeNull();
    expect(cancelled).toBe(true);
  });
});
