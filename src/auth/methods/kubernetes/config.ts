/**
 * `auth/<kubernetes mount>/config` (Vault API: /auth/kubernetes/config; vault-plugin-auth-kubernetes
 * path_config.go): the fields, the checks a write makes, the stored shape and the read view.
 * A write replaces the whole configuration. `token_reviewer_jwt` is sealed at rest
 * (method-store.ts putMethodConfig) and never read back: reads show `token_reviewer_jwt_set`.
 *
 * Differences a Worker forces, each documented here and in index.ts:
 * - `kubernetes_host` must be a URL the service may call (src/core/outbound-url.ts: https://, or
 *   http:// with AUTH_ALLOW_HTTP=true or to a loopback host in development); Vault also takes a
 *   bare host[:port].
 * - `kubernetes_ca_cert` is checked (at least one parseable certificate, as Go's
 *   AppendCertsFromPEM) and stored, but fetch() cannot trust a custom CA: the platform's trust
 *   store verifies the API server. The write says so in a warning.
 * - `disable_local_ca_jwt` is stored and shown; a Worker runs in no pod, so there is no local CA or
 *   service-account token to default to either way: both values behave as Vault outside a pod.
 * - `use_annotations_as_alias_metadata` is stored and shown; Lanyard has no identity aliases, so it
 *   has no effect, and true is answered with a warning.
 */
import { pemArmor, pemBodyBytes } from "../../../core/encoding";
import { badRequest } from "../../../core/errors";
import { defineFields } from "../../../core/fields";
import { MAX_URL_BYTES } from "../../../core/limits";
import { looksLikeJwt, parsePemKeys } from "./claims";
import { tokenReviewUrl } from "./token-review";

export const configFields = defineFields({
  kubernetes_host: { type: "string", default: "", maxBytes: MAX_URL_BYTES, description: "URL of the Kubernetes API server (https://)." },
  kubernetes_ca_cert: { type: "string", default: "", description: "PEM CA certificate of the API server (validated and stored; the platform trust store is used)." },
  token_reviewer_jwt: { type: "string", default: "", description: "Service-account JWT allowed to create TokenReviews; empty: each client's own JWT." },
  pem_keys: { type: "comma-string-slice", default: [], description: "PEM public keys or certificates to verify service-account JWT signatures with." },
  issuer: { type: "string", default: "", maxBytes: MAX_URL_BYTES, description: "Deprecated: the JWT issuer to require when disable_iss_validation is false." },
  disable_iss_validation: { type: "bool", default: true, description: "Deprecated: skip the issuer check." },
  disable_local_ca_jwt: { type: "bool", default: false, description: "Accepted for compatibility; a Worker has no pod-local CA or token." },
  use_annotations_as_alias_metadata: { type: "bool", default: false, description: "Accepted for compatibility; Lanyard has no identity aliases." },
});

/** The stored configuration (token_reviewer_jwt opened). */
export interface KubeConfig {
  kubernetes_host: string;
  kubernetes_ca_cert: string;
  token_reviewer_jwt: string;
  pem_keys: string[];
  issuer: string;
  disable_iss_validation: boolean;
  disable_local_ca_jwt: boolean;
  use_annotations_as_alias_metadata: boolean;
}

export const SEALED_KEYS = ["token_reviewer_jwt"] as const;

/** Reads one DER TLV header: [content start, content end], or null when it does not fit. */
function tlv(der: Uint8Array, at: number, end: number): { tag: number; start: number; end: number } | null {
  if (at + 2 > end) return null;
  const tag = der[at] ?? 0;
  let len = der[at + 1] ?? 0;
  let start = at + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4 || start + n > end) return null;
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + (der[start + i] ?? 0);
    start += n;
  }
  if (start + len > end) return null;
  return { tag, start, end: start + len };
}

/**
 * Whether the DER has an X.509 Certificate's outer shape: SEQUENCE { tbsCertificate SEQUENCE
 * (starting with [0] version or INTEGER serial), signatureAlgorithm SEQUENCE, signature BIT STRING }
 * filling the whole block.
 */
