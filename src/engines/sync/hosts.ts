/**
 * Outbound-host safeguards for URLs that come from user input: the key vault URI of a
 * `cloudtwo-kv` destination and the `token_uri` of `cloudthree-sm` credentials decide where the
 * service connects. Unless the provider's endpoint variable is set (development only: the
 * variable replaces the host for every call, so the user's host is never contacted, and
 * src/core/config.ts refuses to serve with one set in production), such a URL must be https on
 * the standard port and name one of the provider's hosts; IP literals are refused, and the
 * message names the kind of a non-public one (src/core/ip.ts reads and classifies them, as for
 * every other caller). Pure functions: no DNS, no I/O. docs/security.md "What each outbound
 * call may reach".
 */
import { classifyIp, describeIpKind, parseHostLiteral } from "../../core/ip";

export interface HostRule {
  /** Field name for messages. */
  field: string;
  /** Exact hosts or, with a leading ".", host suffixes the provider uses. */
  allowedHosts: readonly string[];
  /** The operator's endpoint variable is set, so every syntactically valid URL is accepted. */
  endpointOverride: boolean;
}

/** Why a URL is refused, or null when it is acceptable. Never echoes the URL's credentials. */
export function checkOutboundUrl(raw: string, rule: HostRule): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return `${rule.field}: not a valid absolute URL`;
  }
  if (url.username !== "" || url.password !== "") return `${rule.field}: credentials in the URL are not allowed`;
  if (url.search !== "" || url.hash !== "") return `${rule.field}: a query or fragment is not allowed`;
  if (rule.endpointOverride) {
    return url.protocol === "https:" || url.protocol === "http:" ? null : `${rule.field}: the scheme must be https`;
  }
  if (url.protocol !== "https:") return `${rule.field}: the scheme must be https`;
  if (url.port !== "") return `${rule.field}: only the default https port is allowed`;
  const host = url.hostname.toLowerCase();
  const literal = parseHostLiteral(host);
  if (literal) {
    const kind = classifyIp(literal);
    return kind
      ? `${rule.field}: ${describeIpKind(kind)} addresses are not allowed`
      : `${rule.field}: an IP address is not allowed; use the provider's host name`;
  }
  if (!hostAllowed(host, rule.allowedHosts)) {
    return `${rule.field}: host "${host}" is not one of the provider's hosts (${rule.allowedHosts.map((h) => (h.startsWith(".") ? `*${h}` : h)).join(", ")})`;
  }
  return null;
}

export function hostAllowed(host: string, allowed: readonly string[]): boolean {
  const h = host.replace(/\.$/, "");
  return allowed.some((a) => (a.startsWith(".") ? h.endsWith(a) && h.length > a.length : h === a));
}
