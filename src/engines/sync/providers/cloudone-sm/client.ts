/**
 * Requests to the secrets manager (AWS JSON 1.1, AWS Secrets Manager API Reference) and to STS
 * (AssumeRole, SigV4-signed; AssumeRoleWithWebIdentity, unsigned, with an identity token Lanyard
 * signs: AWS STS API Reference; query protocol, XML answers), through CLOUDONE_ENDPOINT when set.
 * Temporary credentials are cached until 5 minutes before they expire (../../connectors/http.ts),
 * per destination for a federated one; never stored, logged or audited. Failures become
 * ConnectorErrors classified by the provider's error code (not the status: emulators differ).
 */
import { envVar, str, type EndpointVar } from "../../destinations/types";
import { cachedToken, clip, kindOf, parseRetryAfter, send, tokenKey } from "../../connectors/http";
import { federationCacheParts, identityToken, isFederated } from "../../connectors/federation";
import { signedHeaders, type AwsCredentials } from "./sigv4";
import { ConnectorError, type ConnectorContext } from "../../connectors/types";

/** The operator variable that sends every call of this provider to another host (development only). */
export const ENDPOINT_VAR = "CLOUDONE_ENDPOINT" satisfies EndpointVar;

const PROVIDER = "secrets manager";
const DEFAULT_REGION = "us-east-1";

function regionOf(ctx: ConnectorContext): string {
  return str(ctx.dest.connection, "region") || DEFAULT_REGION;
}

/** Base URL of a service: the endpoint variable when set, else the regional endpoint. */
export function serviceUrl(env: Env, service: "secretsmanager" | "sts", region: string): string {
  const override = envVar(env, ENDPOINT_VAR);
  if (override) return override.endsWith("/") ? override : `${override}/`;
  return `https://${service}.${region}.amazonaws.com/`;
}

const EXTERNAL_CODES = new Set(["InternalServiceError", "InternalFailure", "ServiceUnavailable", "ThrottlingException", "Throttling", "RequestTimeout"]);

async function baseCredentials(ctx: ConnectorContext): Promise<AwsCredentials> {
  const accessKeyId = str(ctx.dest.connection, "access_key_id");
  const secretAccessKey = str(ctx.dest.connection, "secret_access_key");
  if (accessKeyId === "" || secretAccessKey === "") {
    // Workers have no ambient credential chain: keys must be configured on the destination.
    throw new ConnectorError("client", "MissingCredentials", `${PROVIDER}: access_key_id and secret_access_key are required (no environment credentials in this runtime)`);
  }
  return { accessKeyId, secretAccessKey };
}

function xmlTag(xml: string, tag: string): string | undefined {
  return new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml)?.[1];
}

/** The Credentials of an STS answer packed for the token cache, or the ConnectorError naming `step`. */
async function stsCredentials(res: Response, step: string): Promise<{ token: string; expiresAt: number }> {
  const text = new TextDecoder().decode(await res.arrayBuffer());
  if (!res.ok) {
    const code = xmlTag(text, "Code") ?? `HTTP${res.status}`;
    throw new ConnectorError(kindOf(res.status), code, `${step}: ${clip(xmlTag(text, "Message") ?? code)}`, parseRetryAfter(res.headers.get("retry-after")));
  }
  const akid = xmlTag(text, "AccessKeyId");
  const secret = xmlTag(text, "SecretAccessKey");
  const token = xmlTag(text, "SessionToken");
  const exp = Date.parse(xmlTag(text, "Expiration") ?? "");
  if (!akid || !secret || !token) throw new ConnectorError("external", "MalformedResponse", `${step}: unexpected answer`);
  return { token: JSON.stringify([akid, secret, token]), expiresAt: Number.isNaN(exp) ? Date.now() + 900_000 : exp };
}

function unpack(packed: string): AwsCredentials {
  const [accessKeyId, secretAccessKey, sessionToken] = JSON.parse(packed) as [string, string, string];
  return { accessKeyId, secretAccessKey, sessionToken };
}

