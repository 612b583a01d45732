/**
 * Whether the caller may learn that the request's namespace exists (no existence
 * oracle). The dispatcher answers a request for a missing namespace 403 unless the caller's
 * policies allow the operation there (dispatch.ts missingNamespace), then 404. Public reads of an
 * existing namespace (sys/internal/ui/mounts, sys/activation-flags) must answer that same 403 to
 * everyone else whenever their answer would otherwise reveal nothing but the namespace's
 * existence. The root namespace always exists; a token knows its own namespace.
 */
import type { Req } from "../../core/route";

export function mayLearnNamespace(req: Req): boolean {
  if (req.ns.path === "") return true;
  if (!req.token) return false;
  if (req.token.namespaceId === req.ns.id) return true;
  // The dispatcher's own rule for a missing namespace: the ACL allows this read there.
  return req.capabilities(req.path).has("read");
}
