/**
 * Reading a body with a hard cap enforced while reading: responses of the services Lanyard calls
 * (JWKS, TokenReview, ACME validation) and request bodies sent without a length, so an endpoint that streams without end, or lies in
 * Content-Length, cannot exhaust the isolate's memory.
 */
import { concatBytes } from "./encoding";

/**
 * The body's bytes, or null when it is longer than `limit`; the rest is then handed to
 * `overflow` (default: cancelled; the request pipeline drains it instead, src/core/request.ts).
 */
export async function readCapped(
  body: ReadableStream<Uint8Array> | null,
  limit: number,
  overflow: (reader: ReadableStreamDefaultReader<Uint8Array>, seen: number) => Promise<void> = (reader) => reader.cancel(),
): Promise<Uint8Array<ArrayBuffer> | null> {
  if (!body) return new Uint8Array(0);
  const reader = body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await overflow(reader, size);
      return null;
    }
    parts.push(value);
  }
  return concatBytes(parts);
}
