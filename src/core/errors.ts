/**
 * One error type for everything a handler wants the client to see. The status and the public
 * messages travel on the error itself; the root handler renders `{"errors":[...]}`
 * (docs/http-conventions.md). Anything that is not an ApiError becomes a generic 500 and
 * its details go to the log only.
 */
export class ApiError extends Error {
  readonly status: number;
  readonly messages: string[];

  constructor(status: number, messages: string | string[]) {
    const list = Array.isArray(messages) ? messages : [messages];
    super(list.join("; ") || `HTTP ${status}`);
    this.status = status;
    this.messages = list;
  }
}

/** 400: bad input or a refused operation. */
export const badRequest = (message: string): ApiError => new ApiError(400, message);
/** 403 with the one message the contract allows, so nothing leaks about why. */
export const permissionDenied = (): ApiError => new ApiError(403, "permission denied");
/** 404 with an empty list, the engine's answer for a missing object or an empty list. */
export const notFound = (messages: string[] = []): ApiError => new ApiError(404, messages);

/** The message for a value that cannot be coerced to its declared type (OpenBao sdk/framework/field_data.go). */
export function fieldError(field: string, detail: string): ApiError {
  return badRequest(`Field validation failed: error converting input for field "${field}": ${detail}`);
}
