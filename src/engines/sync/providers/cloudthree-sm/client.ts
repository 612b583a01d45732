/**
 * Requests to the secret manager (Google Secret Manager API): the service account's RS256 JWT exchanged for
 * an access token at the key's token_uri (or CLOUDTHREE_ENDPOINT/token), cached until near
 * expiry (a 401 to a cached token drops it and retries once with a fresh one); for a federated
 * destination, Lanyard's identity token exchanged at Google STS (RFC 8693 token exchange) and,
 * with `service_account_email`, the service account impersonated (IAM Credentials
 * generateAccessToken), cached per destination; API calls under CLOUDTHREE_ENDPOINT or the public host; failures
 * (`{error:{code,message,status}}`) turned into ConnectorErrors.
 */
import { envVar, str, type EndpointVar } from "../../destinations/types";
import { parsePem } from "../../rsa";
import { bearerRequest, clip, kindOf, oauthTokenAnswer, parseRetryAfter, send, signJwtRs256, tokenKey, tokenWithOrigin, type BearerToken } from "../../connectors/http";
import { federationCacheParts, identityToken, isFederated } from "../../connectors/federation";
import { ConnectorError, type ConnectorContext } from "../../connectors/types";
import { trimEndChar } from "../../../../core/text";

/** The operator variable that sends every call of this provider to another host (development only). */
export const ENDPOINT_VAR = "CLOUDTHREE_ENDPOINT" satisfies EndpointVar;

const PROVIDER = "secret manager";
const SCOPE = "https://www.googleapis.com/auth/cloud-platform";

interface ServiceAccount {
  client_email: string;
  private_key: string;
  private_key_id: string;
  token_uri: string;
  project_id: string;
}

function account(ctx: ConnectorContext): ServiceAccount {
  let v: unknown;
  try {
    v = JSON.parse(str(ctx.dest.connection, "credentials"));
  } catch {
    throw new ConnectorError("client", "InvalidCredentials", `${PROVIDER}: the credentials are not JSON`);
  }
  const o = (typeof v === "object" && v !== null ? v : {}) as Record<string, unknown>;
  const s = (k: string) => (typeof o[k] === "string" ? (o[k] as string) : "");
  return { client_email: s("client_email"), private_key: s("private_key"), private_key_id: s("private_key_id"), token_uri: s("token_uri") || "https://oauth2.googleapis.com/token", project_id: s("project_id") };
}

function projectOf(ctx: ConnectorContext): string {
  return str(ctx.dest.connection, "project_id") || account(ctx).project_id;
}

export function apiBase(env: Env): string {
  return trimEndChar(envVar(env, ENDPOINT_VAR) ?? "https://secretmanager.googleapis.com", "/");
}

export function tokenEndpoint(env: Env, tokenUri: string): string {
  const override = envVar(env, ENDPOINT_VAR);
  return override ? `${trimEndChar(override, "/")}/token` : tokenUri;
}

/** The ConnectorError of a failed answer; `step` names who refused ("sts token exchange", "secret manager GET"). */
async function errorOf(res: Response, step: string): Promise<ConnectorError> {
  let status = `HTTP${res.status}`;
  let message = `HTTP ${res.status}`;
  try {
    const b = (await res.json()) as { error?: unknown; error_description?: unknown };
    if (typeof b.error === "object" && b.error !== null) {
      const e = b.error as { status?: unknown; message?: unknown };
      if (typeof e.status === "string") status = e.status;
      if (typeof e.message === "string") message = e.message;
    } else if (typeof b.error === "string") {
      status = b.error;
      message = typeof b.error_description === "string" ? b.error_description : b.error;
    }
  } catch {
    // not JSON
  }
  return new ConnectorError(kindOf(res.status), status, `${step}: ${clip(message)}`, parseRetryAfter(res.headers.get("retry-after")));
}

/** Google STS and IAM Credentials, or CLOUDTHREE_ENDPOINT in their place. */
export function federationUrls(env: Env): { sts: string; iam: string } {
  const override = envVar(env, ENDPOINT_VAR);
  return override ? { sts: `${trimEndChar(override, "/")}/v1/token`, iam: trimEndChar(override, "/") } : { sts: "https://sts.googleapis.com/v1/token", iam: "https://iamcredentials.googleapis.com" };
}

