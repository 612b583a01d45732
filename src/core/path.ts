/**
 * Request path checks, before any routing: the path under /v1/ is percent-decoded, split into
 * segments and refused when it holds `.` or `..` segments (or `..` inside a name). The
 * dispatcher (src/app/dispatch.ts) uses it; it is pure, so it is tested under plain Node.
 */
import { badRequest } from "./errors";

/**
 * Splits and checks a request path: no `.` segments, no `..` anywhere in a segment, no empty
 * segments but a trailing one.
 * An empty segment is reported rather than thrown, because a route with an opaque remainder
 * (RouteDef.opaqueRest) accepts it; the dispatcher refuses it for every other route.
 */
export function inspectPath(raw: string): { segs: string[]; decoded: string; emptySegmentError: string | null } {
  let decoded: string;
  try {
    decoded = decodeURIComponent(raw);
  } catch {
    throw badRequest("invalid path: bad percent-encoding");
  }
  const segs = decoded.split("/");
  if (segs.length > 1 && segs[segs.length - 1] === "") segs.pop();
  for (const s of segs) {
    // Bad input: names with ".." are refused anywhere in a segment, not only as a whole
    // segment, so no mount, namespace or secret name can look like a relative path.
    if (s === "." || s.includes("..")) throw badRequest(`invalid path "${decoded}": '.' segments and names containing '..' are not allowed`);
  }
  const empty = segs.some((s, i) => s === "" && !(i === 0 && segs.length === 1));
  return { segs, decoded, emptySegmentError: empty ? `invalid path "${decoded}": empty path segments are not allowed` : null };
}

export function splitPath(raw: string): string[] {
  const { segs, emptySegmentError } = inspectPath(raw);
  if (emptySegmentError) throw badRequest(emptySegmentError);
  return segs;
}
