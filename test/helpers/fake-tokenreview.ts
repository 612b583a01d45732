/**
 * A fake Kubernetes API server that answers the TokenReview API
 * (`POST /apis/authentication.k8s.io/v1/tokenreviews`) as a real one does, for the Kubernetes
 * auth method's tests.
 *
 * - The bearer must be a token the fake knows and is authenticated: unknown or revoked → 401
 *   `Status` (Unauthorized); known but not allowed to create TokenReviews (no
 *   system:auth-delegator binding) → 403 `Status` (Forbidden). `reviewers` are the tokens that
 *   may review; `selfReview: true` lets every known service-account token review (a cluster where
 *   the clients' own SAs have system:auth-delegator, Vault's "no token_reviewer_jwt" setup).
 * - The body must be JSON with `spec.token` (a string) and optional `spec.audiences` (strings);
 *   Vault sends no `apiVersion`/`kind` (empty TypeMeta) and the fake records a problem if they
 *   appear. A malformed body → 400 `Status` (BadRequest), as the API server answers.
 * - Answers: `status.authenticated`, `status.user` {username `system:serviceaccount:<ns>:<name>`,
 *   uid, groups}, `status.audiences`. A token's audiences default to the API server's own
 *   (`apiAudiences`); with `spec.audiences` the answer holds the intersection, and an empty
 *   intersection is unauthenticated with an `error`, as the API server does. Unknown tokens are
 *   unauthenticated.
 * - `down`: "status" answers 503 (a Status object), "connection" fails like a refused connection
 *   (fetch rejects with a TypeError), "timeout" like an aborted fetch (TimeoutError).
 *
 * In-process: `installFakes([{ hosts: ["k8s.test"], fake }])` (./fake-router.ts). Over HTTP for e2e
 * (Node only, so it lives apart): `serveTokenReview(fake)` in ./fake-tokenreview-serve.ts.
 */
import { json, type FakeProvider } from "./fake-router";

export interface ServiceAccountToken {
  namespace: string;
  name: string;
  uid: string;
  /** The audiences the token was issued for; default: the API server's audiences. */
  audiences?: string[];
  /** false: the token was revoked or its service account deleted. */
  authenticated?: boolean;
}

export interface Received {
  authorization: string | null;
  contentType: string | null;
  accept: string | null;
  body: unknown;
}

export type Down = null | "status" | "connection" | "timeout";

const PATH = "/apis/authentication.k8s.io/v1/tokenreviews";
export const DEFAULT_API_AUDIENCES = ["https://kubernetes.default.svc.cluster.local"];

