/**
 * Tidy and auto-tidy as data (Vault API /pki/tidy, /pki/config/auto-tidy): the request fields, their validation, the
 * parameters a tidy job runs with, the stored auto-tidy configuration, the read shapes of
 * `tidy-status` and `config/auto-tidy`, and the per-row verdicts the job applies. Everything here
 * is pure (no storage, no clock of its own), so it can be unit-tested; the job that applies it is
 * src/engines/pki/tidy/tidy-job.ts, driven by the mount's Authority (src/engines/pki/authority/tidy-runner.ts).
 */
import { formatGoDuration, parseDurationMs } from "../../../core/duration";
import { badRequest } from "../../../core/errors";
import { defineFields } from "../../../core/fields";
import { AUTO_TIDY_DEFAULTS, type AutoTidyConfig, type TidyParams } from "../defaults";
import { flag } from "../fields";
import { trimEndChar, trimEndChars } from "../../../core/text";

// The stored shapes and defaults live with every other PKI default; the tidy modules and their
// tests take them from here too.
export { AUTO_TIDY_DEFAULTS, type AutoTidyConfig, type TidyParams } from "../defaults";

export const TIDY_OPERATIONS = [
  "tidy_cert_store",
  "tidy_revoked_certs",
  "tidy_invalid_certs",
  "tidy_revoked_cert_issuer_associations",
  "tidy_expired_issuers",
  "tidy_move_legacy_ca_bundle",
  "tidy_acme",
] as const;

const ANY_TIDY_CONFIG = TIDY_OPERATIONS.join(" / ");

export const TIDY_STARTED_WARNING =
  "Tidy operation successfully started. Any information from the operation will be printed to Lanyard's server logs.";
export const TIDY_NOTHING_WARNING = `Manual tidy requested but no tidy operations were set. Enable at least one tidy operation to be run (${ANY_TIDY_CONFIG}).`;
export const TIDY_RUNNING_WARNING = "Tidy operation already in progress.";
export const TIDY_CANCEL_NONE_WARNING = "Tidy operation cannot be cancelled as none is currently running.";

/** The fields of POST tidy (Vault API /pki/tidy); config/auto-tidy adds its own four. */
export const tidyFields = defineFields({
  tidy_cert_store: flag("Delete stored certificates past notAfter + safety_buffer.", false),
  tidy_revoked_certs: flag("Delete revocation entries (and their stored certificates) past notAfter + revoked_safety_buffer; rebuilds the CRLs.", false),
  tidy_revocation_list: flag("Deprecated alias of tidy_revoked_certs.", false),
  tidy_invalid_certs: flag("Delete stored and revoked entries whose certificate does not parse.", false),
  tidy_revoked_cert_issuer_associations: flag("Recompute the issuer of revocation entries whose issuer is missing.", false),
  tidy_expired_issuers: flag("Delete issuers past notAfter + issuer_safety_buffer (never the default; keys are kept).", false),
  tidy_move_legacy_ca_bundle: flag("Legacy storage migration; nothing to do in Lanyard (accepted as a no-op).", false),
  tidy_acme: flag("Delete expired ACME orders, revoke idle ACME accounts and delete long-revoked ones, delete unused EAB keys older than acme_account_safety_buffer.", false),
  safety_buffer: { type: "duration", description: "Seconds or duration string; at least 1s.", default: AUTO_TIDY_DEFAULTS.safety_buffer },
  revoked_safety_buffer: { type: "duration", description: "Buffer for revoked certificates; defaults to safety_buffer." },
  issuer_safety_buffer: { type: "duration", description: "Buffer for expired issuers; at least 1s.", default: AUTO_TIDY_DEFAULTS.issuer_safety_buffer },
  acme_account_safety_buffer: { type: "duration", description: "ACME account buffer; at least 1s.", default: AUTO_TIDY_DEFAULTS.acme_account_safety_buffer },
  pause_duration: { type: "string", description: "Go duration to pause between entries (e.g. 500ms, 1s).", default: "0s" },
  page_size: { type: "int", description: "Entries per page, with a checkpoint between pages; <= 0 means no paging.", default: AUTO_TIDY_DEFAULTS.page_size },
});

