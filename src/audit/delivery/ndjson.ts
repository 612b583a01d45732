/**
 * The bytes both delivery sinks write (docs/audit.md): entries as NDJSON, one JSON
 * object per line, each line ended by "\n" (the NDJSON spec: https://github.com/ndjson/ndjson-spec),
 * optionally gzip'd with the runtime's CompressionStream (RFC 1952). Pure functions of the
 * entries, shared by ./http.ts and ./r2.ts so a collector and an R2 reader parse the same thing.
 */
import type { AuditEntry } from "../types";

export const NDJSON_CONTENT_TYPE = "application/x-ndjson";

/** One line per entry, in the given order, each ended by a newline. */
export function toNdjson(entries: readonly AuditEntry[]): string {
  let out = "";
  for (const e of entries) out += `${JSON.stringify(e)}\n`;
  return out;
}

/** gzip (RFC 1952) of a text, fully buffered so a retry re-sends the same bytes. */
export async function gzipText(text: string): Promise<ArrayBuffer> {
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Response(stream).arrayBuffer();
}

/** The body a sink writes: the NDJSON text, gzip'd when asked. */
export async function encodeEntries(entries: readonly AuditEntry[], compress: boolean): Promise<string | ArrayBuffer> {
  const text = toNdjson(entries);
  return compress ? gzipText(text) : text;
}
