/**
 * The external policy service webhook, CIEPS request/response version 1 (docs/pki-external-policy.md;
 * upstream's SDK types in sdk/helper/certutil/cieps.go): building the request, POSTing it with
 * the configured timeout, and reading the answer strictly. Plain functions; the issuance that
 * uses them is src/engines/pki/external-policy/issue.ts.
 *
 * Failures are the caller's answer, never a bare 500: the service disabled or unconfigured → 400,
 * unreachable or answering wrongly → 502, slower than `timeout` → 504, refusing the request →
 * 400 with its reason.
 */
import { ApiError, badRequest } from "../../../core/errors";
import type { ExternalPolicyConfig } from "../defaults";
import { checkServiceUrl } from "./config";
import type { AiaUrls } from "../issuance/profile";

export type IssuanceMode = "issue" | "sign" | "ica";

/**
 * `vault_request_values`: the values Lanyard validated or created. The keys are exactly those of
 * upstream's CIEPSVaultParams, because services decode them with unknown fields disallowed (as
 * the reference example service does); `policy_name` is omitted when empty (`omitempty`).
 */
export interface CiepsVaultValues {
  policy_name?: string;
  mount: string;
  ns: string;
  vault_is_performance_standby: boolean;
  vault_is_performance_secondary: boolean;
  issuance_mode: IssuanceMode;
  vault_generated_private_key: boolean;
  requested_issuer_name: string;
  requested_issuer_id: string;
  requested_issuer_cert: string;
  requested_issuance_config: {
    /** Upstream's URLEntries: no delta CRL key, which a strict decoder would refuse. */
    aia_values: { issuing_certificates: string[]; crl_distribution_points: string[]; ocsp_servers: string[] };
    leaf_not_after_behavior: string;
    mount_default_ttl: string;
    mount_max_ttl: string;
  };
}

export interface CiepsRequest {
  request_version: 1;
  request_uuid: string;
  synchronous: true;
  user_request_key_values: Record<string, unknown>;
  vault_request_values: CiepsVaultValues;
}

export interface CiepsResponse {
  request_uuid: string;
  error: string;
  warnings: string[];
  certificate: string;
  issuer_ref: string;
  store_certificate: boolean;
  generate_lease: boolean;
}

export interface RequestInput {
  mode: IssuanceMode;
  policy: string;
  mount: string;
  ns: string;
  /** The caller's body, unparsed, with `csr` set (for issue: the CSR Lanyard made). */
  userValues: Record<string, unknown>;
  issuer: { name: string; id: string; certificate: string; leafNotAfterBehavior: string } | null;
  aia: AiaUrls | null;
  mountDefaultTtl: string;
  mountMaxTtl: string;
}

export function buildCiepsRequest(input: RequestInput, uuid: string = crypto.randomUUID()): CiepsRequest {
  const vault: CiepsVaultValues = {
    ...(input.policy !== "" ? { policy_name: input.policy } : {}),
    mount: input.mount,
    ns: input.ns,
    vault_is_performance_standby: false,
    vault_is_performance_secondary: false,
    issuance_mode: input.mode,
    vault_generated_private_key: input.mode === "issue",
    requested_issuer_name: input.issuer?.name ?? "",
    requested_issuer_id: input.issuer?.id ?? "",
    requested_issuer_cert: input.issuer?.certificate ?? "",
    requested_issuance_config: {
      aia_values: {
        issuing_certificates: input.aia?.issuingCertificates ?? [],
        crl_distribution_points: input.aia?.crlDistributionPoints ?? [],
        ocsp_servers: input.aia?.ocspServers ?? [],
      },
      leaf_not_after_behavior: input.issuer?.leafNotAfterBehavior ?? "err",
      mount_default_ttl: input.mountDefaultTtl,
      mount_max_ttl: input.mountMaxTtl,
    },
  };
  return { request_version: 1, request_uuid: uuid, synchronous: true, user_request_key_values: input.userValues, vault_request_values: vault };
}

/** Answers larger than this are not a certificate template; reading stops there. */
const MAX_RESPONSE_BYTES = 1024 * 1024;

const badGateway = (msg: string) => new ApiError(502, `external policy service: ${msg}`);