export const autoTidyFields = defineFields({
  ...tidyFields,
  enabled: { type: "bool", description: "Run tidy periodically with these settings." },
  interval_duration: { type: "duration", description: "Time from the end of one tidy to the start of the next (default 12h)." },
  maintain_stored_certificate_counts: { type: "bool", description: "Report current certificate counts in tidy-status." },
  publish_stored_certificate_count_metrics: { type: "bool", description: "Publish the counts as metrics (requires maintain_stored_certificate_counts)." },
});

type TidyFieldValues = {
  [K in keyof typeof tidyFields]?: unknown;
};

/** Milliseconds as Go's time.Duration.String() prints them ("0s", "500ms", "1m30s", "1.5s"). */
export function formatDurationMs(ms: number): string {
  if (ms % 1000 === 0) return formatGoDuration(ms / 1000);
  if (ms < 1000) return `${ms}ms`;
  const whole = Math.floor(ms / 1000);
  const frac = trimEndChar((ms % 1000).toString().padStart(3, "0"), "0");
  // The whole-second form without its seconds ("1m30s" → "1m"); it always ends in digits and "s".
  const prefix = trimEndChars(formatGoDuration(whole).slice(0, -1), "0123456789");
  return `${prefix}${whole % 60}.${frac}s`;
}

function pauseFrom(raw: string, parseError: (msg: string) => string): number {
  try {
    return parseDurationMs(raw);
  } catch (e) {
    if (/negative/.test(e instanceof Error ? e.message : "")) {
      throw badRequest("received invalid, negative pause_duration");
    }
    throw badRequest(parseError(e instanceof Error ? e.message : String(e)));
  }
}

/**
 * POST tidy: validates and builds the job parameters (upstream pathTidyWrite order). Messages
 * name the field; upstream's "revokedSafetyBuffer" is spelled as the field here.
 */
export function tidyParamsFromFields(f: TidyFieldValues, has: (name: keyof typeof tidyFields & string) => boolean): TidyParams {
  const num = (v: unknown, d: number) => (typeof v === "number" ? v : d);
  const bool = (v: unknown) => v === true;
  const safety = num(f.safety_buffer, 259200);
  const revoked = has("revoked_safety_buffer") ? num(f.revoked_safety_buffer, safety) : safety;
  const issuer = num(f.issuer_safety_buffer, 31536000);
  const acme = num(f.acme_account_safety_buffer, 2592000);
  if (safety < 1) throw badRequest("safety_buffer must be greater than zero");
  if (revoked < 1) throw badRequest("revoked_safety_buffer must be greater than zero");
  if (issuer < 1) throw badRequest("issuer_safety_buffer must be greater than zero");
  if (acme < 1) throw badRequest("acme_account_safety_buffer must be greater than zero");
  const pauseRaw = typeof f.pause_duration === "string" ? f.pause_duration : "0s";
  const pause = pauseRaw === "" ? 0 : pauseFrom(pauseRaw, (m) => `Error parsing pause_duration: ${m}`);
  const pageSize = num(f.page_size, 1000);
  if (pageSize > 0 && pageSize < 5) throw badRequest("page_size must be greater than five");
  return {
    tidy_cert_store: bool(f.tidy_cert_store),
    tidy_revoked_certs: bool(f.tidy_revoked_certs) || bool(f.tidy_revocation_list),
    tidy_invalid_certs: bool(f.tidy_invalid_certs),
    tidy_revoked_cert_issuer_associations: bool(f.tidy_revoked_cert_issuer_associations),
    tidy_expired_issuers: bool(f.tidy_expired_issuers),
    tidy_move_legacy_ca_bundle: bool(f.tidy_move_legacy_ca_bundle),
    tidy_acme: bool(f.tidy_acme),
    safety_buffer: safety,
    revoked_safety_buffer: revoked,
    issuer_safety_buffer: issuer,
    acme_account_safety_buffer: acme,
    pause_ms: pause,
    page_size: pageSize,
  };
}

export const anyTidyEnabled = (p: Pick<TidyParams, (typeof TIDY_OPERATIONS)[number]>): boolean => TIDY_OPERATIONS.some((op) => p[op]);

type AutoTidyFieldValues = {
  [K in keyof typeof autoTidyFields]?: unknown;
};

/**
 * POST config/auto-tidy: a partial update of `current` (only the fields sent change), validated
 * as upstream pathConfigAutoTidyWrite does, before anything is written.
 */
