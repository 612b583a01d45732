/**
 * Helpers shared by the connectors' request functions (each connector's client.ts): timeouts,
 * Retry-After, status classification, a per-isolate cache of provider access tokens, the OAuth
 * token answer, RS256 JWTs, and the one bearer-token JSON call. A call made for a destination
 * (`ctx` given) goes through the destination's rate-limit gate (../limits.ts, docs/secrets-sync.md "4. Provider limits are respected");
 * token endpoints are called without one.
 */
import { BoundedCache } from "../../../core/bounded-cache";
import { bytesToBase64Url, sha256Hex } from "../../../core/encoding";
import { gatedFetch } from "../limits";
import { parseRetryAfter } from "../limits/throttle";
import { ConnectorError, type ConnectorContext } from "./types";

export { parseRetryAfter };

/** Outbound calls give up after this long and count as a provider failure (retried). */
const REQUEST_TIMEOUT_MS = 10_000;

/**
 * fetch with a timeout; network failures and timeouts become retryable ConnectorErrors. With
 * `ctx` (a call to the destination's API) it waits for the destination's gate first.
 */
export async function send(provider: string, url: string, init: RequestInit, ctx?: ConnectorContext): Promise<Response> {
  const run = async () => {
    try {
      return await fetch(url, { ...init, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
    } catch (e) {
      const timeout = e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError");
      throw new ConnectorError("external", timeout ? "Timeout" : "NetworkError", `${provider}: ${timeout ? "request timed out" : "request failed"}`);
    }
  };
  if (!ctx) return run();
  return gatedFetch(ctx, provider, { method: init.method ?? "GET", url: new URL(url), headers: new Headers(init.headers) }, run);
}

/** The class of a failed HTTP status: 429 and 5xx are the provider's, other 4xx the client's. */
export function kindOf(status: number): "client" | "external" {
  return status === 429 || status >= 500 || status === 408 ? "external" : "client";
}

/** Error text safe to store: one line, bounded. Provider messages never carry our values. */
export function clip(s: string, max = 300): string {
  const one = s.replace(/\s+/g, " ").trim();
  return one.length > max ? `${one.slice(0, max)}…` : one;
}

interface CachedToken {
  token: string;
  expiresAt: number;
}

/** Provider tokens by a digest of their credentials; at most 1,024, the oldest evicted first. */
const tokens = new BoundedCache<CachedToken>("sync.providerTokens", 1024);
/** Tokens are refreshed this long before their expiry. */
const EARLY_REFRESH_MS = 5 * 60_000;

/**
 * A provider token from the cache, or a fresh one from `fetchToken` (which returns the token and
 * its expiry in ms). The key must identify the credentials (a hash of them), never contain them.
 */
export async function cachedToken(key: string, fetchToken: () => Promise<CachedToken>, now = Date.now()): Promise<string> {
  return (await tokenWithOrigin(key, fetchToken, now)).token;
}

/** As cachedToken, and whether the token came from the cache (`cached`) or was fetched now. */
export async function tokenWithOrigin(key: string, fetchToken: () => Promise<CachedToken>, now = Date.now()): Promise<{ token: string; cached: boolean }> {
  const hit = tokens.get(key);
  if (hit && hit.expiresAt - EARLY_REFRESH_MS > now) return { token: hit.token, cached: true };
  const fresh = await fetchToken();
  tokens.set(key, fresh);
  return { token: fresh.token, cached: false };
}

/** A bearer token for one call, where it came from, and its cache key. */
export interface BearerToken {
  token: string;
  key: string;
  cached: boolean;
}

/**
 * Sends a call with a provider token; when the provider answers 401 to a token that came from
 * the cache (revoked, rotated, or the provider forgot it before its stated expiry), the token is
 * dropped, a fresh one obtained and the call sent once more. A 401 to a fresh token is the
 * caller's problem (credentials, permissions) and is returned as it is, the token dropped.
 */
async function withTokenRetry(getToken: () => Promise<BearerToken>, callWith: (token: string) => Promise<Response>): Promise<Response> {
  let t = await getToken();
  let res = await callWith(t.token);
  if (res.status === 401 && t.cached) {
    await res.body?.cancel();
    dropToken(t.key);
    t = await getToken();
    res = await callWith(t.token);
  }
  if (res.status === 401) dropToken(t.key);
  return res;
}

/** Forgets a cached token (after the provider rejected it). */
function dropToken(key: string): void {
  tokens.delete(key);
}

/** Cache key for credentials: type, purpose and a digest of the secret material. */
export async function tokenKey(...parts: string[]): Promise<string> {
  return sha256Hex(parts.join("\u0000"));
}

/** An RS256 JWT signed with a PKCS#8 PEM key (service accounts, repository-host apps). */
export async function signJwtRs256(pkcs8: Uint8Array<ArrayBuffer>, header: Record<string, unknown>, claims: Record<string, unknown>): Promise<string> {
  const key = await crypto.subtle.importKey("pkcs8", pkcs8, { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, false, ["sign"]);
  const part = (o: Record<string, unknown>) => bytesToBase64Url(new TextEncoder().encode(JSON.stringify(o)));
  const input = `${part(header)}.${part(claims)}`;
  const sig = await crypto.subtle.sign("RSASSA-PKCS1-v1_5", key, new TextEncoder().encode(input));
  return `${input}.${bytesToBase64Url(new Uint8Array(sig))}`;
}

/**
 * The token of an OAuth 2.0 token answer (RFC 6749 §5.1: access_token, expires_in seconds, one
 * hour when absent) and its expiry in ms; `who` names the token endpoint in the error.
 */
export async function oauthTokenAnswer(res: Response, who: string): Promise<CachedToken> {
  const b = (await res.json()) as { access_token?: unknown; expires_in?: unknown };
  if (typeof b.access_token !== "string") throw new ConnectorError("external", "MalformedResponse", `${who}: unexpected token answer`);
  return { token: b.access_token, expiresAt: Date.now() + (typeof b.expires_in === "number" ? b.expires_in : 3600) * 1000 };
}

/** One connector call with `Authorization: Bearer`. */
export interface BearerRequest {
  /** Names the provider in errors. */
  provider: string;
  method: string;
  url: string;
  /** Sent as JSON when present. */
  body?: unknown;
  /** Headers every call carries, besides authorization and content-type. */
  headers?: Record<string, string>;
  /** A configured token, used as it is; or a cached one, retried once on a 401 (withTokenRetry). */
  token: string | (() => Promise<BearerToken>);
  /** Statuses beyond 2xx that are returned, not thrown (404 for deletes, 409 for creates). */
  ok?: number[];
  /** The provider's error for any other answer. */
  error: (res: Response) => ConnectorError | Promise<ConnectorError>;
  /** The destination the call is for: its rate-limit gate applies. */
  ctx?: ConnectorContext;
}

/** Sends a bearer-token JSON call; returns a 2xx answer (or one in `ok`), throws `error` otherwise. */
export async function bearerRequest(r: BearerRequest): Promise<Response> {
  const payload = r.body === undefined ? undefined : JSON.stringify(r.body);
  const callWith = (token: string) => {
    const headers: Record<string, string> = { ...r.headers, authorization: `Bearer ${token}` };
    if (payload !== undefined) headers["content-type"] = "application/json";
    return send(r.provider, r.url, { method: r.method, headers, body: payload }, r.ctx);
  };
  const res = typeof r.token === "string" ? await callWith(r.token) : await withTokenRetry(r.token, callWith);
  if (res.ok || (r.ok ?? []).includes(res.status)) return res;
  throw await r.error(res);
}
