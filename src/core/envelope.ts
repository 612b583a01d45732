/**
 * The response envelope, error bodies, and the one table from thrown errors to HTTP answers
 * (docs/http-conventions.md "Answers").
 */
import { ApiError } from "./errors";
import { lifecycleConflict } from "./lifecycle";
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

/**
 * The answer a thrown value gets, read by the renderer (`errorReply`) and by the audit trail
 * (src/app/audit-hook.ts) alike, so the two never disagree:
 * - an ApiError, or a domain error that extends it to declare its status: its status and messages;
 * - a write a lifecycle trigger aborted because its mount or namespace is going away: 409
 *   (src/core/lifecycle.ts; D1 reports it as a plain error carrying the trigger's message);
 * - anything else: null, a 500 whose details go to the log only.
 */
export function errorAnswer(err: unknown): ApiError | null {
  return err instanceof ApiError ? err : lifecycleConflict(err);
}

/** The error body for `err`; an unexpected error is logged under the request id, never shown. */
export function errorReply(err: unknown, requestId: string): Response {
  const answer = errorAnswer(err);
  if (answer) return errorResponse(answer.status, answer.messages, requestId);
  console.error(`request ${requestId} failed:`, err);
  return errorResponse(500, [`internal error (request id ${requestId})`], requestId);
}