export function applyAutoTidyUpdate(
  current: AutoTidyConfig,
  f: AutoTidyFieldValues,
  has: (name: keyof typeof autoTidyFields & string) => boolean,
): AutoTidyConfig {
  const next: AutoTidyConfig = { ...AUTO_TIDY_DEFAULTS, ...current };
  const int = (name: keyof typeof autoTidyFields & string): number | undefined =>
    has(name) && typeof f[name] === "number" ? (f[name] as number) : undefined;
  const boolField = (name: keyof typeof autoTidyFields & string): boolean | undefined =>
    has(name) && typeof f[name] === "boolean" ? (f[name] as boolean) : undefined;

  next.enabled = boolField("enabled") ?? next.enabled;
  const interval = int("interval_duration");
  if (interval !== undefined) next.interval_duration = interval;
  for (const op of TIDY_OPERATIONS) next[op] = boolField(op) ?? next[op];
  if (boolField("tidy_revocation_list") === true) next.tidy_revoked_certs = true;

  const buffers = [
    ["safety_buffer", "given safety_buffer must be at least one second; got: "],
    ["revoked_safety_buffer", "revoked_safety_buffer must be at least one second; got: "],
    ["issuer_safety_buffer", "given issuer_safety_buffer must be at least one second; got: "],
    ["acme_account_safety_buffer", "given acme_account_safety_buffer must be at least one second; got: "],
  ] as const;
  for (const [name, msg] of buffers) {
    const v = int(name);
    if (v === undefined) continue;
    if (v < 1) throw badRequest(`${msg}${v}`);
    next[name] = v;
  }
  if (has("pause_duration") && typeof f.pause_duration === "string") {
    next.pause_ms = f.pause_duration === "" ? 0 : pauseFrom(f.pause_duration, (m) => `unable to parse given pause_duration: ${m}`);
  }
  const pageSize = int("page_size");
  if (pageSize !== undefined) {
    if (pageSize < 5) throw badRequest("page_size must be at least 5");
    next.page_size = pageSize;
  }
  if (next.enabled && !anyTidyEnabled(next)) {
    throw badRequest(`Auto-tidy enabled but no tidy operations were requested. Enable at least one tidy operation to be run (${ANY_TIDY_CONFIG}).`);
  }
  next.maintain_stored_certificate_counts = boolField("maintain_stored_certificate_counts") ?? next.maintain_stored_certificate_counts;
  next.publish_stored_certificate_count_metrics = boolField("publish_stored_certificate_count_metrics") ?? next.publish_stored_certificate_count_metrics;
  if (next.publish_stored_certificate_count_metrics && !next.maintain_stored_certificate_counts) {
    throw badRequest(
      "Can not publish a running storage metrics count to metrics without first maintaining that count.  Enable `maintain_stored_certificate_counts` to enable `publish_stored_certificate_count_metrics`.",
    );
  }
  return next;
}

/** config/auto-tidy read shape: durations in seconds, pause_duration as a Go duration string. */
export function autoTidyView(c: AutoTidyConfig): Record<string, unknown> {
  const { pause_ms, ...params } = paramsFromAutoTidy(c);
  return {
    enabled: c.enabled,
    interval_duration: c.interval_duration,
    ...params,
    pause_duration: formatDurationMs(pause_ms),
    maintain_stored_certificate_counts: c.maintain_stored_certificate_counts,
    publish_stored_certificate_count_metrics: c.publish_stored_certificate_count_metrics,
  };
}

/** The parameters an auto-tidy run uses (the stored configuration minus its scheduling keys). */
export function paramsFromAutoTidy(c: AutoTidyConfig): TidyParams {
  const { enabled: _e, interval_duration: _i, maintain_stored_certificate_counts: _m, publish_stored_certificate_count_metrics: _p, ...params } = c;
  return { ...params, revoked_safety_buffer: c.revoked_safety_buffer ?? c.safety_buffer };
}

/** Whether auto-tidy is due: enabled, a positive interval, and strictly past last end + interval. */
export function autoTidyDue(c: AutoTidyConfig, lastTidyMs: number, nowMs: number): boolean {
  return c.enabled && c.interval_duration > 0 && anyTidyEnabled(c) && nowMs > lastTidyMs + c.interval_duration * 1000;
}

