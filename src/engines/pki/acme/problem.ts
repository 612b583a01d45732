/**
 * ACME problem documents (RFC 8555 §6.7, RFC 7807): every refusal of an ACME endpoint is one,
 * `application/problem+json` with `type` `urn:ietf:params:acme:error:<id>` and a `detail`, never
 * a Vault `{"errors":[…]}` body and never a 500 for bad input. The HTTP status of each type is
 * Vault's (OpenBao builtin/logical/pki/acme_errors.go); like Vault the body has no `status` member.
 */
import { ApiError } from "../../../core/errors";
import { lifecycleConflict } from "../../../core/lifecycle";

export const ACME_ERROR = "urn:ietf:params:acme:error:";

const STATUS = {
  accountDoesNotExist: 400,
  alreadyRevoked: 400,
  badCSR: 400,
  badNonce: 400,
  badPublicKey: 400,
  badRevocationReason: 400,
  badSignatureAlgorithm: 400,
  compound: 400,
  incorrectResponse: 400,
  invalidContact: 400,
  malformed: 400,
  rejectedIdentifier: 400,
  unsupportedContact: 400,
  unsupportedIdentifier: 400,
  // draft-aaron-acme-profiles §4 (Let's Encrypt answers it with 400).
  invalidProfile: 400,
  externalAccountRequired: 401,
  unauthorized: 401,
  userActionRequired: 401,
  caa: 403,
  orderNotReady: 403,
  // RFC 9773 §7.4: the certificate named in `replaces` is already being replaced (409 as Let's Encrypt).
  alreadyReplaced: 409,
  rateLimited: 429,
  connection: 500,
  dns: 500,
  serverInternal: 500,
  tls: 500,
} as const;

export type ProblemType = keyof typeof STATUS;

/** A refusal: thrown anywhere under an ACME handler, rendered by `problemResponse`. */
export class AcmeError extends Error {
  readonly status: number;
  constructor(
    readonly type: ProblemType,
    readonly detail: string,
    status?: number,
    /** Extra headers (Location of a conflicting account, Retry-After, …). */
    readonly headers: Record<string, string> = {},
  ) {
    super(detail);
    this.status = status ?? STATUS[type];
  }
}

export const acmeError = (type: ProblemType, detail: string, status?: number): AcmeError => new AcmeError(type, detail, status);

/** The problem body of a stored error (challenge or order `error` members). */
export function problemBody(type: ProblemType | string, detail: string): { type: string; detail: string } {
  return { type: type.startsWith(ACME_ERROR) ? type : `${ACME_ERROR}${type}`, detail };
}

/**
 * Any error as an AcmeError. ApiErrors raised by the PKI code underneath (a CSR the role refuses,
 * an unusable issuer) keep their status and message under `fallback`'s type; a write a
 * lifecycle trigger refused (the mount is being disabled) is a 409; anything else is logged and
 * becomes serverInternal without its details.
 */
export function toAcmeError(err: unknown, fallback: ProblemType, requestId: string): AcmeError {
  if (err instanceof AcmeError) return err;
  if (err instanceof ApiError) {
    const status = err.status >= 500 ? 400 : err.status;
    return new AcmeError(status === 404 ? "malformed" : fallback, err.messages.join("; ") || "request refused", status);
  }
  const conflict = lifecycleConflict(err);
  if (conflict) return new AcmeError("malformed", conflict.messages.join("; "), conflict.status);
  console.error(`acme request ${requestId} failed:`, err);
  return new AcmeError("serverInternal", `internal error (request id ${requestId})`);
}

export function problemResponse(e: AcmeError, headers: Record<string, string>): Response {
  return new Response(JSON.stringify(problemBody(e.type, e.detail)), {
    status: e.status,
    headers: { "content-type": "application/problem+json", "cache-control": "no-store", ...headers, ...e.headers },
  });
}
