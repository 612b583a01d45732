/**
 * The token settings every auth-method role carries (Vault's sdk/helper/tokenutil;
 * Vault API: /auth/approle/role/:role_name): what a login token gets. Plain functions: field
 * declarations to spread into a role route, parsing with Vault's defaults, aliases and messages, and the read view.
 *
 * Vault's legacy names are accepted as aliases (`policies`, `ttl`, `max_ttl`, `period`,
 * `num_uses`, `bound_cidrs`), as hvac 0.11 sends them; giving both names of one setting is
 * Vault's 400 `cannot specify both "token_x" and "x"`. Lists may be comma strings.
 */
import { parseCidrs } from "../../core/cidr";
import { badRequest } from "../../core/errors";
import { defineFields } from "../../core/fields";
import type { Req } from "../../core/route";
import { MAX_TOKEN_POLICIES } from "../tokens";

export const tokenParamFields = defineFields({
  token_policies: { type: "comma-string-slice", description: "Policies of the tokens issued." },
  token_ttl: { type: "duration", description: "Initial TTL of the tokens issued (0: the mount's default)." },
  token_max_ttl: { type: "duration", description: "Maximum lifetime of the tokens issued (0: the mount's maximum)." },
  token_explicit_max_ttl: { type: "duration", description: "Hard cap on the tokens' lifetime, renewals included." },
  token_period: { type: "duration", description: "Makes the tokens periodic: each renewal extends them by this." },
  token_num_uses: { type: "int", description: "Uses of each token (0: unlimited)." },
  token_bound_cidrs: { type: "comma-string-slice", description: "CIDR blocks the tokens may be used from." },
  token_no_default_policy: { type: "bool", description: "Do not add the default policy." },
  token_type: { type: "string", description: "service (or default, default-service); batch tokens are not supported." },
  policies: { type: "comma-string-slice", description: "Deprecated alias of token_policies." },
  ttl: { type: "duration", description: "Deprecated alias of token_ttl." },
  max_ttl: { type: "duration", description: "Deprecated alias of token_max_ttl." },
  period: { type: "duration", description: "Deprecated alias of token_period." },
  num_uses: { type: "int", description: "Deprecated alias of token_num_uses." },
  bound_cidrs: { type: "comma-string-slice", description: "Deprecated alias of token_bound_cidrs." },
});

export interface TokenParams {
  policies: string[];
  /** Seconds; 0 = the mount's default TTL. */
  ttl: number;
  /** Seconds; 0 = the mount's maximum TTL. */
  maxTtl: number;
  explicitMaxTtl: number;
  period: number;
  numUses: number;
  boundCidrs: string[];
  noDefaultPolicy: boolean;
  /** "" (unset; reads show "default") or "service". */
  type: string;
}

export const DEFAULT_TOKEN_PARAMS: TokenParams = {
  policies: [],
  ttl: 0,
  maxTtl: 0,
  explicitMaxTtl: 0,
  period: 0,
  numUses: 0,
  boundCidrs: [],
  noDefaultPolicy: false,
  type: "",
};

/**
 * Vault's policyutil.SanitizePolicies (trimmed, lower-cased, deduplicated, sorted), refusing
 * `root`. Vault stores such a role and refuses each of its logins ("auth methods cannot create
 * root tokens", vault/request_handling.go handleLoginRequest); Lanyard refuses the write itself, so
 * whoever may write a role (a token allowed only `auth/<mount>/role/*`) learns at once that it
 * cannot lead to root, and login.ts's loginPolicies still refuses a role stored before the rule.
 */
export function sanitizePolicies(list: string[], field = "token_policies"): string[] {
  const out = [...new Set(list.map((p) => p.trim().toLowerCase()).filter((p) => p !== ""))].sort();
  if (out.length > MAX_TOKEN_POLICIES) throw badRequest(`${field}: at most ${MAX_TOKEN_POLICIES} policies, ${out.length} were given`);
  if (out.includes("root")) throw badRequest(`${field}: the "root" policy cannot be given to login tokens; auth methods cannot create root tokens`);
  return out;
}

type Alias = readonly [modern: keyof typeof tokenParamFields, legacy: keyof typeof tokenParamFields];
const ALIASES: readonly Alias[] = [
  ["token_policies", "policies"],
  ["token_ttl", "ttl"],
  ["token_max_ttl", "max_ttl"],
  ["token_period", "period"],
  ["token_num_uses", "num_uses"],
  ["token_bound_cidrs", "bound_cidrs"],
];

