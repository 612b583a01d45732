/**
 * The bytes both delivery sinks write (docs/audit.md): entries as NDJSON, one JSON
 * object per line, each line ended by "\n" (the NDJSON spec: https://github.com/ndjson/ndjson-spec),
 * optionally gzip'd with the runtime's CompressionStream (RFC 1952). The lines are written on
 * the request path and carried as text (../message.ts); this gives the bytes both sinks write,
 * ./http.ts and ./r2.ts, so a collector and an R2 reader parse the same thing. gzip costs far
 * more CPU than the rest of a delivery (docs/audit.md "What it costs"): only with `compress`.
 */
export const NDJSON_CONTENT_TYPE = "application/x-ndjson";

/** gzip (RFC 1952) of a text, fully buffered so a retry re-sends the same bytes. */
export async function gzipText(text: string): Promise<ArrayBuffer> {
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Response(stream).arrayBuffer();
}

/** The body a sink writes: the NDJSON text, gzip'd when asked. */
export async function encodeBody(text: string, compress: boolean): Promise<string | ArrayBuffer> {
  return compress ? gzipText(text) : text;
}
