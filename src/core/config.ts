/**
 * Worker configuration (docs/configuration.md). Production refuses to serve without a
 * usable ROOT_TOKEN and SEAL_KEY: every request but sys/health then answers 503 with the reason.
 * A usable SEAL_KEY must also open this database's data (./db/seal-canary.ts): until one does the
 * service is sealed, with the same 503.
 * Production also refuses the sync providers' endpoint overrides (docs/security.md "What each
 * outbound call may reach").
 */
import { BoundedCache } from "./bounded-cache";
import { isValidSealKey, type SealKeys } from "./db/seal";
import { knownOpen, sealProblem } from "./db/seal-canary";
import { parseD1Delay } from "./db/bench-d1";
import { configureCaches, MAX_CACHE_TTL_MS, parseCacheTtl } from "./read-cache";
import { ApiError } from "./errors";
import { DEFAULT_MAX_REQUEST_BYTES } from "./request";

export interface Config {
  rootToken: string;
  seal: SealKeys;
  /** Path of the administrative namespace with a trailing slash, or "" (root only). */
  adminNamespace: string;
  maxBodyBytes: number;
}

/**
 * Base URLs that replace a sync provider's public endpoint (each provider names its own
 * `<NAME>_ENDPOINT` variable), for development and tests against fakes: with one set, a provider
 * call goes wherever it says (http, an IP literal, any port), past the outbound-host safeguard of
 * src/engines/sync/hosts.ts. So outside development (ENVIRONMENT other than "development" is
 * production, wrangler.toml) the service refuses to run with ANY variable named `*_ENDPOINT` set,
 * rather than quietly drop the safeguard. Matching the suffix, not a list, means a new provider's
 * variable is refused without core knowing the provider.
 */
export const ENDPOINT_OVERRIDE_SUFFIX = "_ENDPOINT";

/** The names of the endpoint overrides set to a non-blank value (blank counts as unset, as the connectors read them). */
export function endpointOverridesSet(env: Env): string[] {
  const vars = env as unknown as Record<string, unknown>;
  return Object.keys(vars).filter((name) => {
    if (!name.endsWith(ENDPOINT_OVERRIDE_SUFFIX)) return false;
    const v = vars[name];
    return typeof v === "string" && v.trim() !== "";
  });
}

/**
 * The benchmarks' variables (`BENCH_*`, e.g. BENCH_D1_DELAY_MS, which slows every D1 round trip:
 * ./db/bench-d1.ts) set to a non-blank value. Refused outside development like the endpoint
 * overrides, by prefix, so a new one is refused too.
 */
export function benchVarsSet(env: Env): string[] {
  const vars = env as unknown as Record<string, unknown>;
  return Object.keys(vars).filter((name) => name.startsWith("BENCH_") && typeof vars[name] === "string" && vars[name].trim() !== "");
}