/**
 * The role's token settings after a write: on create (prev null) from the defaults, on update
 * only the keys sent change. Validation and messages as tokenutil.ParseTokenFields.
 */
export function tokenParamsFrom(req: Req, prev: TokenParams | null): TokenParams {
  const f = req.fields as Record<string, unknown>;
  const has = (k: string) => req.has(k);
  for (const [modern, legacy] of ALIASES) {
    if (has(modern) && has(legacy)) throw badRequest(`cannot specify both "${modern}" and "${legacy}"`);
  }
  const pick = <T>(modern: string, legacy: string): T | undefined => (has(modern) ? (f[modern] as T) : has(legacy) ? (f[legacy] as T) : undefined);
  const p: TokenParams = { ...(prev ?? DEFAULT_TOKEN_PARAMS) };

  const policies = pick<string[]>("token_policies", "policies");
  if (policies !== undefined) p.policies = sanitizePolicies(policies, has("token_policies") ? "token_policies" : "policies");
  const ttl = pick<number>("token_ttl", "ttl");
  if (ttl !== undefined) p.ttl = nonNegative("token_ttl", ttl);
  const maxTtl = pick<number>("token_max_ttl", "max_ttl");
  if (maxTtl !== undefined) p.maxTtl = nonNegative("token_max_ttl", maxTtl);
  const period = pick<number>("token_period", "period");
  if (period !== undefined) p.period = nonNegative("token_period", period);
  const numUses = pick<number>("token_num_uses", "num_uses");
  if (numUses !== undefined) {
    if (numUses < 0) throw badRequest("'token_num_uses' cannot be negative");
    p.numUses = numUses;
  }
  const cidrs = pick<string[]>("token_bound_cidrs", "bound_cidrs");
  if (cidrs !== undefined) p.boundCidrs = parseCidrs("token_bound_cidrs", cidrs);
  if (has("token_explicit_max_ttl")) p.explicitMaxTtl = nonNegative("token_explicit_max_ttl", f.token_explicit_max_ttl as number);
  if (has("token_no_default_policy")) p.noDefaultPolicy = f.token_no_default_policy as boolean;
  if (has("token_type")) p.type = tokenType(req, f.token_type as string);

  if (p.ttl > 0 && p.maxTtl > 0 && p.ttl > p.maxTtl) throw badRequest("'token_ttl' cannot be greater than 'token_max_ttl'");
  if (p.maxTtl > 0 && req.mount && req.mount.maxLeaseTtl > 0 && p.maxTtl > req.mount.maxLeaseTtl) {
    req.warnings.push("token_max_ttl is greater than the backend mount's maximum TTL value; issued tokens' max TTL value will be truncated");
  }
  return p;
}

function nonNegative(field: string, v: number): number {
  if (v < 0) throw badRequest(`${field}: cannot be negative`);
  return v;
}

/** Lanyard issues service tokens only; Vault's "default-service" is coerced with its warning. */
function tokenType(req: Req, raw: string): string {
  const t = raw.trim().toLowerCase();
  if (t === "" || t === "default") return "";
  if (t === "service") return "service";
  if (t === "default-service") {
    req.warnings.push("default-service has no useful meaning; adjusting to service");
    return "service";
  }
  if (t === "batch" || t === "default-batch") throw badRequest("token_type: batch tokens are not supported; use service");
  throw badRequest("invalid 'token_type' value");
}

/** The token settings of a role read: the token_* names and, as Vault's reads do, the legacy ones. */
export function tokenParamsView(p: TokenParams): Record<string, unknown> {
  return {
    token_bound_cidrs: p.boundCidrs,
    token_explicit_max_ttl: p.explicitMaxTtl,
    token_max_ttl: p.maxTtl,
    token_no_default_policy: p.noDefaultPolicy,
    token_num_uses: p.numUses,
    token_period: p.period,
    token_policies: p.policies,
    token_ttl: p.ttl,
    token_type: p.type === "" ? "default" : p.type,
    policies: p.policies,
    ttl: p.ttl,
    max_ttl: p.maxTtl,
    period: p.period,
    num_uses: p.numUses,
    bound_cidrs: p.boundCidrs,
  };
}

/** TokenParams from a stored role document (tolerates missing keys of older rows). */
export function tokenParamsOf(stored: unknown): TokenParams {
  const o = (typeof stored === "object" && stored !== null ? stored : {}) as Partial<TokenParams>;
  return { ...DEFAULT_TOKEN_PARAMS, ...o };
}
