/**
 * config/external-policy (docs/pki-external-policy.md): where the external policy service (CIEPS) lives
 * and how Lanyard talks to it. Pure functions: validation, the update rule and the read view.
 * Storage is src/engines/pki/storage/store.ts (`external_policy` and `external_policy_status` config entries);
 * the webhook itself is src/engines/pki/external-policy/client.ts. docs/pki-external-policy.md explains the
 * choices (URL schemes, what a Worker can and cannot do with trust anchors and client
 * certificates).
 */
import { loadConfig } from "../../../core/config";
import { seal } from "../../../core/db/seal";
import { defineFields, type FieldValues } from "../../../core/fields";
import { MAX_URL_BYTES } from "../../../core/limits";
import { badRequest } from "../../../core/errors";
import { checkOutboundUrl } from "../../../core/outbound-url";
// The stored shapes and their defaults live with every other PKI default.
import { EXTERNAL_POLICY_DEFAULTS, type ExternalPolicyConfig, type ExternalPolicyStatus } from "../defaults";
import { privateKeyFacts, toPkcs8 } from "../x509/asn1";
import { checkKeySize } from "../x509/keytypes";
import { decodePemBlocks, toPem } from "../x509/pem";
import { X509Error, keyMatchesPublicKey, parseCertificate } from "../x509/x509";

/** The longest a request waits for the service: a caller waiting minutes is worse than an error. */
export const MAX_TIMEOUT_SECONDS = 300;

export const externalPolicyConfigFields = defineFields({
  enabled: { type: "bool", description: "Send external-policy requests to the service.", default: EXTERNAL_POLICY_DEFAULTS.enabled },
  external_service_url: { type: "string", maxBytes: MAX_URL_BYTES, description: "URL the requests are POSTed to (https://).", default: EXTERNAL_POLICY_DEFAULTS.external_service_url },
  timeout: { type: "duration", description: "How long to wait for the service (default 15s, at most 5m).", default: EXTERNAL_POLICY_DEFAULTS.timeout },
  trusted_ca: { type: "string", description: "PEM CA certificates for the service's TLS (stored, see the docs).", default: EXTERNAL_POLICY_DEFAULTS.trusted_ca },
  trusted_leaf_certificate_bundle: { type: "string", description: "PEM leaf certificates of the service (stored, see the docs).", default: EXTERNAL_POLICY_DEFAULTS.trusted_leaf_certificate_bundle },
  vault_client_cert_bundle: { type: "string", description: "PEM private key and certificates for mTLS (sealed, never read back).", default: "" },
  entity_jmespath: { type: "string", description: "JMESPath filter for identity entities.", default: EXTERNAL_POLICY_DEFAULTS.entity_jmespath },
  group_jmespath: { type: "string", description: "JMESPath filter for identity groups.", default: EXTERNAL_POLICY_DEFAULTS.group_jmespath },
});

type ConfigFields = FieldValues<typeof externalPolicyConfigFields>;

/** Where the service may be reached: src/core/outbound-url.ts (https://, or http:// by opt-in or to loopback in development). */
export function checkServiceUrl(env: Env, raw: string): URL {
  return checkOutboundUrl(env, "external_service_url", raw, "EXTERNAL_POLICY_ALLOW_HTTP");
}

/** One or more PEM certificates that parse; returns them normalised (one block per line group). */
function checkCertificates(field: string, text: string): string {
  if (text.trim() === "") return "";
  let blocks;
  try {
    blocks = decodePemBlocks(text);
  } catch (e) {
    throw badRequest(`${field}: ${e instanceof Error ? e.message : "invalid PEM"}`);
  }
  if (blocks.length === 0) throw badRequest(`${field}: no PEM CERTIFICATE block found`);
  for (const [i, b] of blocks.entries()) {
    if (b.label !== "CERTIFICATE") throw badRequest(`${field}: block ${i} is a ${b.label}, expected CERTIFICATE`);
    try {
      parseCertificate(b.der);
    } catch (e) {
      throw badRequest(`${field}: block ${i}: ${e instanceof X509Error ? e.message : "not a certificate"}`);
    }
  }
  return blocks.map((b) => toPem("CERTIFICATE", b.der)).join("\n");
}

const KEY_LABELS = new Set(["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"]);

/**
 * A client certificate bundle: exactly one private key and at least one certificate, the first
 * of which holds the key's public half. Returns the certificates alone (for reads).
 */
async function checkClientBundle(text: string): Promise<string> {
  const field = "vault_client_cert_bundle";
  let blocks;
  try {
    blocks = decodePemBlocks(text);
  } catch (e) {
    // The PEM parser's message names a block number, never its content.
    throw badRequest(`${field}: ${e instanceof Error ? e.message : "invalid PEM"}`);
  }
  const keys = blocks.filter((b) => KEY_LABELS.has(b.label));
  const certs = blocks.filter((b) => b.label === "CERTIFICATE");
  if (keys.length !== 1) throw badRequest(`${field}: expected exactly one private key, found ${keys.length}`);
  if (certs.length === 0) throw badRequest(`${field}: expected at least one certificate`);
  const key = keys[0];
  const leaf = certs[0];
  if (!key || !leaf) throw badRequest(`${field}: expected a private key and a certificate`);
  let pkcs8: Uint8Array<ArrayBuffer>;
  let keyFacts: { type: string; bits: number };
  try {
    pkcs8 = toPkcs8(key.label, key.der);
    keyFacts = privateKeyFacts(pkcs8);
  } catch {
    throw badRequest(`${field}: the private key or the first certificate could not be read`);
  }
  // Before the match test, which WebCrypto could not run on such a key.
  checkKeySize(field, keyFacts);
  let matches = false;
  try {
    matches = await keyMatchesPublicKey(pkcs8, parseCertificate(leaf.der).spki);
  } catch {
    throw badRequest(`${field}: the private key or the first certificate could not be read`);
  }
  if (!matches) throw badRequest(`${field}: the private key does not belong to the first certificate`);
  return certs.map((c) => toPem("CERTIFICATE", c.der)).join("\n");
}

