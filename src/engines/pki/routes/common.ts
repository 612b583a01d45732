/** Helpers shared by the PKI route files. */
import { ApiError } from "../../../core/errors";
import type { Req } from "../../../core/route";
import { notModifiedSince } from "../../../core/public-answers";
import type { MountRow } from "../../../core/mount-store";
import type { IssueContext } from "../issuance/pipeline";

export function mountOf(req: Req): MountRow {
  // The dispatcher only routes engine paths with their mount; a missing one is a wiring bug.
  if (!req.mount) throw new ApiError(500, "internal error: PKI route without a mount");
  return req.mount;
}

export function ctxOf(req: Req): IssueContext {
  return { db: req.db, env: req.env, mount: mountOf(req), waitUntil: req.waitUntil };
}

/** A raw (non-JSON) reply; an empty body is 204, as upstream's raw paths answer. */
export function raw(body: string | Uint8Array<ArrayBuffer> | null, contentType: string): Response {
  if (body === null || body.length === 0) return new Response(null, { status: 204 });
  return new Response(body, { status: 200, headers: { "content-type": contentType } });
}

/** A LIST's `after`/`limit` (OpenBao's paginated lists): `after` exclusive, `limit` 0 for all. */
export interface ListPage {
  after: string;
  limit: number;
}

export function listPage(req: Req): ListPage {
  const after = typeof req.body.after === "string" ? req.body.after : "";
  const limit = Number(req.body.limit ?? 0);
  return { after, limit: Number.isFinite(limit) && limit > 0 ? Math.floor(limit) : 0 };
}

/** Sorted keys with `after`/`limit` pagination (`after` exclusive, `limit` ≤ 0 for all); 404 when none. */
export function paginate(keys: string[], req: Req): string[] {
  const { after, limit } = listPage(req);
  let out = [...keys].sort();
  if (after) out = out.filter((k) => k > after);
  if (limit > 0) out = out.slice(0, limit);
  return out;
}

/**
 * Conditional GET on CA paths (RFC 9110 §13.1.3, as Vault's PKI does): 304 when the object's last modification is
 * strictly before If-Modified-Since. HTTP dates carry whole seconds, so the comparison does too.
 */
export function notModified(req: Req, lastModifiedMs: number): Response | null {
  if (!notModifiedSince(req.headers, lastModifiedMs)) return null;
  const last = Math.floor(lastModifiedMs / 1000) * 1000;
  return new Response(null, { status: 304, headers: { "last-modified": new Date(last).toUTCString() } });
}
