/**
 * The JWT method's configuration, `auth/<mount>/config` (Vault API: /auth/jwt/config;
 * vault-plugin-auth-jwt path_config.go): where keys come from, which issuer and algorithms are
 * accepted, the default role. A write replaces the whole config (omitted fields reset), except
 * `namespace_in_state`, which keeps its value (true for a new config).
 *
 * Validation follows Vault's order, first failure wins, all 400: exactly one key source; OIDC
 * client id and secret together; the discovery document and the JWKS are fetched *at write time*
 * (so a typo is caught now, not at the first login) and the fetched set primes this isolate's key
 * cache; PEM keys must parse; `jwt_supported_algs` must be known algorithms.
 *
 * `jwks_ca_pem` / `oidc_discovery_ca_pem` are validated (PEM certificates) and stored, but a
 * Worker's fetch cannot use a custom CA: the platform trust store is used (see ./keys.ts), and the
 * write says so in a warning. `oidc_client_secret` is sealed in storage and never read back. The
 * browser OIDC flow is not served by this module; its fields are kept so a Vault config
 * round-trips, with a warning naming each one set. `provider_config` (provider-specific group
 * fetching) is refused. docs/security.md "Fields Lanyard does not act on".
 */
import { badRequest } from "../../../core/errors";
import { decodePemBlocks, PemError } from "../../../core/encoding";
import { defineFields } from "../../../core/fields";
import { MAX_URL_BYTES } from "../../../core/limits";
import type { Req } from "../../../core/route";
import { checkPemKey, KeySourceError, type RemoteKeyCache, type RemoteSource } from "./keys";
import { SUPPORTED_ALGS, type KeySet } from "./verify";

export const configFields = defineFields({
  oidc_discovery_url: { type: "string", maxBytes: MAX_URL_BYTES, description: "OIDC issuer URL; its discovery document names the JWKS." },
  oidc_discovery_ca_pem: { type: "string", description: "Accepted and stored; Workers use the platform trust store." },
  oidc_client_id: { type: "string", description: "OIDC client id (browser flow)." },
  oidc_client_secret: { type: "string", description: "OIDC client secret (browser flow); sealed, never returned." },
  oidc_response_mode: { type: "string", description: "query (default) or form_post." },
  oidc_response_types: { type: "comma-string-slice", description: "code (default) or id_token." },
  jwks_url: { type: "string", maxBytes: MAX_URL_BYTES, description: "URL of a JSON Web Key Set used to verify tokens." },
  jwks_ca_pem: { type: "string", description: "Accepted and stored; Workers use the platform trust store." },
  jwks_pairs: { type: "any", description: "Not supported; use jwks_url." },
  jwt_validation_pubkeys: { type: "comma-string-slice", description: "PEM public keys used to verify tokens." },
  jwt_supported_algs: { type: "comma-string-slice", description: "Accepted signing algorithms (empty: RS*, ES*, PS*, EdDSA)." },
  bound_issuer: { type: "string", maxBytes: MAX_URL_BYTES, description: "The iss claim tokens must carry." },
  default_role: { type: "string", description: "Role used when a login names none." },
  provider_config: { type: "map", description: "Not supported (provider-specific group fetching); must be empty." },
  namespace_in_state: { type: "bool", description: "Kept for compatibility (browser flow); false warns." },
  unsupported_critical_cert_extensions: { type: "comma-string-slice", description: "Stored for compatibility; a value warns (the platform's TLS checks apply)." },
});

export interface JwtConfig {
  oidc_discovery_url: string;
  oidc_discovery_ca_pem: string;
  oidc_client_id: string;
  oidc_client_secret: string;
  oidc_response_mode: string;
  oidc_response_types: string[];
  jwks_url: string;
  jwks_ca_pem: string;
  jwt_validation_pubkeys: string[];
  jwt_supported_algs: string[];
  bound_issuer: string;
  default_role: string;
  provider_config: Record<string, unknown>;
  namespace_in_state: boolean;
  unsupported_critical_cert_extensions: string[];
}

/** The config keys sealed in storage. */
export const SEALED_CONFIG_KEYS = ["oidc_client_secret"] as const;

const str = (v: unknown): string => (typeof v === "string" ? v : "");
const strs = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);