/** Warnings that say plainly what a Worker does not do with the settings (docs/pki-external-policy.md). */
const TRUST_WARNING =
  "trusted_ca and trusted_leaf_certificate_bundle are stored but not enforced: a Worker's outbound fetch validates TLS against the platform's public trust store and cannot pin a private CA or a leaf certificate, so the service's certificate must chain to a publicly trusted CA";
const CLIENT_CERT_WARNING =
  "vault_client_cert_bundle is stored sealed but not presented: a Worker cannot attach a client certificate chosen at runtime to its outbound requests";
const JMESPATH_WARNING =
  "entity_jmespath and group_jmespath are stored but have nothing to filter: tokens of this service carry no identity entity, so identity_request_key_values is never sent";

/**
 * Applies a write (only the fields sent change, as upstream's config endpoints do) and
 * validates the result. `now` stamps external_service_last_updated, which also resets
 * external_service_validated.
 */
export async function applyExternalPolicyUpdate(
  env: Env,
  mountId: string,
  current: ExternalPolicyConfig,
  f: ConfigFields,
  has: (name: keyof ConfigFields & string) => boolean,
  now: Date,
): Promise<{ config: ExternalPolicyConfig; warnings: string[] }> {
  const next: ExternalPolicyConfig = { ...current };
  const warnings: string[] = [];
  if (has("enabled")) next.enabled = f.enabled;
  if (has("external_service_url")) next.external_service_url = f.external_service_url.trim();
  if (has("timeout")) {
    if (f.timeout < 1) throw badRequest("timeout: must be at least 1s");
    if (f.timeout > MAX_TIMEOUT_SECONDS) throw badRequest(`timeout: must be at most ${MAX_TIMEOUT_SECONDS / 60}m`);
    next.timeout = f.timeout;
  }
  if (has("trusted_ca")) next.trusted_ca = checkCertificates("trusted_ca", f.trusted_ca);
  if (has("trusted_leaf_certificate_bundle")) {
    next.trusted_leaf_certificate_bundle = checkCertificates("trusted_leaf_certificate_bundle", f.trusted_leaf_certificate_bundle);
  }
  if (has("vault_client_cert_bundle")) {
    if (f.vault_client_cert_bundle.trim() === "") {
      next.sealed_client_cert_bundle = "";
      next.client_cert_bundle_no_keys = "";
    } else {
      next.client_cert_bundle_no_keys = await checkClientBundle(f.vault_client_cert_bundle);
      next.sealed_client_cert_bundle = await seal(loadConfig(env).seal, f.vault_client_cert_bundle, clientBundleContext(mountId));
    }
  }
  if (has("entity_jmespath")) next.entity_jmespath = f.entity_jmespath;
  if (has("group_jmespath")) next.group_jmespath = f.group_jmespath;

  if (next.external_service_url !== "") checkServiceUrl(env, next.external_service_url);
  if (next.enabled && next.external_service_url === "") {
    throw badRequest("external_service_url: required when the external policy service is enabled");
  }
  if (next.trusted_ca !== "" || next.trusted_leaf_certificate_bundle !== "") warnings.push(TRUST_WARNING);
  if (next.sealed_client_cert_bundle !== "") warnings.push(CLIENT_CERT_WARNING);
  if (next.entity_jmespath !== "" || next.group_jmespath !== "") warnings.push(JMESPATH_WARNING);
  // Milliseconds, so that two writes within a second still reset external_service_validated.
  next.external_service_last_updated = now.toISOString();
  return { config: next, warnings };
}

/** The seal context of the client bundle: bound to the mount, so a copied value does not open. */
export const clientBundleContext = (mountId: string) => `pki-external-policy-client-bundle:${mountId}`;

const orNull = (s: string): string | null => (s === "" ? null : s);

/**
 * The read shape of Vault's (Vault API /pki/config/external-policy): `timeout` in nanoseconds, unset values null,
 * the client bundle only without its keys. `external_service_validated` is true once the
 * service has answered well-formed for the current configuration.
 */
export function externalPolicyView(c: ExternalPolicyConfig, s: ExternalPolicyStatus): Record<string, unknown> {
  return {
    enabled: c.enabled,
    external_service_url: c.external_service_url,
    timeout: c.timeout * 1_000_000_000,
    trusted_ca: orNull(c.trusted_ca),
    trusted_leaf_certificate_bundle: orNull(c.trusted_leaf_certificate_bundle),
    vault_client_cert_bundle_no_keys: orNull(c.client_cert_bundle_no_keys),
    entity_jmespath: orNull(c.entity_jmespath),
    group_jmespath: orNull(c.group_jmespath),
    external_service_last_updated: orNull(c.external_service_last_updated),
    external_service_validated: c.external_service_last_updated !== "" && s.validated_for === c.external_service_last_updated,
    last_successful_request: orNull(s.last_successful_request),
  };
}
