/**
 * config/crl (Vault API /pki/config/crl): the fields, their defaults, the partial update and its
 * validation, in upstream's order and words. Durations stay the strings the client wrote.
 */
import { parseDurationSeconds } from "../../../core/duration";
import { badRequest } from "../../../core/errors";
import { defineFields, type FieldValues } from "../../../core/fields";
import { CONFIG_DEFAULTS, CRL_CLUSTER_DEFAULTS, type CrlClusterFlags, type CrlConfig } from "../defaults";

export type CrlConfigFull = CrlConfig & CrlClusterFlags;

/**
 * The most CRL shards a mount may have. A complete rebuild (crl/rotate, the schedule) signs one
 * CRL per shard, and every shard ever used stays published (docs/pki-revocation-crl.md "Sharded
 * CRLs"), so the cap bounds that work; Let's Encrypt runs 128 shards per issuer.
 */
export const MAX_CRL_SHARDS = 256;

export const crlConfigFields = defineFields({
  expiry: { type: "string", description: "How long a CRL is valid (its nextUpdate); default 72h." },
  disable: { type: "bool", description: "Publish empty CRLs (revocations are still recorded)." },
  ocsp_disable: { type: "bool", description: "Turn the OCSP responder off." },
  ocsp_expiry: { type: "string", description: "Lifetime of an OCSP response (nextUpdate); 0 for none; default 12h." },
  auto_rebuild: { type: "bool", description: "Rebuild CRLs on a schedule instead of on every revocation." },
  auto_rebuild_grace_period: { type: "string", description: "Rebuild this long before nextUpdate; default 12h." },
  enable_delta: { type: "bool", description: "Publish delta CRLs between complete rebuilds (needs auto_rebuild)." },
  delta_rebuild_interval: { type: "string", description: "Rebuild delta CRLs this often when revocations arrived; default 15m." },
  allow_expired_cert_revocation: { type: "bool", description: "Allow revoking certificates that have expired." },
  max_crl_entries: { type: "int", description: "Largest CRL to publish (-1: no limit); default 100000." },
  shard_count: { type: "int", description: `CRL shards new certificates are spread over (1 to ${MAX_CRL_SHARDS}); default 1, one full CRL.` },
  cross_cluster_revocation: { type: "bool", description: "Accepted for compatibility; no effect (single cluster)." },
  unified_crl: { type: "bool", description: "Accepted for compatibility; no effect (single cluster)." },
  unified_crl_on_existing_paths: { type: "bool", description: "Accepted for compatibility; no effect (single cluster)." },
});

type Fields = FieldValues<typeof crlConfigFields>;

export function fullCrlConfig(stored: CrlConfig): CrlConfigFull {
  return { ...CONFIG_DEFAULTS.crl, ...CRL_CLUSTER_DEFAULTS, ...stored };
}

/** The read shape (every field, with its default when unset). */
export function crlConfigView(c: CrlConfigFull): Record<string, unknown> {
  return {
    expiry: c.expiry,
    disable: c.disable,
    ocsp_disable: c.ocsp_disable,
    ocsp_expiry: c.ocsp_expiry,
    auto_rebuild: c.auto_rebuild,
    auto_rebuild_grace_period: c.auto_rebuild_grace_period,
    enable_delta: c.enable_delta,
    delta_rebuild_interval: c.delta_rebuild_interval,
    allow_expired_cert_revocation: c.allow_expired_cert_revocation,
    max_crl_entries: c.max_crl_entries,
    shard_count: c.shard_count,
    published_shards: c.published_shards,
    cross_cluster_revocation: c.cross_cluster_revocation,
    unified_crl: c.unified_crl,
    unified_crl_on_existing_paths: c.unified_crl_on_existing_paths,
  };
}

/**
 * parseDurationSeconds refuses anything longer than Go's time.Duration (MAX_DURATION_SECONDS), as
 * upstream's parser does: a nextUpdate further out than that would not fit the 4-digit year of a
 * GeneralizedTime (RFC 5280 §4.1.2.5.2), so the CRL or OCSP response would be unreadable.
 */
