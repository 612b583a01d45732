/**
 * Requests to the repository host's REST API (GitHub REST API, Actions secrets) through REPOHOST_ENDPOINT when
 * set: the auth header (an access token, or an installation token obtained with the app's RS256
 * JWT and cached until near expiry), the API version, a User-Agent (the host refuses requests
 * without one), and failures turned into ConnectorErrors (rate limits are the provider's).
 */
import { envVar, str, type EndpointVar } from "../../destinations/types";
import { parsePem } from "../../rsa";
import { bearerRequest, clip, kindOf, parseRetryAfter, send, signJwtRs256, tokenKey, tokenWithOrigin, type BearerToken } from "../../connectors/http";
import { ConnectorError, type ConnectorContext } from "../../connectors/types";
import { trimEndChar } from "../../../../core/text";

/** The operator variable that sends every call of this provider to another host (development only). */
export const ENDPOINT_VAR = "REPOHOST_ENDPOINT" satisfies EndpointVar;

const PROVIDER = "repository host";

export function apiBase(env: Env): string {
  return trimEndChar(envVar(env, ENDPOINT_VAR) ?? "https://api.github.com", "/");
}

async function errorFrom(res: Response, what: string): Promise<ConnectorError> {
  let message = `HTTP ${res.status}`;
  try {
    const b: unknown = await res.json();
    if (typeof b === "object" && b !== null && typeof (b as { message?: unknown }).message === "string") message = (b as { message: string }).message;
  } catch {
    // not JSON: keep the status
  }
  const retryAfter = parseRetryAfter(res.headers.get("retry-after"));
  // Secondary rate limits answer 403 with Retry-After or an exhausted quota: the provider's.
  const rateLimited = res.status === 403 && (retryAfter !== undefined || res.headers.get("x-ratelimit-remaining") === "0");
  const kind = rateLimited ? "external" : kindOf(res.status);
  const code = rateLimited ? "RateLimited" : `HTTP${res.status}`;
  return new ConnectorError(kind, code, `${PROVIDER} ${what}: ${clip(message)}`, retryAfter);
}

const baseHeaders = {
  accept: "application/vnd.github+json",
  "x-github-api-version": "2022-11-28",
  "user-agent": "lanyard-secrets-sync",
};

/** An installation token for the destination's app, cached until 5 minutes before expiry. */
async function installationToken(ctx: ConnectorContext, appName: string, installationId: string): Promise<BearerToken> {
  const app = await ctx.loadApp(appName);
  if (!app) throw new ConnectorError("client", "AppNotFound", `${PROVIDER}: the repository-host app "${appName}" is not configured`);
  const key = await tokenKey("repohost-app", apiBase(ctx.env), String(app.appId), app.fingerprint, installationId);
  const { token, cached } = await tokenWithOrigin(key, async () => {
    const now = Math.floor(Date.now() / 1000);
    const jwt = await signJwtRs256(parsePem(app.privateKey).der, { alg: "RS256", typ: "JWT" }, { iat: now - 60, exp: now + 540, iss: String(app.appId) });
    const res = await send(PROVIDER, `${apiBase(ctx.env)}/app/installations/${encodeURIComponent(installationId)}/access_tokens`, {
      method: "POST",
      headers: { ...baseHeaders, authorization: `Bearer ${jwt}` },
    });
    if (!res.ok) throw await errorFrom(res, "installation token");
    const b = (await res.json()) as { token?: unknown; expires_at?: unknown };
    if (typeof b.token !== "string") throw new ConnectorError("external", "MalformedResponse", `${PROVIDER}: unexpected installation token answer`);
    const exp = typeof b.expires_at === "string" ? Date.parse(b.expires_at) : NaN;
    return { token: b.token, expiresAt: Number.isNaN(exp) ? Date.now() + 3_600_000 : exp };
  });
  return { token, key, cached };
}

/** One API call; `okStatuses` beyond 2xx (404 for deletes) are returned, not thrown. */
export async function request(ctx: ConnectorContext, method: string, path: string, body?: unknown, okStatuses: number[] = []): Promise<Response> {
  const conn = ctx.dest.connection;
  const accessToken = str(conn, "access_token");
  return bearerRequest({
    provider: PROVIDER,
    method,
    url: `${apiBase(ctx.env)}${path}`,
    body,
    headers: baseHeaders,
    // A configured access token is used as it is; an app's installation token is cached, so a
    // 401 to it gets one retry with a fresh one.
    token: accessToken !== "" ? accessToken : () => installationToken(ctx, str(conn, "app_name"), str(conn, "installation_id")),
    ok: okStatuses,
    error: (res) => errorFrom(res, `${method} ${path.replace(/\/secrets\/[^/]+$/, "/secrets/…")}`),
    ctx,
  });
}
