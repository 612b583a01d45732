/**
 * Which URLs the service may call out to (the external policy service, JWKS and OIDC discovery
 * documents, the Kubernetes TokenReview API, PKI expiry notification targets). `https://` always. Plain `http://` only when the
 * operator opts in with the variable the caller names (e.g. EXTERNAL_POLICY_ALLOW_HTTP=true,
 * AUTH_ALLOW_HTTP=true), or, in development (ENVIRONMENT=development), to a loopback host (a
 * service on the same machine). Callers check when the configuration is written and again
 * before every request, so revoking the permission takes effect at once. Credentials in the URL
 * are refused: a read of the configuration would show them.
 */
import { badRequest } from "./errors";
import { classifyIp, parseHostLiteral } from "./ip";

/** localhost, or an address literal that is loopback (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104). */
export function isLoopbackHost(hostname: string): boolean {
  const lower = hostname.toLowerCase();
  const host = lower.endsWith(".") ? lower.slice(0, -1) : lower;
  if (host === "localhost") return true;
  const ip = parseHostLiteral(host);
  return ip !== null && classifyIp(ip) === "loopback";
}

/** The variables that allow plain http:// for one kind of outbound call. */
export type AllowHttpVar = "EXTERNAL_POLICY_ALLOW_HTTP" | "AUTH_ALLOW_HTTP" | "NOTIFY_ALLOW_HTTP";

export function checkOutboundUrl(env: Env, field: string, raw: string, allowVar: AllowHttpVar): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw badRequest(`${field}: "${raw}" is not a valid URL`);
  }
  if (url.username !== "" || url.password !== "") throw badRequest(`${field}: credentials in the URL are not supported`);
  if (url.protocol === "https:") return url;
  if (url.protocol === "http:") {
    if (env[allowVar] === "true") return url;
    if (env.ENVIRONMENT === "development" && isLoopbackHost(url.hostname)) return url;
    throw badRequest(`${field}: must be an https:// URL (plain http:// needs ${allowVar}=true, or a loopback host in development)`);
  }
  throw badRequest(`${field}: unsupported scheme "${url.protocol.replace(/:$/, "")}"; use https://`);
}