/** A config from its stored document (sealed values already opened by method-store). */
export function decodeConfig(doc: Record<string, unknown>): JwtConfig {
  return {
    oidc_discovery_url: str(doc.oidc_discovery_url),
    oidc_discovery_ca_pem: str(doc.oidc_discovery_ca_pem),
    oidc_client_id: str(doc.oidc_client_id),
    oidc_client_secret: str(doc.oidc_client_secret),
    oidc_response_mode: str(doc.oidc_response_mode),
    oidc_response_types: strs(doc.oidc_response_types),
    jwks_url: str(doc.jwks_url),
    jwks_ca_pem: str(doc.jwks_ca_pem),
    jwt_validation_pubkeys: strs(doc.jwt_validation_pubkeys),
    jwt_supported_algs: strs(doc.jwt_supported_algs),
    bound_issuer: str(doc.bound_issuer),
    default_role: str(doc.default_role),
    provider_config: typeof doc.provider_config === "object" && doc.provider_config !== null && !Array.isArray(doc.provider_config) ? (doc.provider_config as Record<string, unknown>) : {},
    namespace_in_state: doc.namespace_in_state !== false,
    unsupported_critical_cert_extensions: strs(doc.unsupported_critical_cert_extensions),
  };
}

/** Vault's config read: everything but the client secret. */
export function configView(c: JwtConfig): Record<string, unknown> {
  const { oidc_client_secret: _secret, ...rest } = c;
  return { ...rest, jwks_pairs: [] };
}

/** The key set a config verifies with. */
export function keySetOf(c: JwtConfig, cache: RemoteKeyCache): KeySet {
  if (c.jwt_validation_pubkeys.length > 0) return { kind: "pem", pems: c.jwt_validation_pubkeys };
  const source: RemoteSource = c.jwks_url !== "" ? { kind: "jwks", url: c.jwks_url } : { kind: "discovery", url: c.oidc_discovery_url };
  return { kind: "remote", source, cache };
}

/** A CA bundle must be one or more PEM certificates (Vault parses it into a cert pool). */
function checkCaPem(field: string, pem: string): void {
  if (pem.trim() === "") return;
  let blocks;
  try {
    blocks = decodePemBlocks(pem);
  } catch (e) {
    throw badRequest(`error checking ${field}: ${e instanceof PemError ? e.message : "invalid PEM data"}`);
  }
  if (blocks.length === 0 || blocks.some((b) => b.label !== "CERTIFICATE")) {
    throw badRequest(`error checking ${field}: could not parse any certificates from the PEM data`);
  }
}

const sentNonEmpty = (v: unknown): boolean => v !== undefined && v !== null && v !== "" && !(Array.isArray(v) && v.length === 0);

