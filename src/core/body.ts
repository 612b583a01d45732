/**
 * Reading a response body from a service Lanyard calls (JWKS, TokenReview, ACME validation) with
 * a hard cap enforced while reading, so an endpoint that streams without end, or lies in
 * Content-Length, cannot exhaust the isolate's memory.
 */
import { concatBytes } from "./encoding";

/** The body's bytes, or null when it is longer than `limit` (the rest is then cancelled). */
export async function readCapped(body: ReadableStream<Uint8Array> | null, limit: number): Promise<Uint8Array<ArrayBuffer> | null> {
  if (!body) return new Uint8Array(0);
  const reader = body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      return null;
    }
    parts.push(value);
  }
  return concatBytes(parts);
}
