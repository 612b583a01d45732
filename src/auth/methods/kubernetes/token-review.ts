/**
 * The Kubernetes TokenReview call of a login (Vault API: /auth/kubernetes/login;
 * vault-plugin-auth-kubernetes token_review.go): asks the cluster whether the service-account
 * JWT is still valid and whose it is.
 *
 * `POST {kubernetes_host}/apis/authentication.k8s.io/v1/tokenreviews` with
 * `Authorization: Bearer <token_reviewer_jwt, else the client's own JWT>`, JSON in and out, and a
 * body marshalled as upstream's authv1.TokenReview with empty TypeMeta (no apiVersion/kind).
 *
 * What the client sees:
 * - the API answered and said no (a 4xx, a Status object that is not Success, status.error,
 *   not authenticated, no common audience, a username that is not a service account's) →
 *   403 `permission denied`, as upstream: the detail goes to the log only;
 * - the API could not answer (connection failure, timeout, 5xx, 429 throttling, an unreadable
 *   body) → 502 with a message saying so (not a 403, since the token may be fine, and
 *   not a 500). Upstream returns these as plain errors (a 500); a gateway status is the honest one.
 *
 * TLS: a Worker's fetch cannot be given a custom CA, so `kubernetes_ca_cert` is validated and
 * stored (reads show it, as Vault's do) but the connection is checked against the platform's
 * public trust store. An API server behind a private CA must be reached through a front that
 * presents a publicly trusted certificate (e.g. a Cloudflare Tunnel). See index.ts.
 *
 * Neither JWT (the reviewed one or the reviewer's) ever appears in a log line or an error.
 */
import { readCapped } from "../../../core/body";
import { ApiError, permissionDenied } from "../../../core/errors";
import { checkOutboundUrl } from "../../../core/outbound-url";
import { trimEndChar } from "../../../core/text";

/** Upper bound of the whole exchange, body included (at most 10 s, so a login never hangs on a slow API server). */
export const REVIEW_TIMEOUT_MS = 10_000;
/** A TokenReview answer is a few hundred bytes; reading stops well beyond that. */
const MAX_RESPONSE_BYTES = 256 * 1024;

export interface ReviewTarget {
  /** `kubernetes_host` as configured. */
  host: string;
  /** `token_reviewer_jwt`; "" means the client's JWT reviews itself (Vault's rule). */
  reviewerJwt: string;
}

/** What the cluster says the token belongs to. */
export interface ReviewResult {
  name: string;
  namespace: string;
  uid: string;
}

const unavailable = (detail: string): ApiError => new ApiError(502, `error reaching the Kubernetes TokenReview API: ${detail}`);

