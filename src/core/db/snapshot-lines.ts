/**
 * A snapshot upload as lines, read as the bytes arrive: the body is gunzipped when it starts with
 * gzip's magic bytes (RFC 1952 §2.3.1), else read as the plain lines, and split at "\n" without
 * ever holding more than one line. Bounds: the body as sent (MAX_SNAPSHOT_BYTES,
 * docs/configuration.md), the unpacked lines (INFLATE_FACTOR times that, so a small gzip bomb
 * cannot fill D1's staging tables) and one line (MAX_LINE_BYTES: a page is written at about
 * 4 MB of values, ./snapshot-stream.ts). Past a bound the upload is refused (413), nothing changed.
 */
import { concatBytes } from "../encoding";
import { ApiError } from "../errors";
import { refused } from "./snapshot-format";

/** One line at most: a page of values with JSON's and base64's overhead, and room to spare. */
export const MAX_LINE_BYTES = 32 * 1024 * 1024;
/** The unpacked snapshot may be this many times the size of the body as sent. */
export const INFLATE_FACTOR = 16;

/** A bound passed: the refusal, kept aside since a stream piped after the bound may report its own error. */
interface Overrun {
  error: ApiError | null;
}

/** Counts the bytes flowing through; past `limit`, the stream errors with the 413 (also kept in `overrun`). */
function capped(limit: number, message: string, overrun: Overrun): TransformStream<Uint8Array, Uint8Array> {
  let seen = 0;
  return new TransformStream({
    transform(chunk, controller) {
      seen += chunk.byteLength;
      if (seen <= limit) return controller.enqueue(chunk);
      overrun.error ??= new ApiError(413, `snapshot refused: ${message}; nothing was changed`);
      controller.error(overrun.error);
    },
  });
}

/**
 * `source` through `transform`, the pipe's own failure swallowed: it also errors the readable
 * side, where the reader sees it (an unread rejection would be reported as uncaught).
 */
function through(source: ReadableStream<Uint8Array>, transform: { writable: WritableStream<Uint8Array>; readable: ReadableStream<Uint8Array> }): ReadableStream<Uint8Array> {
  const pump = async () => {
    const reader = source.getReader();
    const writer = transform.writable.getWriter();
    try {
      for (let next = await reader.read(); !next.done; next = await reader.read()) await writer.write(next.value);
      await writer.close();
    } catch (e) {
      await writer.abort(e).catch(() => undefined);
      await reader.cancel(e).catch(() => undefined);
    }
  };
  pump().catch(() => undefined);
  return transform.readable;
}

/** The body unpacked: its first bytes decide whether it is gzip. */
async function unpacked(body: ReadableStream<Uint8Array>, maxBytes: number, overrun: Overrun): Promise<ReadableStream<Uint8Array>> {
  const sent = through(body, capped(maxBytes, `larger than MAX_SNAPSHOT_BYTES (${maxBytes} bytes)`, overrun));
  const reader = sent.getReader();
  const first = await reader.read();
  const head = first.done ? new Uint8Array(0) : first.value;
  const rest = new ReadableStream<Uint8Array>({
    start(controller) {
      if (head.byteLength > 0) controller.enqueue(head);
    },
    async pull(controller) {
      const next = await reader.read();
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
    async cancel(reason) {
      await reader.cancel(reason);
    },
  });
  const gzip = head[0] === 0x1f && head[1] === 0x8b;
  const plain = gzip ? through(rest, new DecompressionStream("gzip")) : rest;
  return through(plain, capped(maxBytes * INFLATE_FACTOR, `unpacked, larger than ${INFLATE_FACTOR} times MAX_SNAPSHOT_BYTES`, overrun));
}

/**
 * The lines of the upload (without their "\n"), in order. The last line must end with "\n": a
 * body cut in the middle of a line is reported by the caller as truncated (no trailer).
 */
export async function* snapshotLines(body: ReadableStream<Uint8Array>, maxBytes: number): AsyncGenerator<Uint8Array<ArrayBuffer>> {
  const overrun: Overrun = { error: null };
  const reader = (await unpacked(body, maxBytes, overrun)).getReader();
  let parts: Uint8Array[] = [];
  let held = 0;
  let lines = 0;
  try {
    for (;;) {
      let next: ReadableStreamReadResult<Uint8Array>;
      try {
        next = await reader.read();
      } catch (e) {
        // A refusal from a bound, or gzip that does not inflate (corrupt).
        if (overrun.error) throw overrun.error;
        if (e instanceof ApiError) throw e;
        throw refused("the snapshot is corrupt (its gzip stream does not inflate)");
      }
      if (next.done) {
        // A body that is one unterminated line is no snapshot (the caller says so); after lines, it was cut.
        if (held > 0 && lines === 0) yield concatBytes(parts);
        else if (held > 0) throw refused("the snapshot is truncated (it ends inside a line)");
        return;
      }
      let chunk = next.value;
      for (let nl = chunk.indexOf(0x0a); nl >= 0; nl = chunk.indexOf(0x0a)) {
        parts.push(chunk.subarray(0, nl));
        yield concatBytes(parts);
        lines++;
        parts = [];
        held = 0;
        chunk = chunk.subarray(nl + 1);
      }
      if (chunk.byteLength > 0) {
        held += chunk.byteLength;
        if (held > MAX_LINE_BYTES) throw refused(`the snapshot is corrupt (a line longer than ${MAX_LINE_BYTES} bytes)`);
        parts.push(chunk.slice());
      }
    }
  } finally {
    reader.releaseLock();
  }
}