/** STS AssumeRole with ExternalId; the temporary credentials are cached until near expiry. */
async function assumeRole(ctx: ConnectorContext, base: AwsCredentials, roleArn: string): Promise<AwsCredentials> {
  const externalId = str(ctx.dest.connection, "external_id");
  const region = regionOf(ctx);
  const key = await tokenKey("cloudone-sts", base.accessKeyId, base.secretAccessKey, roleArn, externalId);
  const packed = await cachedToken(key, async () => {
    const params = new URLSearchParams({ Action: "AssumeRole", Version: "2011-06-15", RoleArn: roleArn, RoleSessionName: "lanyard-sync", DurationSeconds: "3600" });
    if (externalId) params.set("ExternalId", externalId);
    const body = params.toString();
    const url = new URL(serviceUrl(ctx.env, "sts", region));
    const headers = await signedHeaders(base, { method: "POST", url, headers: { "content-type": "application/x-www-form-urlencoded" }, body, region, service: "sts" });
    return stsCredentials(await send("STS", url.toString(), { method: "POST", headers, body }), "STS AssumeRole");
  });
  return unpack(packed);
}

/**
 * STS AssumeRoleWithWebIdentity (AWS STS API Reference): the role's trust policy names Lanyard's
 * issuer as an OIDC provider and the token's audience; the call is not signed (the token is the
 * credential). The session name names the destination, so CloudTrail shows which one acted.
 */
async function assumeRoleWithWebIdentity(ctx: ConnectorContext, roleArn: string): Promise<AwsCredentials> {
  const region = regionOf(ctx);
  const key = await tokenKey(...federationCacheParts(ctx, roleArn, region));
  const packed = await cachedToken(key, async () => {
    const session = `lanyard-${ctx.dest.name}`.replace(/[^\w+=,.@-]/g, "-").slice(0, 64);
    const body = new URLSearchParams({
      Action: "AssumeRoleWithWebIdentity",
      Version: "2011-06-15",
      RoleArn: roleArn,
      RoleSessionName: session,
      WebIdentityToken: await identityToken(ctx),
      DurationSeconds: "3600",
    }).toString();
    const url = serviceUrl(ctx.env, "sts", region);
    return stsCredentials(await send("STS", url, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body }), "sts AssumeRoleWithWebIdentity");
  });
  return unpack(packed);
}

async function credentials(ctx: ConnectorContext): Promise<AwsCredentials> {
  if (isFederated(ctx.dest.connection)) return assumeRoleWithWebIdentity(ctx, str(ctx.dest.connection, "role_arn"));
  const base = await baseCredentials(ctx);
  const role = str(ctx.dest.connection, "role_arn");
  return role ? assumeRole(ctx, base, role) : base;
}

/** One secrets-manager call; returns the parsed answer or throws a ConnectorError with its code. */
export async function call(ctx: ConnectorContext, operation: string, payload: Record<string, unknown>): Promise<Record<string, unknown>> {
  const creds = await credentials(ctx);
  const region = regionOf(ctx);
  const url = new URL(serviceUrl(ctx.env, "secretsmanager", region));
  const body = JSON.stringify(payload);
  const headers = await signedHeaders(creds, {
    method: "POST",
    url,
    headers: { "content-type": "application/x-amz-json-1.1", "x-amz-target": `secretsmanager.${operation}` },
    body,
    region,
    service: "secretsmanager",
  });
  const res = await send(PROVIDER, url.toString(), { method: "POST", headers, body }, ctx);
  const text = new TextDecoder().decode(await res.arrayBuffer());
  let parsed: Record<string, unknown> = {};
  try {
    const v: unknown = text ? JSON.parse(text) : {};
    if (typeof v === "object" && v !== null) parsed = v as Record<string, unknown>;
  } catch {
    parsed = {};
  }
  if (res.ok) return parsed;
  const rawType = typeof parsed.__type === "string" ? parsed.__type : (res.headers.get("x-amzn-errortype") ?? `HTTP${res.status}`);
  const code = rawType.slice(rawType.indexOf("#") + 1).split(":")[0] ?? rawType;
  const message = typeof parsed.message === "string" ? parsed.message : typeof parsed.Message === "string" ? parsed.Message : code;
  const kind = EXTERNAL_CODES.has(code) ? "external" : kindOf(res.status);
  throw new ConnectorError(kind, code, `${PROVIDER} ${operation}: ${clip(message)}`, parseRetryAfter(res.headers.get("retry-after")));
}