// -- job state --------------------------------------------------------------------------------

export type TidyState = "Running" | "Finished" | "Error" | "Cancelled";
export type TidyPhase = "certs" | "revoked" | "crl" | "issuers" | "acme" | "done";

/** The phases in upstream's order (doTidyCertStore, doTidyRevocationStore, the CRL rebuild, doTidyExpiredIssuers, doTidyAcme). */
export const TIDY_PHASES: readonly TidyPhase[] = ["certs", "revoked", "crl", "issuers", "acme", "done"];

export interface TidyCounters {
  certStoreDeleted: number;
  revokedDeleted: number;
  missingIssuer: number;
  fixedIssuers: number;
  /** Entries looked at in the current phase (progress messages). */
  checked: number;
  // tidy_acme (absent in jobs stored before it existed: read as 0).
  acmeAccounts?: number;
  acmeAccountsDeleted?: number;
  acmeAccountsRevoked?: number;
  acmeOrdersDeleted?: number;
}

/** One tidy run as the Authority keeps it. Times are Unix milliseconds. */
export interface TidyJob {
  params: TidyParams;
  state: TidyState;
  phase: TidyPhase;
  /** Where the current phase resumes: the last serial (certs), last sequence id (revoked) or last account id (acme). */
  cursor: string;
  counters: TidyCounters;
  /** Revocation entries changed: the CRLs must be rebuilt before the job ends. */
  rebuildCrl: boolean;
  timeStarted: number;
  timeFinished: number | null;
  message: string | null;
  error: string | null;
  auto: boolean;
}

/** The first phase at or after `from` that the parameters ask for (upstream's order). */
export function nextPhase(p: TidyParams, from: TidyPhase, rebuildCrl: boolean): TidyPhase {
  const wanted: Record<TidyPhase, boolean> = {
    certs: p.tidy_cert_store || p.tidy_invalid_certs,
    revoked: p.tidy_revoked_certs || p.tidy_revoked_cert_issuer_associations || p.tidy_invalid_certs,
    crl: rebuildCrl,
    issuers: p.tidy_expired_issuers,
    acme: p.tidy_acme,
    done: true,
  };
  for (let i = TIDY_PHASES.indexOf(from); i < TIDY_PHASES.length; i++) {
    const ph = TIDY_PHASES[i];
    if (ph && wanted[ph]) return ph;
  }
  return "done";
}

export function newJob(params: TidyParams, now: number, auto: boolean): TidyJob {
  return {
    params,
    state: "Running",
    phase: nextPhase(params, "certs", false),
    cursor: "",
    counters: { certStoreDeleted: 0, revokedDeleted: 0, missingIssuer: 0, fixedIssuers: 0, checked: 0, acmeAccounts: 0, acmeAccountsDeleted: 0, acmeAccountsRevoked: 0, acmeOrdersDeleted: 0 },
    rebuildCrl: false,
    timeStarted: now,
    timeFinished: null,
    message: null,
    error: null,
    auto,
  };
}

/**
 * The most entries one tidy step handles. A step runs in one alarm, i.e. one Worker invocation,
 * which may make at most 1,000 D1 queries (https://developers.cloudflare.com/d1/platform/limits/)
 * and holds the page's rows (with their DER) in 128 MB. A step of 1,000 makes about 25
 * statements: the page read and deletes of 90 serials each for certificates and revocations
 * (storage/tidy-store.ts; the test in test/integration/pki-tidy.test.ts counts them).
 */
export const MAX_STEP = 1000;

/** How many entries one step handles: one when pausing between entries, else a page. */
export function stepSize(p: TidyParams): number {
  if (p.pause_ms > 0) return 1;
  // page_size <= 0 means "no paging" upstream, and a page_size above MAX_STEP would not fit one
  // invocation either: a step is one alarm, one Worker invocation. The result is the same, only
  // checkpointed more often.
  return p.page_size > 0 ? Math.min(p.page_size, MAX_STEP) : MAX_STEP;
}

export type CertVerdict = "keep" | "delete" | "delete-with-revocation";

/**
 * What the cert-store pass does with one stored certificate (upstream doTidyCertStore): an
 * unparsable entry goes only with tidy_invalid_certs; otherwise expired past the buffer (the
 * revoked buffer when revoked) goes, and with tidy_revoked_certs its revocation entry too.
 */