/** Logs why a review was refused (never a token) and answers upstream's 403. */
function refused(detail: string): ApiError {
  console.warn(`kubernetes login refused: ${detail}`);
  return permissionDenied();
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The endpoint URL: the host without trailing slashes, then the TokenReview path. */
export function tokenReviewUrl(env: Env, host: string): URL {
  const base = checkOutboundUrl(env, "kubernetes_host", host, "AUTH_ALLOW_HTTP");
  return new URL(`${trimEndChar(base.toString(), "/")}/apis/authentication.k8s.io/v1/tokenreviews`);
}

/** The request body upstream sends (json.Marshal of authv1.TokenReview with empty TypeMeta). */
export function reviewBody(jwt: string, audiences: readonly string[]): string {
  const spec: Record<string, unknown> = { token: jwt };
  if (audiences.length > 0) spec.audiences = [...audiences];
  return JSON.stringify({ metadata: { creationTimestamp: null }, spec, status: { user: {} } });
}

async function exchange(url: URL, bearer: string, body: string): Promise<{ status: number; text: string }> {
  const signal = AbortSignal.timeout(REVIEW_TIMEOUT_MS);
  try {
    const res = await fetch(url.toString(), {
      method: "POST",
      headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json", accept: "application/json" },
      body,
      redirect: "manual",
      signal,
    });
    const length = Number(res.headers.get("content-length") ?? "0");
    if (length > MAX_RESPONSE_BYTES) {
      await res.body?.cancel();
      throw unavailable(`the answer is larger than ${MAX_RESPONSE_BYTES} bytes`);
    }
    // The cap holds while reading: a chunked answer without Content-Length is cut off too.
    const bytes = await readCapped(res.body, MAX_RESPONSE_BYTES);
    if (bytes === null) throw unavailable(`the answer is larger than ${MAX_RESPONSE_BYTES} bytes`);
    return { status: res.status, text: new TextDecoder().decode(bytes) };
  } catch (e) {
    if (e instanceof ApiError) throw e;
    if (signal.aborted || (e instanceof Error && e.name === "TimeoutError")) {
      throw unavailable(`no answer within ${REVIEW_TIMEOUT_MS / 1000}s`);
    }
    // The network error's text may name internal addresses: the log has it, the client the gist.
    console.warn("kubernetes TokenReview request failed:", e instanceof Error ? e.message : "unknown error");
    throw unavailable("the connection failed");
  }
}

/** A Kubernetes Status object's code and message, when the body is one. */
function statusObject(body: unknown): { status: string; code: number; message: string } | null {
  if (!isObject(body) || body.kind !== "Status") return null;
  return {
    status: typeof body.status === "string" ? body.status : "",
    code: typeof body.code === "number" ? body.code : 0,
    message: typeof body.message === "string" ? body.message.slice(0, 200) : "",
  };
}

/**
 * Reviews `jwt` and returns the service account the cluster says it belongs to. `audiences`
 * are the role's audience, or else the JWT's own `aud` (upstream serviceAccount.lookup).
 */
export async function reviewToken(env: Env, target: ReviewTarget, jwt: string, audiences: readonly string[]): Promise<ReviewResult> {
  const url = tokenReviewUrl(env, target.host);
  const bearer = target.reviewerJwt !== "" ? target.reviewerJwt : jwt;
  const { status, text } = await exchange(url, bearer, reviewBody(jwt, audiences));

  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  if (status >= 500 || status === 429) throw unavailable(`HTTP ${status}`);
  if (status < 200 || status > 206) {
    const st = statusObject(body);
    if (status === 401 || st?.code === 401) {
      throw refused("lookup failed: service account unauthorized; this could mean it has been deleted or recreated with a new token");
    }
    throw refused(`TokenReview answered HTTP ${status}${st?.message ? `: ${st.message}` : ""}`);
  }
  if (!isObject(body)) throw unavailable(`HTTP ${status} with a body that is not a JSON object`);
  const st = statusObject(body);
  if (st !== null && st.status !== "Success") throw refused(`TokenReview answered a ${st.status || "non-Success"} Status: ${st.message}`);

  const review = isObject(body.status) ? body.status : {};
  if (typeof review.error === "string" && review.error !== "") throw refused(`lookup failed: ${review.error.slice(0, 200)}`);
  if (review.authenticated !== true) throw refused("lookup failed: service account jwt not valid");
  const got = Array.isArray(review.audiences) ? review.audiences.filter((a): a is string => typeof a === "string") : [];
  if (audiences.length > 0 && !got.some((a) => audiences.includes(a))) {
    throw refused(`lookup failed: service account jwt valid for audience(s) [${got.join(" ")}], but wanted [${audiences.join(" ")}]`);
  }
  const user = isObject(review.user) ? review.user : {};
  const username = typeof user.username === "string" ? user.username : "";
  const parts = username.split(":");
  if (parts.length !== 4) throw refused("lookup failed: unexpected username format");
  if (parts[0] !== "system" || parts[1] !== "serviceaccount") throw refused(`lookup failed: username ${username.slice(0, 200)} is not a service account`);
  return { namespace: parts[2] ?? "", name: parts[3] ?? "", uid: typeof user.uid === "string" ? user.uid : "" };
}