/** Builds the new config from a write and checks it (fetching what it names); throws Vault's 400s. */
export async function configFromWrite(
  req: Req<typeof configFields>,
  existing: JwtConfig | null,
  cache: RemoteKeyCache,
): Promise<JwtConfig> {
  const f = req.fields;
  if (sentNonEmpty(f.jwks_pairs)) throw badRequest("jwks_pairs: not supported; configure one jwks_url");
  if (f.provider_config !== undefined && Object.keys(f.provider_config).length > 0) {
    throw badRequest("provider_config: not supported; Lanyard fetches no groups or claims from identity providers");
  }
  const c: JwtConfig = {
    oidc_discovery_url: (f.oidc_discovery_url ?? "").trim(),
    oidc_discovery_ca_pem: f.oidc_discovery_ca_pem ?? "",
    oidc_client_id: f.oidc_client_id ?? "",
    oidc_client_secret: f.oidc_client_secret ?? "",
    oidc_response_mode: f.oidc_response_mode ?? "",
    oidc_response_types: f.oidc_response_types ?? [],
    jwks_url: (f.jwks_url ?? "").trim(),
    jwks_ca_pem: f.jwks_ca_pem ?? "",
    jwt_validation_pubkeys: f.jwt_validation_pubkeys ?? [],
    jwt_supported_algs: f.jwt_supported_algs ?? [],
    bound_issuer: f.bound_issuer ?? "",
    default_role: (f.default_role ?? "").trim().toLowerCase(),
    provider_config: f.provider_config ?? {},
    namespace_in_state: req.has("namespace_in_state") ? f.namespace_in_state === true : (existing?.namespace_in_state ?? true),
    unsupported_critical_cert_extensions: f.unsupported_critical_cert_extensions ?? [],
  };

  const sources = [c.oidc_discovery_url !== "", c.jwt_validation_pubkeys.length > 0, c.jwks_url !== ""].filter(Boolean).length;
  if (sources !== 1) throw badRequest("exactly one of 'jwt_validation_pubkeys', 'jwks_url' or 'oidc_discovery_url' must be set");
  if (c.oidc_client_id !== "" && c.oidc_client_secret === "") throw badRequest("both 'oidc_client_id' and 'oidc_client_secret' must be set for OIDC");

  if (c.oidc_discovery_url !== "") {
    checkCaPem("oidc_discovery_ca_pem", c.oidc_discovery_ca_pem);
    try {
      await cache.load(req.env, { kind: "discovery", url: c.oidc_discovery_url });
    } catch (e) {
      // Vault logs the reason and answers the bare message; the reason helps and holds no secret.
      if (e instanceof KeySourceError) throw badRequest(`error checking oidc discovery URL: ${e.message}`);
      throw e;
    }
  } else if (c.oidc_client_id !== "") {
    throw badRequest("'oidc_discovery_url' must be set for OIDC");
  } else if (c.jwks_url !== "") {
    checkCaPem("jwks_ca_pem", c.jwks_ca_pem);
    try {
      await cache.load(req.env, { kind: "jwks", url: c.jwks_url });
    } catch (e) {
      if (e instanceof KeySourceError) throw badRequest(`error checking jwks URL ${c.jwks_url}: ${e.message}`);
      throw e;
    }
  } else {
    for (const pem of c.jwt_validation_pubkeys) {
      try {
        await checkPemKey(pem);
      } catch (e) {
        if (e instanceof KeySourceError) throw badRequest(`error parsing public key: ${e.message}`);
        throw e;
      }
    }
  }

  for (const alg of c.jwt_supported_algs) {
    if (!SUPPORTED_ALGS.includes(alg)) throw badRequest(`invalid jwt_supported_algs: unsupported signing algorithm "${alg}"`);
  }
  for (const t of c.oidc_response_types) {
    if (t !== "code" && t !== "id_token") {
      throw badRequest(`invalid response_types [${c.oidc_response_types.join(" ")}]. 'code' and 'id_token' are allowed`);
    }
  }
  if (c.oidc_response_mode !== "" && c.oidc_response_mode !== "query" && c.oidc_response_mode !== "form_post") {
    throw badRequest(`invalid response_mode: "${c.oidc_response_mode}"`);
  }
  if (c.oidc_response_mode === "query" && c.oidc_response_types.includes("id_token")) {
    throw badRequest("query response_mode may not be used with an id_token response_type");
  }
  req.warnings.push(...configWarnings(c, req.has("namespace_in_state")));
  return c;
}

const BROWSER_FLOW = "the browser OIDC flow (oidc/auth_url, oidc/callback) is not served; stored so the configuration reads back";
const TRUST_STORE = "stored but not used: a Worker's fetch cannot be given a CA, so the platform trust store verifies the server";

/** A warning naming each stored field that changes nothing here (none for a plain JWT config). */
export function configWarnings(c: JwtConfig, sentNamespaceInState: boolean): string[] {
  const out: string[] = [];
  if (c.jwks_ca_pem.trim() !== "") out.push(`jwks_ca_pem: ${TRUST_STORE}`);
  if (c.oidc_discovery_ca_pem.trim() !== "") out.push(`oidc_discovery_ca_pem: ${TRUST_STORE}`);
  if (c.unsupported_critical_cert_extensions.length > 0) {
    out.push("unsupported_critical_cert_extensions: stored but not used: the platform's TLS checks apply unchanged");
  }
  if (c.oidc_client_id !== "") out.push(`oidc_client_id: ${BROWSER_FLOW}`);
  if (c.oidc_client_secret !== "") out.push(`oidc_client_secret: ${BROWSER_FLOW}`);
  // Vault's defaults ("query", ["code"]) ask for nothing.
  if (c.oidc_response_mode !== "" && c.oidc_response_mode !== "query") out.push(`oidc_response_mode: ${BROWSER_FLOW}`);
  if (c.oidc_response_types.some((t) => t !== "code")) out.push(`oidc_response_types: ${BROWSER_FLOW}`);
  if (sentNamespaceInState && !c.namespace_in_state) out.push(`namespace_in_state: ${BROWSER_FLOW}`);
  return out;
}
