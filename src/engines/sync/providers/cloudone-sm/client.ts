/**
 * Requests to the secrets manager (AWS JSON 1.1, AWS Secrets Manager API Reference) and to STS (AssumeRole, query
 * protocol, XML answers), SigV4-signed, through CLOUDONE_ENDPOINT when set. Failures become
 * ConnectorErrors classified by the provider's error code (not the status: emulators differ).
 */
import { envVar, str, type EndpointVar } from "../../destinations/types";
import { cachedToken, clip, kindOf, parseRetryAfter, send, tokenKey } from "../../connectors/http";
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
    const res = await send("STS", url.toString(), { method: "POST", headers, body });
    const text = new TextDecoder().decode(await res.arrayBuffer());
    if (!res.ok) {
      const code = xmlTag(text, "Code") ?? `HTTP${res.status}`;
      throw new ConnectorError(kindOf(res.status), code, `STS AssumeRole: ${clip(xmlTag(text, "Message") ?? code)}`, parseRetryAfter(res.headers.get("retry-after")));
    }
    const akid = xmlTag(text, "AccessKeyId");
    const secret = xmlTag(text, "SecretAccessKey");
    const token = xmlTag(text, "SessionToken");
    const exp = Date.parse(xmlTag(text, "Expiration") ?? "");
    if (!akid || !secret || !token) throw new ConnectorError("external", "MalformedResponse", "STS AssumeRole: unexpected answer");
    return { token: JSON.stringify([akid, secret, token]), expiresAt: Number.isNaN(exp) ? Date.now() + 900_000 : exp };
  });
  const [accessKeyId, secretAccessKey, sessionToken] = JSON.parse(packed) as [string, string, string];
  return { accessKeyId, secretAccessKey, sessionToken };
}

async function credentials(ctx: ConnectorContext): Promise<AwsCredentials> {
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
