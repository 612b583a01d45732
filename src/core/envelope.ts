/** The response envelope and error bodies (docs/http-conventions.md). */
import type { JsonReply } from "./route";

export function envelope(requestId: string, reply: JsonReply, mountType: string): Record<string, unknown> {
  return {
    request_id: requestId,
    lease_id: "",
    renewable: false,
    lease_duration: 0,
    data: reply.data ?? null,
    wrap_info: null,
    warnings: reply.warnings && reply.warnings.length > 0 ? reply.warnings : null,
    auth: reply.auth ?? null,
    mount_type: mountType,
    ...reply.topLevel,
  };
}

export function jsonResponse(body: unknown, status: number, requestId: string): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", "x-request-id": requestId, "cache-control": "no-store" },
  });
}

export function errorResponse(status: number, messages: string[], requestId: string): Response {
  return jsonResponse({ errors: messages }, status, requestId);
}