function certificateShaped(der: Uint8Array): boolean {
  const outer = tlv(der, 0, der.length);
  if (!outer || outer.tag !== 0x30 || outer.end !== der.length) return false;
  const tbs = tlv(der, outer.start, outer.end);
  if (!tbs || tbs.tag !== 0x30) return false;
  const first = tlv(der, tbs.start, tbs.end);
  if (!first || (first.tag !== 0xa0 && first.tag !== 0x02)) return false;
  const alg = tlv(der, tbs.end, outer.end);
  if (!alg || alg.tag !== 0x30) return false;
  const sig = tlv(der, alg.end, outer.end);
  return sig !== null && sig.tag === 0x03 && sig.end === outer.end;
}

/** Go's CertPool.AppendCertsFromPEM succeeds when one CERTIFICATE block parses. */
export function hasValidCertificate(pem: string): boolean {
  return pemArmor(pem).some(({ label, body }) => {
    if (label !== "CERTIFICATE") return false;
    const der = pemBodyBytes(body);
    return der !== null && certificateShaped(der);
  });
}

/** Field values as the config route coerced them: the stored shape, before validation. */
export type ConfigInput = KubeConfig;

/** Checks a config write (upstream's messages where it has them) and returns what to store. */
export async function configFrom(env: Env, input: ConfigInput): Promise<KubeConfig> {
  const host = input.kubernetes_host.trim();
  if (host === "") throw badRequest("no host provided");
  tokenReviewUrl(env, host);
  const ca = input.kubernetes_ca_cert.trim();
  if (ca !== "" && !hasValidCertificate(ca)) throw badRequest("The provided CA PEM data contains no valid certificates");
  const reviewer = input.token_reviewer_jwt.trim();
  if (reviewer !== "" && !looksLikeJwt(reviewer)) throw badRequest("token_reviewer_jwt: not a JWT (three base64url parts, JSON header and claims)");
  return {
    kubernetes_host: host,
    kubernetes_ca_cert: ca,
    token_reviewer_jwt: reviewer,
    pem_keys: await parsePemKeys(input.pem_keys),
    issuer: input.issuer.trim(),
    disable_iss_validation: input.disable_iss_validation,
    disable_local_ca_jwt: input.disable_local_ca_jwt,
    use_annotations_as_alias_metadata: input.use_annotations_as_alias_metadata,
  };
}

/** A warning naming each stored setting that changes nothing here (docs/security.md). */
export function configWarnings(c: KubeConfig): string[] {
  const out: string[] = [];
  if (c.kubernetes_ca_cert !== "") {
    out.push("kubernetes_ca_cert: stored but not used: a Worker's fetch cannot be given a CA, so the platform trust store verifies the API server");
  }
  if (c.use_annotations_as_alias_metadata) {
    out.push("use_annotations_as_alias_metadata: Lanyard has no identity aliases; service-account annotations are not read");
  }
  return out;
}

const asString = (v: unknown): string => (typeof v === "string" ? v : "");
const asBool = (v: unknown, dflt: boolean): boolean => (typeof v === "boolean" ? v : dflt);

/** The stored document as KubeConfig (tolerates missing keys). */
export function kubeConfigOf(stored: Record<string, unknown>): KubeConfig {
  return {
    kubernetes_host: asString(stored.kubernetes_host),
    kubernetes_ca_cert: asString(stored.kubernetes_ca_cert),
    token_reviewer_jwt: asString(stored.token_reviewer_jwt),
    pem_keys: Array.isArray(stored.pem_keys) ? stored.pem_keys.filter((k): k is string => typeof k === "string") : [],
    issuer: asString(stored.issuer),
    disable_iss_validation: asBool(stored.disable_iss_validation, true),
    disable_local_ca_jwt: asBool(stored.disable_local_ca_jwt, false),
    use_annotations_as_alias_metadata: asBool(stored.use_annotations_as_alias_metadata, false),
  };
}

/** The read view: every field but the reviewer JWT, which becomes `token_reviewer_jwt_set`. */
export function configView(c: KubeConfig): Record<string, unknown> {
  return {
    kubernetes_host: c.kubernetes_host,
    kubernetes_ca_cert: c.kubernetes_ca_cert,
    pem_keys: c.pem_keys,
    issuer: c.issuer,
    disable_iss_validation: c.disable_iss_validation,
    disable_local_ca_jwt: c.disable_local_ca_jwt,
    token_reviewer_jwt_set: c.token_reviewer_jwt !== "",
    use_annotations_as_alias_metadata: c.use_annotations_as_alias_metadata,
  };
}