/** STS token exchange of the identity token (Google STS API: v1/token), then impersonation when configured. */
async function federatedToken(ctx: ConnectorContext): Promise<{ token: string; expiresAt: number }> {
  const c = ctx.dest.connection;
  const urls = federationUrls(ctx.env);
  const body = new URLSearchParams({
    grant_type: "urn:ietf:params:oauth:grant-type:token-exchange",
    audience: str(c, "identity_token_audience"),
    scope: SCOPE,
    requested_token_type: "urn:ietf:params:oauth:token-type:access_token",
    subject_token_type: "urn:ietf:params:oauth:token-type:jwt",
    subject_token: await identityToken(ctx),
  });
  const res = await send("sts", urls.sts, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: body.toString() });
  if (!res.ok) throw await errorOf(res, "sts token exchange");
  const federated = await oauthTokenAnswer(res, "sts token exchange");
  const email = str(c, "service_account_email");
  if (email === "") return federated;
  const iam = await send("iamcredentials", `${urls.iam}/v1/projects/-/serviceAccounts/${encodeURIComponent(email)}:generateAccessToken`, {
    method: "POST",
    headers: { authorization: `Bearer ${federated.token}`, "content-type": "application/json" },
    body: JSON.stringify({ scope: [SCOPE], lifetime: "3600s" }),
  });
  if (!iam.ok) throw await errorOf(iam, "iamcredentials generateAccessToken");
  const b = (await iam.json()) as { accessToken?: unknown; expireTime?: unknown };
  const exp = typeof b.expireTime === "string" ? Date.parse(b.expireTime) : NaN;
  if (typeof b.accessToken !== "string") throw new ConnectorError("external", "MalformedResponse", "iamcredentials generateAccessToken: unexpected answer");
  return { token: b.accessToken, expiresAt: Number.isNaN(exp) ? Date.now() + 3600_000 : exp };
}

async function accessToken(ctx: ConnectorContext): Promise<BearerToken> {
  if (isFederated(ctx.dest.connection)) {
    const key = await tokenKey(...federationCacheParts(ctx, str(ctx.dest.connection, "service_account_email"), federationUrls(ctx.env).sts));
    const { token, cached } = await tokenWithOrigin(key, () => federatedToken(ctx));
    return { token, key, cached };
  }
  const sa = account(ctx);
  const url = tokenEndpoint(ctx.env, sa.token_uri);
  const key = await tokenKey("cloudthree", url, sa.client_email, sa.private_key_id, sa.private_key);
  const { token, cached } = await tokenWithOrigin(key, async () => {
    let der: Uint8Array<ArrayBuffer>;
    try {
      der = parsePem(sa.private_key).der;
    } catch {
      throw new ConnectorError("client", "InvalidCredentials", `${PROVIDER}: the credentials' private_key is not a PEM key`);
    }
    const now = Math.floor(Date.now() / 1000);
    const jwt = await signJwtRs256(der, { alg: "RS256", typ: "JWT", kid: sa.private_key_id }, { iss: sa.client_email, scope: SCOPE, aud: sa.token_uri, iat: now, exp: now + 3600 });
    const body = new URLSearchParams({ grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer", assertion: jwt });
    const res = await send("token endpoint", url, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: body.toString() });
    if (!res.ok) throw await errorOf(res, `${PROVIDER} token exchange`);
    return oauthTokenAnswer(res, PROVIDER);
  });
  return { token, key, cached };
}

/** One API call under /v1/projects/{project}; statuses in `ok` are returned as they are. */
export async function request(ctx: ConnectorContext, method: string, path: string, body?: unknown, ok: number[] = []): Promise<Response> {
  const url = `${apiBase(ctx.env)}/v1/projects/${encodeURIComponent(projectOf(ctx))}${path}`;
  return bearerRequest({ provider: PROVIDER, method, url, body, token: () => accessToken(ctx), ok, error: (res) => errorOf(res, `${PROVIDER} ${method}`), ctx });
}
