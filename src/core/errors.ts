/**
 * One error type for everything a handler wants the client to see. The status and the public
 * messages travel on the error itself; the root handler renders `{"errors":[...]}`
 * (docs/http-conventions.md "Answers"). Anything that is not an ApiError becomes a generic 500
 * and its details go to the log only.
 *
 * A domain error declares its answer by extending ApiError: the renderer and the audit trail
 * then answer its status and message with no catch-and-rethrow at the call site (e.g.
 * AuditUnavailableError in src/audit/types.ts, always 503). Engines' error classes may do the
 * same, so core never needs to know them. The one table from a thrown value to its answer,
 * ApiErrors and the few errors that cannot extend it (a write a lifecycle trigger aborted), is
 * `errorAnswer` in src/core/envelope.ts.
 */
export class ApiError extends Error {
  readonly status: number;
  readonly messages: string[];

  constructor(status: number, messages: string | string[], options?: ErrorOptions) {
    const list = Array.isArray(messages) ? messages : [messages];
    super(list.join("; ") || `HTTP ${status}`, options);
    this.status = status;
    this.messages = list;
  }
}

/** 400: bad input or a refused operation. */
export const badRequest = (message: string): ApiError => new ApiError(400, message);
/** 403 with one message whatever the reason, so nothing leaks about why. */
export const permissionDenied = (): ApiError => new ApiError(403, "permission denied");
/** 404 with an empty list, the engine's answer for a missing object or an empty list. */
export const notFound = (messages: string[] = []): ApiError => new ApiError(404, messages);

/**
 * The message for a value that cannot be coerced to its declared type. Fields are coerced
 * leniently, as Vault's framework does ("weak decoding"); what still fails gets Vault's message
 * word for word, so clients matching on it keep working.
 */
export function fieldError(field: string, detail: string): ApiError {
  return badRequest(`Field validation failed: error converting input for field "${field}": ${detail}`);
}
