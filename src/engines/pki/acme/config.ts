/**
 * config/acme (Vault API /pki/config/acme; docs/pki-acme.md) and the directory a request addresses.
 *
 * The configuration: `enabled` (false), `allowed_issuers` / `allowed_roles` (["*"]),
 * `allow_role_ext_key_usage` (false: ACME certificates carry only serverAuth), the
 * `default_directory_policy` of the plain `acme/` directory (`sign-verbatim`, `role:<name>`,
 * `forbid`), `eab_policy` (`not-required`, `new-account-required`, `always-required`),
 * `dns_resolver` and `max_ttl` (90 days, Vault's). A POST merges: only the keys sent change.
 * Vault answers a bad value with a wrapped 500; Lanyard answers 400 naming the field.
 * Enabling needs config/cluster `path`, the base of every directory URL (Vault: "ACME feature
 * requires local cluster 'path' field configuration to be set").
 *
 * A directory is one of `acme/`, `issuer/:ref/acme/`, `roles/:role/acme/`,
 * `issuer/:ref/roles/:role/acme/` (Vault API /pki/acme/directory and its prefixed forms): it fixes the role (none = sign-verbatim) and the
 * issuer every order through it uses.
 */
import { badRequest } from "../../../core/errors";
import { defineFields, type FieldValues } from "../../../core/fields";
import { MAX_URL_BYTES } from "../../../core/limits";
import type { Req } from "../../../core/route";
import { resolveIssuerIn } from "../ca/issuers";
import type { Role } from "../policy/roles";
import type { IssuanceState, IssuerRow } from "../storage/store";
import { getRole } from "../storage/store";
import type { Db } from "../../../core/db/client";
import { acmeError } from "./problem";
import { dnsResolverProblem } from "./validate-dns";
import { trimEndChar } from "../../../core/text";

export type EabPolicy = "not-required" | "new-account-required" | "always-required";
const EAB_POLICIES: readonly EabPolicy[] = ["not-required", "new-account-required", "always-required"];

export interface AcmeConfig {
  enabled: boolean;
  allowed_issuers: string[];
  allowed_roles: string[];
  allow_role_ext_key_usage: boolean;
  default_directory_policy: string;
  dns_resolver: string;
  eab_policy: EabPolicy;
  /** Seconds. */
  max_ttl: number;
  /** ACME profiles (draft-aaron-acme-profiles): profile name → role of the mount. */
  profiles: Record<string, string>;
}

export const ACME_CONFIG_DEFAULTS: Readonly<AcmeConfig> = {
  enabled: false,
  allowed_issuers: ["*"],
  allowed_roles: ["*"],
  allow_role_ext_key_usage: false,
  default_directory_policy: "sign-verbatim",
  dns_resolver: "",
  eab_policy: "not-required",
  max_ttl: 90 * 24 * 3600,
  profiles: {},
};

export const acmeConfigFields = defineFields({
  enabled: { type: "bool", description: "Serve ACME on this mount's directories." },
  allowed_issuers: { type: "comma-string-slice", description: "Issuers ACME may sign with (\"*\": any)." },
  allowed_roles: { type: "comma-string-slice", description: "Roles usable through roles/:role/acme/ (\"*\": any)." },
  allow_role_ext_key_usage: { type: "bool", description: "Keep the role's extended key usages (default: serverAuth only)." },
  default_directory_policy: { type: "string", description: "What acme/ issues with: sign-verbatim, role:<name> or forbid." },
  dns_resolver: { type: "string", maxBytes: MAX_URL_BYTES, description: "Resolver for challenge lookups: <ip>:<port> (TCP) or a DNS-over-HTTPS URL; empty: Cloudflare's DoH." },
  eab_policy: { type: "string", description: "not-required, new-account-required or always-required." },
  max_ttl: { type: "duration", description: "Longest validity of an ACME certificate (default 90 days)." },
  profiles: { type: "string-map", description: "ACME profiles offered by the directories without a role in their path: profile name → role name." },
});

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** A stored value over the defaults (a row written before a field existed reads its default). */
export function decodeAcmeConfig(stored: unknown): AcmeConfig {
  const out: AcmeConfig = structuredClone(ACME_CONFIG_DEFAULTS) as AcmeConfig;
  if (!isObject(stored)) return out;
  const target = out as unknown as Record<string, unknown>;
  for (const [k, def] of Object.entries(ACME_CONFIG_DEFAULTS)) {
    const v = stored[k];
    if (v === undefined) continue;
    const sameType = Array.isArray(def)
      ? Array.isArray(v) && v.every((x) => typeof x === "string")
      : isObject(def)
        ? isObject(v) && Object.values(v).every((x) => typeof x === "string")
        : typeof v === typeof def;
    if (sameType) target[k] = v;
  }
  return out;
}