function status(code: number, reason: string, message: string): Response {
  return json({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason, code }, code);
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

export class FakeTokenReview implements FakeProvider {
  readonly tokens = new Map<string, ServiceAccountToken>();
  readonly received: Received[] = [];
  /** Requests a real API server would refuse or that Vault would not send. */
  readonly problems: string[] = [];
  down: Down = null;

  constructor(
    readonly opts: { reviewers?: string[]; selfReview?: boolean; apiAudiences?: string[] } = {},
  ) {}

  /** Registers a token the cluster issued; returns it. */
  addToken(jwt: string, sa: ServiceAccountToken): string {
    this.tokens.set(jwt, sa);
    return jwt;
  }

  state(): unknown {
    return { down: this.down, reviewers: this.opts.reviewers?.length ?? 0, selfReview: this.opts.selfReview === true, tokens: [...this.tokens.values()], problems: this.problems };
  }

  private username(sa: ServiceAccountToken): string {
    return `system:serviceaccount:${sa.namespace}:${sa.name}`;
  }

  async handle(req: Request): Promise<Response> {
    if (this.down === "connection") throw new TypeError("fetch failed: connection refused");
    if (this.down === "timeout") throw new DOMException("The operation was aborted due to timeout", "TimeoutError");
    if (this.down === "status") return status(503, "ServiceUnavailable", "the server is currently unable to handle the request");

    const url = new URL(req.url);
    if (!url.pathname.endsWith(PATH)) return status(404, "NotFound", "the server could not find the requested resource");
    if (req.method !== "POST") return status(405, "MethodNotAllowed", `the server does not allow this method on the requested resource`);

    const auth = req.headers.get("authorization");
    const text = await req.text();
    let body: unknown = null;
    try {
      body = JSON.parse(text);
    } catch {
      body = null;
    }
    this.received.push({ authorization: auth, contentType: req.headers.get("content-type"), accept: req.headers.get("accept"), body });
    if (req.headers.get("content-type") !== "application/json") this.problems.push(`content-type ${req.headers.get("content-type")}`);
    if (req.headers.get("accept") !== "application/json") this.problems.push(`accept ${req.headers.get("accept")}`);

    const bearer = auth?.startsWith("Bearer ") ? auth.slice("Bearer ".length) : null;
    const caller = bearer === null ? undefined : this.tokens.get(bearer);
    if (!caller || caller.authenticated === false) return status(401, "Unauthorized", "Unauthorized");
    const mayReview = this.opts.selfReview === true || (this.opts.reviewers ?? []).includes(bearer ?? "");
    if (!mayReview) {
      return status(
        403,
        "Forbidden",
        `tokenreviews.authentication.k8s.io is forbidden: User "${this.username(caller)}" cannot create resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope`,
      );
    }

    if (!isObj(body)) return status(400, "BadRequest", "the body of the request was in an unknown format");
    if ("apiVersion" in body || "kind" in body) this.problems.push("the body carries apiVersion/kind (Vault sends an empty TypeMeta)");
    for (const k of Object.keys(body)) if (!["metadata", "spec", "status", "apiVersion", "kind"].includes(k)) this.problems.push(`unknown field "${k}"`);
    const spec = body.spec;
    if (!isObj(spec) || typeof spec.token !== "string" || spec.token === "") return status(400, "BadRequest", "TokenReview.authentication.k8s.io is invalid: spec.token: Required value");
    const wanted = spec.audiences;
    if (wanted !== undefined && (!Array.isArray(wanted) || wanted.some((a) => typeof a !== "string"))) {
      return status(400, "BadRequest", "TokenReview in version \"v1\" cannot be handled as a TokenReview: spec.audiences must be a list of strings");
    }

    const apiAudiences = this.opts.apiAudiences ?? DEFAULT_API_AUDIENCES;
    const target = Array.isArray(wanted) && wanted.length > 0 ? (wanted as string[]) : apiAudiences;
    const reviewed = this.tokens.get(spec.token);
    const answer = (st: Record<string, unknown>) =>
      json({ kind: "TokenReview", apiVersion: "authentication.k8s.io/v1", metadata: { creationTimestamp: null }, spec, status: st }, 201);
    if (!reviewed || reviewed.authenticated === false) return answer({ user: {}, error: "[invalid bearer token, service account token has been invalidated]" });
    const tokenAudiences = reviewed.audiences ?? apiAudiences;
    const common = target.filter((a) => tokenAudiences.includes(a));
    if (common.length === 0) {
      return answer({ user: {}, error: `[invalid bearer token, token audiences ${JSON.stringify(tokenAudiences)} is invalid for the target audiences ${JSON.stringify(target)}]` });
    }
    return answer({
      authenticated: true,
      user: {
        username: this.username(reviewed),
        uid: reviewed.uid,
        groups: ["system:serviceaccounts", `system:serviceaccounts:${reviewed.namespace}`, "system:authenticated"],
      },
      audiences: common,
    });
  }
}

/** An unsigned-looking service-account JWT with the projected claim layout (signature is junk). */
export function projectedJwt(sa: ServiceAccountToken & { iss?: string; exp?: number; iat?: number }): string {
  const now = Math.floor(Date.now() / 1000);
  const claims = {
    aud: sa.audiences ?? DEFAULT_API_AUDIENCES,
    exp: sa.exp ?? now + 3600,
    iat: sa.iat ?? now,
    iss: sa.iss ?? "https://kubernetes.default.svc.cluster.local",
    "kubernetes.io": { namespace: sa.namespace, pod: { name: `${sa.name}-pod`, uid: crypto.randomUUID() }, serviceaccount: { name: sa.name, uid: sa.uid } },
    nbf: now,
    sub: `system:serviceaccount:${sa.namespace}:${sa.name}`,
  };
  return `${b64url({ alg: "RS256", kid: "fake" })}.${b64url(claims)}.${b64urlBytes(crypto.getRandomValues(new Uint8Array(64)))}`;
}

/** A legacy (secret-based) service-account JWT: no exp, top-level kubernetes.io/serviceaccount/* claims. */
export function legacyJwt(sa: ServiceAccountToken & { secretName: string }): string {
  const claims = {
    iss: "kubernetes/serviceaccount",
    "kubernetes.io/serviceaccount/namespace": sa.namespace,
    "kubernetes.io/serviceaccount/secret.name": sa.secretName,
    "kubernetes.io/serviceaccount/service-account.name": sa.name,
    "kubernetes.io/serviceaccount/service-account.uid": sa.uid,
    sub: `system:serviceaccount:${sa.namespace}:${sa.name}`,
  };
  return `${b64url({ alg: "RS256", kid: "" })}.${b64url(claims)}.${b64urlBytes(crypto.getRandomValues(new Uint8Array(64)))}`;
}

function b64urlBytes(bytes: Uint8Array): string {
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function b64url(obj: unknown): string {
  return b64urlBytes(new TextEncoder().encode(JSON.stringify(obj)));
}
