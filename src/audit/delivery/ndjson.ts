/**
 * The bytes both delivery sinks write (docs/audit.md): entries as NDJSON, one JSON
 * object per line, each line ended by "\n" (the NDJSON spec: https://github.com/ndjson/ndjson-spec),
 * optionally gzip'd with the runtime's CompressionStream (RFC 1952). The lines are written on
 * the request path and carried as text (../message.ts); this gives the bytes both sinks write,
 * ./http.ts and ./r2.ts, so a collector and an R2 reader parse the same thing. gzip costs far
 * more CPU than the rest of a delivery (docs/audit.md "What it costs"): only with `compress`.
 *
 * The body is a Blob of the lines, never one string: a delivery of a hundred messages is about a
 * megabyte, and joining it into one string first makes V8 copy it into a fresh large object
 * (its own pages, faulted in on every delivery) before the runtime encodes it again; the Blob
 * encodes each line straight into its one buffer (docs/audit.md "What it costs").
 */
export const NDJSON_CONTENT_TYPE = "application/x-ndjson";

/** The NDJSON bytes of the lines (each ends with "\n"), uncompressed. */
export function ndjsonBlob(lines: readonly string[]): Blob {
  return new Blob(lines as string[]);
}

/** gzip (RFC 1952) of the lines, fully buffered so a retry re-sends the same bytes. */
export async function gzipLines(lines: readonly string[]): Promise<ArrayBuffer> {
  const stream = ndjsonBlob(lines).stream().pipeThrough(new CompressionStream("gzip"));
  return new Response(stream).arrayBuffer();
}

/** The body a sink writes: the NDJSON lines, gzip'd when asked. */
export async function encodeBody(lines: readonly string[], compress: boolean): Promise<Blob | ArrayBuffer> {
  return compress ? gzipLines(lines) : ndjsonBlob(lines);
}
