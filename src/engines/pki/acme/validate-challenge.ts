/**
 * One challenge validation, from the environment and the mount's `dns_resolver` to a result:
 * which resolver, whether the development switch ACME_HTTP01_TARGET applies, the deadline, and
 * the mapping of every failure to an RFC 8555 §6.7 problem (never an exception). The platform
 * (socket dial, fetch) is a parameter: validate.ts passes the Workers runtime's, the unit tests
 * Node's. The validators themselves are validate-http.ts and validate-dns.ts.
 */
import { resolverFor, validateDns01 } from "./validate-dns";
import { validateHttp01 } from "./validate-http";
import { ValidationFailure, dialPolicy, errorText, problem, splitHostPort, type Dial, type ValidationResult } from "./validate-net";

/** Each validation attempt ends within this (Vault: 10 s dial and header timeouts for http-01). */
export const VALIDATION_TIMEOUT_MS = 10_000;

export interface ValidationEnv {
  ENVIRONMENT?: string;
  ACME_HTTP01_TARGET?: string;
}

export interface Platform {
  dial: Dial;
  fetch: typeof fetch;
}

/**
 * ACME_HTTP01_TARGET (`host:port`): in development, every http-01 connection goes there, still
 * with `Host: <identifier>`, so tests reach a client's standalone server on a local port. Set
 * outside development it is refused, loudly: a production Worker must never validate against a
 * fixed address.
 */
export function http01Target(env: ValidationEnv): { host: string; port: number } | null {
  const raw = (env.ACME_HTTP01_TARGET ?? "").trim();
  if (raw === "") return null;
  if (env.ENVIRONMENT !== "development") throw new ValidationFailure("serverInternal", "http-01: ACME_HTTP01_TARGET is set but ENVIRONMENT is not development; refusing to validate against it");
  const hp = splitHostPort(raw);
  if (!hp) throw new ValidationFailure("serverInternal", `http-01: ACME_HTTP01_TARGET "${raw}" is not host:port`);
  return hp;
}

export async function runChallengeValidation(
  platform: Platform,
  env: ValidationEnv,
  cfg: { dnsResolver: string },
  type: "http-01" | "dns-01",
  identifier: string,
  token: string,
  keyAuthorization: string,
  timeoutMs = VALIDATION_TIMEOUT_MS,
): Promise<ValidationResult> {
  const deps = { ...platform, deadline: Date.now() + timeoutMs };
  try {
    if (type === "http-01") {
      const target = http01Target(env);
      // Vault resolves http-01 hosts through dns_resolver when one is set; empty: the platform's resolver.
      const resolver = cfg.dnsResolver.trim() === "" ? null : resolverFor(env, cfg.dnsResolver);
      return await validateHttp01(deps, { identifier, token, keyAuthorization, target, resolver, policy: dialPolicy(env) });
    }
    if (type === "dns-01") return await validateDns01(deps, resolverFor(env, cfg.dnsResolver), identifier, keyAuthorization);
    return problem("malformed", `unsupported challenge type "${String(type)}"`);
  } catch (e) {
    if (e instanceof ValidationFailure) return problem(e.kind, e.message);
    return problem("serverInternal", `${type}: validation failed: ${errorText(e)}`);
  }
}