/** The configuration, checked usable for a request (400 when it is not). */
export function usableConfig(env: Env, cfg: ExternalPolicyConfig): URL {
  if (!cfg.enabled) throw badRequest("external policy service is not enabled on this mount (see config/external-policy)");
  if (cfg.external_service_url === "") throw badRequest("external policy service has no external_service_url (see config/external-policy)");
  return checkServiceUrl(env, cfg.external_service_url);
}

/**
 * POSTs the request and returns the parsed answer. Redirects are not followed and non-200
 * bodies are discarded, as upstream does (Vault's CIEPS docs): a proxy in front of the service must be
 * transparent. The timeout covers the whole exchange, body included.
 */
export async function callPolicyService(url: URL, timeoutSeconds: number, body: CiepsRequest): Promise<CiepsResponse> {
  const signal = AbortSignal.timeout(timeoutSeconds * 1000);
  let text: string;
  try {
    const res = await fetch(url.toString(), {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify(body),
      redirect: "manual",
      signal,
    });
    if (res.status !== 200) {
      await res.body?.cancel();
      throw badGateway(`answered HTTP ${res.status}; the service must answer 200 (with "error" to refuse a request)`);
    }
    const length = Number(res.headers.get("content-length") ?? "0");
    if (length > MAX_RESPONSE_BYTES) {
      await res.body?.cancel();
      throw badGateway(`the answer is larger than ${MAX_RESPONSE_BYTES} bytes`);
    }
    text = await res.text();
  } catch (e) {
    if (e instanceof ApiError) throw e;
    if (signal.aborted) throw new ApiError(504, `external policy service: no answer within the configured timeout of ${timeoutSeconds}s`);
    // The network error's text may name internal addresses; the log has it, the caller gets the gist.
    console.warn("external policy service request failed", e instanceof Error ? e.message : String(e));
    throw badGateway("unreachable (the connection failed)");
  }
  if (text.length > MAX_RESPONSE_BYTES) throw badGateway(`the answer is larger than ${MAX_RESPONSE_BYTES} bytes`);
  return parseCiepsResponse(text, body.request_uuid);
}

const RESPONSE_KEYS = new Set(["request_uuid", "error", "warnings", "certificate", "issuer_ref", "store_certificate", "generate_lease"]);

/**
 * Reads an answer the way upstream's decoder does (sdk/helper/certutil/cieps.go): a JSON object, unknown fields refused,
 * each field of its type (a JSON null counts as absent, as in Go), and the request's UUID echoed.
 */
export function parseCiepsResponse(text: string, uuid: string): CiepsResponse {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw badGateway("the answer is not JSON");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw badGateway("the answer is not a JSON object");
  const obj = parsed as Record<string, unknown>;
  const unknown = Object.keys(obj).filter((k) => !RESPONSE_KEYS.has(k)).sort();
  if (unknown.length > 0) throw badGateway(`the answer has unknown fields: ${unknown.join(", ")}`);
  const str = (k: string): string => {
    const v = obj[k];
    if (v === undefined || v === null) return "";
    if (typeof v !== "string") throw badGateway(`"${k}" in the answer must be a string`);
    return v;
  };
  const flag = (k: string): boolean => {
    const v = obj[k];
    if (v === undefined || v === null) return false;
    if (typeof v !== "boolean") throw badGateway(`"${k}" in the answer must be a boolean`);
    return v;
  };
  const w = obj.warnings;
  let warnings: string[] = [];
  if (w !== undefined && w !== null) {
    if (!Array.isArray(w) || w.some((x) => typeof x !== "string")) throw badGateway(`"warnings" in the answer must be a list of strings`);
    warnings = w as string[];
  }
  const out: CiepsResponse = {
    request_uuid: str("request_uuid"),
    error: str("error"),
    warnings,
    certificate: str("certificate"),
    issuer_ref: str("issuer_ref"),
    store_certificate: flag("store_certificate"),
    generate_lease: flag("generate_lease"),
  };
  if (out.request_uuid !== uuid) {
    throw badGateway(`the answer's request_uuid "${out.request_uuid.slice(0, 64)}" does not match the request's ${uuid}`);
  }
  return out;
}