export function certVerdict(
  p: TidyParams,
  row: { notAfter: number; revoked: boolean; parses: boolean | null },
  nowSec: number,
): CertVerdict {
  if (row.parses === false) return p.tidy_invalid_certs ? "delete" : "keep";
  if (!p.tidy_cert_store) return "keep";
  if (!row.revoked) return row.notAfter + p.safety_buffer < nowSec ? "delete" : "keep";
  if (row.notAfter + p.revoked_safety_buffer < nowSec) return p.tidy_revoked_certs ? "delete-with-revocation" : "delete";
  return "keep";
}

/** Whether the revocation pass removes an entry (with its stored certificate) as expired. */
export const revokedExpired = (p: TidyParams, notAfter: number, nowSec: number): boolean =>
  p.tidy_revoked_certs && notAfter + p.revoked_safety_buffer < nowSec;

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/**
 * GET tidy-status (upstream pathTidyStatusRead): every key present, nulls until a tidy ran.
 * `counts` are present only when auto-tidy's maintain_stored_certificate_counts is on.
 */
export function statusView(
  job: TidyJob | null,
  cancelling: boolean,
  lastTidy: number | null,
  backendUuid: string,
  counts: { certs: number; revoked: number } | null,
): Record<string, unknown> {
  const out: Record<string, unknown> = {
    safety_buffer: null,
    revoked_safety_buffer: null,
    issuer_safety_buffer: null,
    acme_account_safety_buffer: null,
    tidy_cert_store: null,
    tidy_revoked_certs: null,
    tidy_invalid_certs: null,
    tidy_revoked_cert_issuer_associations: null,
    tidy_expired_issuers: null,
    tidy_move_legacy_ca_bundle: null,
    tidy_acme: null,
    pause_duration: null,
    page_size: null,
    state: "Inactive",
    error: null,
    time_started: null,
    time_finished: null,
    message: null,
    cert_store_deleted_count: null,
    revoked_cert_deleted_count: null,
    missing_issuer_cert_count: null,
    current_cert_store_count: counts?.certs ?? null,
    current_revoked_cert_count: counts?.revoked ?? null,
    internal_backend_uuid: backendUuid,
    last_auto_tidy_finished: iso(lastTidy),
    total_acme_account_count: null,
    acme_account_deleted_count: null,
    acme_account_revoked_count: null,
    acme_orders_deleted_count: null,
  };
  if (!job) return out;
  const p = job.params;
  Object.assign(out, {
    safety_buffer: p.safety_buffer,
    revoked_safety_buffer: p.revoked_safety_buffer,
    issuer_safety_buffer: p.issuer_safety_buffer,
    acme_account_safety_buffer: p.acme_account_safety_buffer,
    tidy_cert_store: p.tidy_cert_store,
    tidy_revoked_certs: p.tidy_revoked_certs,
    tidy_invalid_certs: p.tidy_invalid_certs,
    tidy_revoked_cert_issuer_associations: p.tidy_revoked_cert_issuer_associations,
    tidy_expired_issuers: p.tidy_expired_issuers,
    tidy_move_legacy_ca_bundle: p.tidy_move_legacy_ca_bundle,
    tidy_acme: p.tidy_acme,
    pause_duration: formatDurationMs(p.pause_ms),
    page_size: p.page_size,
    time_started: iso(job.timeStarted),
    message: job.message,
    cert_store_deleted_count: job.counters.certStoreDeleted,
    revoked_cert_deleted_count: job.counters.revokedDeleted,
    missing_issuer_cert_count: job.counters.missingIssuer,
    total_acme_account_count: job.counters.acmeAccounts ?? 0,
    acme_account_deleted_count: job.counters.acmeAccountsDeleted ?? 0,
    acme_account_revoked_count: job.counters.acmeAccountsRevoked ?? 0,
    acme_orders_deleted_count: job.counters.acmeOrdersDeleted ?? 0,
  });
  if (job.state === "Running") out.state = cancelling ? "Cancelling" : "Running";
  else {
    out.state = job.state;
    out.time_finished = iso(job.timeFinished);
    if (job.state === "Finished") out.message = null;
    // An error keeps the last progress message as a hint of where it happened (upstream).
    if (job.state === "Error") out.error = job.error;
  }
  return out;
}