/**
 * dns_resolver: Vault's `<ip>:<port>` (queried over TCP), or a DNS-over-HTTPS URL (RFC 8484);
 * plain http:// only to a loopback host in development (docs/pki-acme.md "Development-only switches"). The rule is the validator's
 * (validate-dns.ts), checked here at write time and again at every validation.
 */
function checkDnsResolver(env: Env, v: string): void {
  const why = dnsResolverProblem(env, v);
  if (why !== null) throw badRequest(why);
}

function checkList(field: "allowed_issuers" | "allowed_roles", list: string[]): string[] {
  const out = list.map((x) => x.trim()).filter((x) => x !== "");
  if (out.length === 0) throw badRequest(`${field}: must take a non-zero length value; use "*" to allow any`);
  const star = out.indexOf("*");
  if (star >= 0 && out.length > 1) throw badRequest(`${field}: cannot use '*' together with names (index ${star})`);
  return out;
}

/** A profile name: a short token, as Let's Encrypt's ("classic", "shortlived", "tlsserver"). */
const PROFILE_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** profiles: each name a token, each role existing and allowed for ACME (400 naming the field). */
async function checkProfiles(db: Db, mountId: string, cfg: AcmeConfig, profiles: Record<string, string>): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const entries = Object.entries(profiles);
  if (entries.length > 32) throw badRequest("profiles: at most 32 profiles");
  for (const [name, rawRole] of entries) {
    const role = rawRole.trim();
    if (!PROFILE_NAME_RE.test(name)) throw badRequest(`profiles: profile name ${JSON.stringify(name.slice(0, 64))} must be letters, digits, '.', '_' or '-' (at most 64)`);
    if (role === "" || !(await getRole(db, mountId, role))) throw badRequest(`profiles: profile ${name}: role ${JSON.stringify(role)} does not exist`);
    if (!allows(cfg.allowed_roles, role)) throw badRequest(`profiles: profile ${name}: role ${role} is not in allowed_roles`);
    out[name] = role;
  }
  return out;
}