/** What is wrong with the configuration, or null when the service can serve. */
export function configProblem(env: Env): string | null {
  const problems: string[] = [];
  const overrides = env.ENVIRONMENT === "development" ? [] : endpointOverridesSet(env);
  // Named, never echoed: the value is an address the operator may not want shown.
  if (overrides.length > 0) problems.push(`${overrides.join(", ")} ${overrides.length === 1 ? "is" : "are"} set; endpoint overrides are for development (ENVIRONMENT=development) only`);
  const bench = env.ENVIRONMENT === "development" ? [] : benchVarsSet(env);
  if (bench.length > 0) problems.push(`${bench.join(", ")} ${bench.length === 1 ? "is" : "are"} set; benchmark variables are for development (ENVIRONMENT=development) only`);
  if (env.ENVIRONMENT === "development" && Number.isNaN(parseD1Delay(env.BENCH_D1_DELAY_MS))) return "service is not configured: BENCH_D1_DELAY_MS must be a whole number of milliseconds from 0 to 10000";
  if (!env.ROOT_TOKEN || env.ROOT_TOKEN.length < 16) {
    problems.push("ROOT_TOKEN is not set or is shorter than 16 characters");
  }
  const sealKeyBad = !isValidSealKey(env.SEAL_KEY);
  if (sealKeyBad) problems.push("SEAL_KEY is not set or is not base64 of 32 bytes");
  // A bad former key would fail every unseal that reaches it: refused in every environment.
  const badPrevious = (env.SEAL_KEYS_PREVIOUS ?? "").split(",").findIndex((k) => k.trim() !== "" && !isValidSealKey(k));
  if (badPrevious >= 0) return `service is sealed: SEAL_KEYS_PREVIOUS entry ${badPrevious + 1} is not base64 of 32 bytes`;
  // A bad CACHE_TTL_MS is refused in every environment: guessing would silently change a bound.
  if (parseCacheTtl(env.CACHE_TTL_MS) === null) return `service is not configured: CACHE_TTL_MS must be a whole number of milliseconds from 0 to ${MAX_CACHE_TTL_MS}`;
  // Refused, not read as "false": a typo must not silently keep a scraper out, nor let it in.
  if (!isMetricsFlag(env.METRICS_UNAUTHENTICATED)) return 'service is not configured: METRICS_UNAUTHENTICATED must be "true" or "false"';
  if (problems.length === 0) return null;
  // Development may run with a short root token (the default is "dev-root-token"), never without a seal key.
  if (env.ENVIRONMENT === "development" && !sealKeyBad && env.ROOT_TOKEN) return null;
  // Without a key nothing sealed can be opened: Vault's word for that state is "sealed".
  return `${sealKeyBad ? "service is sealed" : "service is not configured"}: ${problems.join("; ")}`;
}

/** METRICS_UNAUTHENTICATED: unset, empty, "true" or "false" (sys/metrics without a token). */
const isMetricsFlag = (v: string | undefined): boolean => v === undefined || v === "" || v === "true" || v === "false";

/**
 * Why the service cannot serve, or null: the configuration (above), then whether the keys open
 * this database's data (one D1 read per isolate, ./db/seal-canary.ts). What sys/health,
 * sys/seal-status, the scheduled jobs and the queue consumers ask before they act.
 */
export async function serviceProblem(env: Env): Promise<string | null> {
  const problem = configProblem(env);
  if (problem) return problem;
  const keys = loadConfig(env).seal;
  return knownOpen(keys) ? null : sealProblem(env.DB, keys);
}

/** For the request path: throws the 503 of a sealed service; no await once the keys are known to open. */
export async function refuseWhileSealed(env: Env, keys: SealKeys): Promise<void> {
  if (knownOpen(keys)) return;
  const problem = await sealProblem(env.DB, keys);
  if (problem) throw new ApiError(503, problem);
}

/**
 * The last configuration read, by the values it was read from: loadConfig runs several times per
 * request (the pipeline, the audit trail, unsealing), and checking the seal key decodes base64.
 * Keyed by the values, not the env object, so a changed variable is read again.
 */
const last = new BoundedCache<Config>("core.config", 1);

export function loadConfig(env: Env): Config {
  const key = [env.ROOT_TOKEN, env.SEAL_KEY, env.SEAL_KEYS_PREVIOUS, env.ADMIN_NAMESPACE, env.MAX_REQUEST_BYTES, env.ENVIRONMENT, env.CACHE_TTL_MS, env.METRICS_UNAUTHENTICATED, env.BENCH_D1_DELAY_MS, ...endpointOverridesSet(env), ...benchVarsSet(env)].join("\u0000");
  const hit = last.get(key);
  if (hit) return hit;
  const config = readConfig(env);
  last.set(key, config);
  return config;
}

function readConfig(env: Env): Config {
  const problem = configProblem(env);
  if (problem) throw new ApiError(503, problem);
  configureCaches(env.CACHE_TTL_MS);
  const max = Number(env.MAX_REQUEST_BYTES ?? "");
  const admin = (env.ADMIN_NAMESPACE ?? "").split("/").filter((s) => s !== "");
  return {
    rootToken: env.ROOT_TOKEN ?? "",
    seal: { current: env.SEAL_KEY ?? "", previous: env.SEAL_KEYS_PREVIOUS },
    adminNamespace: admin.map((s) => `${s}/`).join(""),
    maxBodyBytes: Number.isFinite(max) && max > 0 ? max : DEFAULT_MAX_REQUEST_BYTES,
  };
}
