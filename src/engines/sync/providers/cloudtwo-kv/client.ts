/**
 * Requests to the key vault (Azure Key Vault REST API): a client-credentials token per cloud, with
 * the client secret or, for a federated destination, a `client_assertion` of type jwt-bearer that
 * Lanyard signs (Microsoft identity platform: client credentials with a federated credential),
 * cached until
 * near expiry; a 401 to a cached token drops it and retries once with a fresh one), the vault URI (its scheme, host and port replaced by
 * CLOUDTWO_ENDPOINT when set), api-version 7.4, and `{error:{code,message,innererror}}` failures
 * turned into ConnectorErrors.
 */
import { envVar, str, type EndpointVar } from "../../destinations/types";
import { bearerRequest, clip, kindOf, oauthTokenAnswer, parseRetryAfter, send, tokenKey, tokenWithOrigin, type BearerToken } from "../../connectors/http";
import { federationCacheParts, identityToken, isFederated } from "../../connectors/federation";
import { ConnectorError, type ConnectorContext } from "../../connectors/types";
import { trimEndChar } from "../../../../core/text";

/** The operator variable that sends every call of this provider to another host (development only). */
export const ENDPOINT_VAR = "CLOUDTWO_ENDPOINT" satisfies EndpointVar;

const PROVIDER = "key vault";
const API_VERSION = "7.4";

/** cloud name (lower case) → [authority host, resource]. */
const CLOUDS: Record<string, [string, string]> = {
  cloud: ["login.microsoftonline.com", "https://vault.azure.net"],
  public: ["login.microsoftonline.com", "https://vault.azure.net"],
  azurepubliccloud: ["login.microsoftonline.com", "https://vault.azure.net"],
  china: ["login.chinacloudapi.cn", "https://vault.azure.cn"],
  azurechinacloud: ["login.chinacloudapi.cn", "https://vault.azure.cn"],
  usgovernment: ["login.microsoftonline.us", "https://vault.usgovcloudapi.net"],
  azureusgovernmentcloud: ["login.microsoftonline.us", "https://vault.usgovcloudapi.net"],
};

function cloudOf(ctx: ConnectorContext): [string, string] {
  return CLOUDS[(str(ctx.dest.connection, "cloud") || "cloud").toLowerCase()] ?? ["login.microsoftonline.com", "https://vault.azure.net"];
}

export function tokenUrl(env: Env, authorityHost: string, tenant: string): string {
  const override = envVar(env, ENDPOINT_VAR);
  const base = override ? trimEndChar(override, "/") : `https://${authorityHost}`;
  return `${base}/${encodeURIComponent(tenant)}/oauth2/v2.0/token`;
}

/** The vault's base URL for outbound calls: CLOUDTWO_ENDPOINT replaces scheme, host and port. */
export function vaultBase(env: Env, keyVaultUri: string): string {
  const u = new URL(keyVaultUri);
  const override = envVar(env, ENDPOINT_VAR);
  if (override) {
    const o = new URL(override);
    u.protocol = o.protocol;
    u.host = o.host;
  }
  return trimEndChar(u.toString(), "/");
}

interface AzureError {
  code: string;
  inner: string | undefined;
  message: string;
}

async function parseError(res: Response): Promise<AzureError> {
  try {
    const b = (await res.json()) as { error?: { code?: unknown; message?: unknown; innererror?: { code?: unknown } }; error_description?: unknown };
    if (typeof b.error === "object" && b.error !== null) {
      return {
        code: typeof b.error.code === "string" ? b.error.code : `HTTP${res.status}`,
        inner: typeof b.error.innererror?.code === "string" ? b.error.innererror.code : undefined,
        message: typeof b.error.message === "string" ? b.error.message : `HTTP ${res.status}`,
      };
    }
    // The token endpoint's shape: {error: "invalid_client", error_description}.
    const raw = b as { error?: unknown; error_description?: unknown };
    return { code: typeof raw.error === "string" ? raw.error : `HTTP${res.status}`, inner: undefined, message: typeof raw.error_description === "string" ? raw.error_description : `HTTP ${res.status}` };
  } catch {
    return { code: `HTTP${res.status}`, inner: undefined, message: `HTTP ${res.status}` };
  }
}

export class KeyVaultError extends ConnectorError {
  constructor(
    readonly status: number,
    readonly azure: AzureError,
    retryAfter: number | undefined,
  ) {
    super(kindOf(status), azure.inner ?? azure.code, `${PROVIDER}: ${clip(azure.message)}`, retryAfter);
  }
}

/** The client-credentials grant's client authentication: the secret, or a federated client assertion. */
async function clientAuth(ctx: ConnectorContext): Promise<Record<string, string>> {
  const c = ctx.dest.connection;
  if (!isFederated(c)) return { client_secret: str(c, "client_secret") };
  return { client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer", client_assertion: await identityToken(ctx) };
}

async function accessToken(ctx: ConnectorContext): Promise<BearerToken> {
  const c = ctx.dest.connection;
  const [authority, resource] = cloudOf(ctx);
  const tenant = str(c, "tenant_id");
  const url = tokenUrl(ctx.env, authority, tenant);
  const federated = isFederated(c);
  const parts = federated ? federationCacheParts(ctx, url, str(c, "client_id"), resource) : ["cloudtwo", url, str(c, "client_id"), str(c, "client_secret"), resource];
  const key = await tokenKey(...parts);
  const step = federated ? "identity provider (federated client assertion)" : "identity provider";
  const { token, cached } = await tokenWithOrigin(key, async () => {
    const body = new URLSearchParams({ grant_type: "client_credentials", client_id: str(c, "client_id"), ...(await clientAuth(ctx)), scope: `${resource}/.default` });
    const res = await send("identity provider", url, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: body.toString() });
    if (!res.ok) {
      const e = await parseError(res);
      throw new ConnectorError(kindOf(res.status), e.code, `${step}: ${clip(e.message)}`, parseRetryAfter(res.headers.get("retry-after")));
    }
    return oauthTokenAnswer(res, step);
  });
  return { token, key, cached };
}

/** One vault call; statuses in `ok` are returned as they are. */
export async function request(ctx: ConnectorContext, method: string, path: string, body?: unknown, ok: number[] = []): Promise<Response> {
  const url = `${vaultBase(ctx.env, str(ctx.dest.connection, "key_vault_uri"))}${path}?api-version=${API_VERSION}`;
  return bearerRequest({
    provider: PROVIDER,
    method,
    url,
    body,
    token: () => accessToken(ctx),
    ok,
    error: async (res) => new KeyVaultError(res.status, await parseError(res), parseRetryAfter(res.headers.get("retry-after"))),
    ctx,
  });
}
