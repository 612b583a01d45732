/** Reading a request: verb → operation, body size limit, JSON decoding (docs/http-conventions.md). */
import type { Operation } from "./caller";
import { MAX_JSON_DEPTH, parseJsonLimited } from "./json";
import { ApiError, badRequest } from "./errors";
import { readCapped } from "./body";

export const DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024;

/**
 * The logical operation of a request. POST and PUT are the same write; `create` vs `update` is
 * decided later by the route's existence check. Returns null for verbs no path supports.
 */
export function operationOf(method: string, query: URLSearchParams): Operation | null {
  switch (method) {
    case "GET": {
      const list = query.get("list");
      if (list === null) return "read";
      const v = list.trim().toLowerCase();
      if (["true", "t", "1"].includes(v)) return "list";
      if (["false", "f", "0", ""].includes(v)) return "read";
      throw badRequest(`invalid value for "list": ${JSON.stringify(list)} is not a boolean`);
    }
    case "LIST":
      return "list";
    case "POST":
    case "PUT":
      return "update";
    case "PATCH":
      return "patch";
    case "DELETE":
      return "delete";
    default:
      return null;
  }
}

/** Reads the body, refusing more than `limit` bytes with 413 before anything is parsed. */
export async function readBody(request: Request, limit: number): Promise<Uint8Array<ArrayBuffer>> {
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > limit) throw new ApiError(413, `request body too large: limit is ${limit} bytes`);
  if (!request.body) return new Uint8Array(0);
  // A declared length is enforced by the runtime's HTTP framing, so such a body is read whole
  // (cheaper than the chunk loop below, which is for bodies sent without a length).
  if (request.headers.has("content-length") && !request.headers.has("transfer-encoding")) return new Uint8Array(await request.arrayBuffer());
  const bytes = await readCapped(request.body, limit, drain);
  if (!bytes) throw new ApiError(413, `request body too large: limit is ${limit} bytes`);
  return bytes;
}

/** How much of an oversized body is read and discarded before the stream is cancelled. */
const DRAIN_LIMIT = 64 * 1024 * 1024;

/**
 * Reads and discards the rest of an oversized body. Cancelling a request stream the client is
 * still sending breaks the keep-alive connection under the local runtime (the next request got
 * a 503 "worker restarted mid-request"); draining lets the 413 arrive cleanly. Beyond
 * DRAIN_LIMIT the stream is cancelled anyway, so a client cannot keep the request busy forever.
 */
async function drain(reader: ReadableStreamDefaultReader<Uint8Array>, seen: number): Promise<void> {
  let size = seen;
  while (size <= DRAIN_LIMIT) {
    const { done, value } = await reader.read();
    if (done) return;
    size += value.byteLength;
  }
  await reader.cancel();
}

/**
 * Decodes a JSON object body; an empty body is `{}`. Errors never quote the body (it may hold a
 * secret) and nesting is bounded by MAX_JSON_DEPTH (src/core/json.ts).
 */
export function decodeJsonObject(bytes: Uint8Array): Record<string, unknown> {
  const text = new TextDecoder().decode(bytes).trim();
  if (text === "") return {};
  const parsed = parseJsonLimited(text);
  if (!parsed.ok) {
    throw badRequest(parsed.reason === "malformed" ? "malformed JSON body" : `JSON body nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
  const v = parsed.value;
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw badRequest("failed to parse JSON input: the body must be a JSON object");
  }
  return v as Record<string, unknown>;
}

/** Query parameters as request data (reads, lists and deletes take their fields from the query). */
export function queryData(query: URLSearchParams): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of new Set(query.keys())) {
    if (key === "list") continue;
    const all = query.getAll(key);
    out[key] = all.length === 1 ? all[0] : all;
  }
  return out;
}