/** config/acme POST: the merged configuration, validated against the mount's issuers and roles. */
export async function mergeAcmeConfig(req: Req, mountId: string, current: AcmeConfig, state: IssuanceState, f: FieldValues<typeof acmeConfigFields>): Promise<AcmeConfig> {
  const next: AcmeConfig = { ...current };
  if (req.has("enabled")) next.enabled = f.enabled ?? false;
  if (req.has("allow_role_ext_key_usage")) next.allow_role_ext_key_usage = f.allow_role_ext_key_usage ?? false;
  if (req.has("allowed_issuers")) next.allowed_issuers = checkList("allowed_issuers", f.allowed_issuers ?? []);
  if (req.has("allowed_roles")) next.allowed_roles = checkList("allowed_roles", f.allowed_roles ?? []);
  if (req.has("default_directory_policy")) next.default_directory_policy = (f.default_directory_policy ?? "").trim();
  if (req.has("dns_resolver")) next.dns_resolver = (f.dns_resolver ?? "").trim();
  if (req.has("max_ttl")) next.max_ttl = f.max_ttl ?? 0;
  if (req.has("eab_policy")) {
    const p = (f.eab_policy ?? "").trim();
    if (!(EAB_POLICIES as readonly string[]).includes(p)) {
      throw badRequest("eab_policy: invalid eab policy name provided, valid values are 'not-required', 'new-account-required', 'always-required'");
    }
    next.eab_policy = p as EabPolicy;
  }

  for (const ref of next.allowed_issuers) {
    if (ref === "*") continue;
    try {
      resolveIssuerIn(state.issuers, state.config.issuers, ref);
    } catch (e) {
      throw badRequest(`allowed_issuers: failed validating allowed_issuers: unable to fetch issuer ${ref}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  for (const name of next.allowed_roles) {
    if (name !== "*" && !(await getRole(req.db, mountId, name))) throw badRequest(`allowed_roles: allowed_role ${name} is not a valid acme role: role not found`);
  }
  const policy = next.default_directory_policy;
  if (policy.startsWith("role:")) {
    const name = policy.slice(5);
    if (!next.allowed_roles.includes("*") && !next.allowed_roles.includes(name)) {
      throw badRequest(`default_directory_policy: default directory policy ${policy} was not specified in allowed_roles: [${next.allowed_roles.join(" ")}]`);
    }
    if (name === "" || !(await getRole(req.db, mountId, name))) throw badRequest(`default_directory_policy: role ${JSON.stringify(name)} does not exist`);
  } else if (policy !== "sign-verbatim" && policy !== "forbid") {
    throw badRequest(`default_directory_policy: invalid value ${JSON.stringify(policy)}: use sign-verbatim, forbid or role:<name>`);
  }
  if (req.has("profiles")) next.profiles = await checkProfiles(req.db, mountId, next, f.profiles ?? {});
  checkDnsResolver(req.env, next.dns_resolver);
  if (next.max_ttl < 0) throw badRequest("max_ttl: must not be negative");
  if (next.enabled && state.config.cluster.path === "") {
    throw badRequest("enabled: ACME feature requires local cluster 'path' field configuration to be set (config/cluster)");
  }
  return next;
}

// -- directories --------------------------------------------------------------------------------

export interface Directory {
  /** "acme", "issuer/<ref>/acme", "roles/<role>/acme" or "issuer/<ref>/roles/<role>/acme". */
  prefix: string;
  /** Absolute URL of the directory's base: `<cluster path>/<prefix>`. */
  base: string;
  /** The role orders use, null for sign-verbatim. */
  role: Role | null;
  roleName: string;
  /** The issuer reference as configured (path, role's issuer_ref, or "default"), and its row. */
  issuerRef: string;
  issuer: IssuerRow;
}

/** The directory prefix of a request path relative to the mount ("roles/web/acme/new-order" → "roles/web/acme"). */
export function directoryPrefix(params: Record<string, string>): string {
  const parts: string[] = [];
  if (params.issuer_ref !== undefined) parts.push("issuer", params.issuer_ref);
  if (params.role !== undefined) parts.push("roles", params.role);
  parts.push("acme");
  return parts.join("/");
}

const allows = (list: string[], ...names: string[]): boolean => list.includes("*") || names.some((n) => n !== "" && list.includes(n));

/**
 * The role and issuer of a directory (Vault's getAcmeRoleAndIssuer): the path's role, else the
 * default_directory_policy for acme/ and issuer/:ref/acme/; the path's issuer, else the role's
 * issuer_ref, else the default issuer; both checked against allowed_roles / allowed_issuers.
 */
export async function resolveDirectory(db: Db, mountId: string, cfg: AcmeConfig, state: IssuanceState, params: Record<string, string>): Promise<Directory> {
  const prefix = directoryPrefix(params);
  // Enabling checks it, but config/cluster path may have been cleared since: no URL can be built.
  if (state.config.cluster.path === "") throw acmeError("malformed", "ACME needs this mount's config/cluster path, which is not set", 404);
  let roleName = "";
  let role: Role | null = null;
  if (params.role !== undefined) {
    roleName = params.role;
    if (!allows(cfg.allowed_roles, roleName)) throw acmeError("unauthorized", `role ${roleName} is not allowed for ACME on this mount (config/acme allowed_roles)`, 403);
    role = state.role;
  } else {
    const policy = cfg.default_directory_policy;
    if (policy === "forbid") throw acmeError("unauthorized", "this mount's default_directory_policy forbids the directory without a role; use roles/:role/acme/", 403);
    if (policy.startsWith("role:")) {
      roleName = policy.slice(5);
      role = await getRole(db, mountId, roleName);
    }
  }
  if (roleName !== "" && !role) throw acmeError("unauthorized", `role ${roleName} does not exist`, 403);
  const issuerRef = params.issuer_ref ?? (role?.issuer_ref || "default");
  let issuer: IssuerRow;
  try {
    issuer = resolveIssuerIn(state.issuers, state.config.issuers, issuerRef);
  } catch (e) {
    throw acmeError("unauthorized", `issuer ${issuerRef}: ${e instanceof Error ? e.message : String(e)}`, 403);
  }
  if (!allows(cfg.allowed_issuers, issuer.id, issuer.name)) {
    throw acmeError("unauthorized", `issuer ${issuerRef} is not allowed for ACME on this mount (config/acme allowed_issuers)`, 403);
  }
  const base = `${trimEndChar(state.config.cluster.path, "/")}/${prefix}`;
  return { prefix, base, role, roleName, issuerRef, issuer };
}