function decode(field: string, value: string): number {
  try {
    return parseDurationSeconds(value);
  } catch (e) {
    throw badRequest(`given ${field} could not be decoded: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** Applies a partial update; throws 400 with upstream's message when the result is invalid. */
export function applyCrlConfigUpdate(current: CrlConfigFull, f: Fields, has: (name: keyof Fields & string) => boolean): CrlConfigFull {
  const next: CrlConfigFull = { ...current };
  if (has("expiry")) {
    decode("expiry", f.expiry ?? "");
    next.expiry = f.expiry ?? "";
  }
  if (has("disable")) next.disable = f.disable ?? false;
  if (has("ocsp_disable")) next.ocsp_disable = f.ocsp_disable ?? false;
  if (has("ocsp_expiry")) {
    const v = (f.ocsp_expiry ?? "").trim();
    // parseDurationSeconds refuses negatives with its own words; upstream's message names the field.
    if (/^-/.test(v)) throw badRequest(`ocsp_expiry must be greater than or equal to 0 got: ${v}`);
    decode("ocsp_expiry", v);
    next.ocsp_expiry = f.ocsp_expiry ?? "";
  }
  if (has("auto_rebuild")) next.auto_rebuild = f.auto_rebuild ?? false;
  if (has("auto_rebuild_grace_period")) {
    decode("auto_rebuild_grace_period", f.auto_rebuild_grace_period ?? "");
    next.auto_rebuild_grace_period = f.auto_rebuild_grace_period ?? "";
  }
  if (has("enable_delta")) next.enable_delta = f.enable_delta ?? false;
  if (has("delta_rebuild_interval")) {
    decode("delta_rebuild_interval", f.delta_rebuild_interval ?? "");
    next.delta_rebuild_interval = f.delta_rebuild_interval ?? "";
  }
  if (has("allow_expired_cert_revocation")) next.allow_expired_cert_revocation = f.allow_expired_cert_revocation ?? false;
  if (has("cross_cluster_revocation")) next.cross_cluster_revocation = f.cross_cluster_revocation ?? false;
  if (has("unified_crl")) next.unified_crl = f.unified_crl ?? false;
  if (has("unified_crl_on_existing_paths")) next.unified_crl_on_existing_paths = f.unified_crl_on_existing_paths ?? false;
  if (has("max_crl_entries")) {
    const v = f.max_crl_entries ?? 0;
    // Upstream keeps the old value for anything but -1 or a positive number; refusing is clearer.
    if (v !== -1 && v <= 0) throw badRequest(`max_crl_entries must be -1 (no limit) or a positive number, got ${v}`);
    next.max_crl_entries = v;
  }
  if (has("shard_count")) {
    const v = f.shard_count ?? 1;
    if (!Number.isInteger(v) || v < 1 || v > MAX_CRL_SHARDS) throw badRequest(`shard_count must be an integer from 1 to ${MAX_CRL_SHARDS}, got ${v}`);
    next.shard_count = v;
    // Certificates issued under a larger count name their shard for life: it stays published.
    next.published_shards = Math.max(current.published_shards, v);
  }

  if (next.unified_crl_on_existing_paths && !next.unified_crl) {
    throw badRequest("unified_crl_on_existing_paths cannot be enabled if unified_crl is disabled");
  }
  const expiry = decode("expiry", next.expiry);
  if (next.auto_rebuild && decode("auto_rebuild_grace_period", next.auto_rebuild_grace_period) >= expiry) {
    throw badRequest(
      `CRL auto-rebuilding grace period (${next.auto_rebuild_grace_period}) must be strictly shorter than CRL expiry (${next.expiry}) value when auto-rebuilding of CRLs is enabled`,
    );
  }
  if (next.enable_delta && decode("delta_rebuild_interval", next.delta_rebuild_interval) >= expiry) {
    throw badRequest(`CRL delta rebuild window (${next.delta_rebuild_interval}) must be strictly shorter than CRL expiry (${next.expiry}) value when delta CRLs are enabled`);
  }
  if (!next.auto_rebuild) {
    if (next.enable_delta) throw badRequest("Delta CRLs cannot be enabled when auto rebuilding is disabled as the complete CRL is always regenerated!");
    if (next.cross_cluster_revocation) {
      throw badRequest("Global, cross-cluster revocation queue cannot be enabled when auto rebuilding is disabled as the local cluster may not have the certificate entry!");
    }
  }
  return next;
}

/**
 * Whether a config change needs new CRLs now (upstream pathCRLWrite): disable toggled, auto
 * rebuilding switched off, or delta CRLs switched on or off; and (Lanyard) new shards published.
 */
export function crlConfigNeedsRebuild(before: CrlConfig, after: CrlConfig): boolean {
  return (
    before.disable !== after.disable ||
    (before.auto_rebuild && !after.auto_rebuild) ||
    before.enable_delta !== after.enable_delta ||
    before.published_shards !== after.published_shards
  );
}
