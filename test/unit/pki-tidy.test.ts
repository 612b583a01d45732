/**
 * The pure parts of tidy (src/engines/pki/tidy/tidy.ts): request validation, the auto-tidy partial update,
 * the per-row verdicts, phase order, the auto-tidy schedule and the status shape.
 */
import { describe, expect, it } from "vitest";
import { parseDurationMs } from "../../src/core/duration";
import { ApiError } from "../../src/core/errors";
import {
  AUTO_TIDY_DEFAULTS,
  applyAutoTidyUpdate,
  autoTidyDue,
  autoTidyView,
  certVerdict,
  formatDurationMs,
  newJob,
  nextPhase,
  statusView,
  tidyParamsFromFields,
  type TidyParams,
} from "../../src/engines/pki/tidy/tidy";

const params = (over: Partial<TidyParams> = {}): TidyParams => ({
  ...tidyParamsFromFields({}, () => false),
  ...over,
});

function message(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).status).toBe(400);
    return (e as ApiError).messages.join("; ");
  }
  throw new Error("expected a 400");
}

describe("durations", () => {
  it("parses Go durations, bare seconds and days to milliseconds", () => {
    expect(parseDurationMs("0s")).toBe(0);
    expect(parseDurationMs("250ms")).toBe(250);
    expect(parseDurationMs("1.5s")).toBe(1500);
    expect(parseDurationMs("1h30m")).toBe(5_400_000);
    expect(parseDurationMs("5")).toBe(5000);
    expect(parseDurationMs("2d")).toBe(172_800_000);
    expect(() => parseDurationMs("soon")).toThrow();
    expect(() => parseDurationMs("1sx")).toThrow();
  });
  it("formats like Go's Duration.String()", () => {
    expect(formatDurationMs(0)).toBe("0s");
    expect(formatDurationMs(500)).toBe("500ms");
    expect(formatDurationMs(1500)).toBe("1.5s");
    expect(formatDurationMs(90_000)).toBe("1m30s");
    expect(formatDurationMs(3_600_000)).toBe("1h0m0s");
    expect(formatDurationMs(3_600_500)).toBe("1h0m0.5s");
  });
});

describe("POST tidy validation", () => {
  it("has upstream's defaults; revoked_safety_buffer follows safety_buffer", () => {
    const p = tidyParamsFromFields({ safety_buffer: 60 }, () => false);
    expect(p).toMatchObject({ safety_buffer: 60, revoked_safety_buffer: 60, issuer_safety_buffer: 31536000, acme_account_safety_buffer: 2592000, pause_ms: 0, page_size: 1000 });
    expect(p.tidy_cert_store).toBe(false);
    expect(tidyParamsFromFields({ tidy_revocation_list: true }, () => false).tidy_revoked_certs).toBe(true);
  });
  it("rejects buffers below one second, bad pauses and page sizes 1-4, naming the field", () => {
    expect(message(() => tidyParamsFromFields({ safety_buffer: 0 }, () => false))).toBe("safety_buffer must be greater than zero");
    expect(message(() => tidyParamsFromFields({ revoked_safety_buffer: 0 }, (n) => n === "revoked_safety_buffer"))).toBe(
      "revoked_safety_buffer must be greater than zero",
    );
    expect(message(() => tidyParamsFromFields({ issuer_safety_buffer: 0 }, () => false))).toBe("issuer_safety_buffer must be greater than zero");
    expect(message(() => tidyParamsFromFields({ acme_account_safety_buffer: 0 }, () => false))).toBe("acme_account_safety_buffer must be greater than zero");
    expect(message(() => tidyParamsFromFields({ pause_duration: "-1s" }, () => false))).toBe("received invalid, negative pause_duration");
    expect(message(() => tidyParamsFromFields({ pause_duration: "later" }, () => false))).toMatch(/^Error parsing pause_duration: /);
    expect(message(() => tidyParamsFromFields({ page_size: 4 }, () => false))).toBe("page_size must be greater than five");
    expect(tidyParamsFromFields({ page_size: 0 }, () => false).page_size).toBe(0);
    expect(tidyParamsFromFields({ page_size: -1 }, () => false).page_size).toBe(-1);
  });
});

describe("config/auto-tidy update", () => {
  const has = (o: Record<string, unknown>) => (n: string) => n in o;
  const apply = (o: Record<string, unknown>, cur = AUTO_TIDY_DEFAULTS) => applyAutoTidyUpdate(cur, o, has(o));

  it("reads back upstream's defaults", () => {
    expect(autoTidyView(AUTO_TIDY_DEFAULTS)).toEqual({
      enabled: false,
      interval_duration: 43200,
      tidy_cert_store: false,
      tidy_revoked_certs: false,
      tidy_invalid_certs: false,
      tidy_revoked_cert_issuer_associations: false,
      tidy_expired_issuers: false,
      tidy_move_legacy_ca_bundle: false,
      tidy_acme: false,
      safety_buffer: 259200,
      revoked_safety_buffer: 259200,
      issuer_safety_buffer: 31536000,
      acme_account_safety_buffer: 2592000,
      pause_duration: "0s",
      page_size: 1000,
      maintain_stored_certificate_counts: false,
      publish_stored_certificate_count_metrics: false,
    });
  });
  it("changes only what is sent", () => {
    const a = apply({ tidy_cert_store: true, safety_buffer: 120, pause_duration: "1m30s" });
    const b = apply({ page_size: 50 }, a);
    expect(b).toMatchObject({ tidy_cert_store: true, safety_buffer: 120, pause_ms: 90_000, page_size: 50, enabled: false });
    expect(autoTidyView(b).pause_duration).toBe("1m30s");
  });
  it("validates before anything changes", () => {
    expect(message(() => apply({ enabled: true }))).toMatch(/^Auto-tidy enabled but no tidy operations were requested/);
    expect(message(() => apply({ safety_buffer: 0 }))).toBe("given safety_buffer must be at least one second; got: 0");
    expect(message(() => apply({ issuer_safety_buffer: 0 }))).toMatch(/^given issuer_safety_buffer must be at least one second/);
    expect(message(() => apply({ page_size: 4 }))).toBe("page_size must be at least 5");
    expect(message(() => apply({ page_size: 0 }))).toBe("page_size must be at least 5");
    expect(message(() => apply({ pause_duration: "-2s" }))).toBe("received invalid, negative pause_duration");
    expect(message(() => apply({ publish_stored_certificate_count_metrics: true }))).toMatch(/maintain_stored_certificate_counts/);
    expect(apply({ publish_stored_certificate_count_metrics: true, maintain_stored_certificate_counts: true }).publish_stored_certificate_count_metrics).toBe(true);
  });
});

describe("verdicts and phases", () => {
  const now = 1_000_000;
  it("keeps certificates inside the buffer and drops those past it", () => {
    const p = params({ tidy_cert_store: true, safety_buffer: 100, revoked_safety_buffer: 500 });
    expect(certVerdict(p, { notAfter: now - 101, revoked: false, parses: null }, now)).toBe("delete");
    expect(certVerdict(p, { notAfter: now - 100, revoked: false, parses: null }, now)).toBe("keep");
    expect(certVerdict(p, { notAfter: now - 200, revoked: true, parses: null }, now)).toBe("keep");
    expect(certVerdict(p, { notAfter: now - 501, revoked: true, parses: null }, now)).toBe("delete");
    expect(certVerdict({ ...p, tidy_revoked_certs: true }, { notAfter: now - 501, revoked: true, parses: null }, now)).toBe("delete-with-revocation");
  });
  it("drops unparsable entries only with tidy_invalid_certs", () => {
    expect(certVerdict(params({ tidy_invalid_certs: true }), { notAfter: now + 999, revoked: false, parses: false }, now)).toBe("delete");
    expect(certVerdict(params({ tidy_cert_store: true }), { notAfter: now - 999_999, revoked: false, parses: false }, now)).toBe("keep");
  });
  it("runs the phases in upstream's order", () => {
    expect(newJob(params(), 0, false).phase).toBe("done");
    const all = params({ tidy_cert_store: true, tidy_revoked_certs: true, tidy_expired_issuers: true });
    expect(nextPhase(all, "certs", false)).toBe("certs");
    expect(nextPhase(all, "crl", false)).toBe("issuers");
    expect(nextPhase(all, "crl", true)).toBe("crl");
    expect(nextPhase(params({ tidy_revoked_cert_issuer_associations: true }), "certs", false)).toBe("revoked");
  });
  it("is due strictly after last end + interval, only when enabled with an operation", () => {
    const cfg = { ...AUTO_TIDY_DEFAULTS, enabled: true, tidy_cert_store: true, interval_duration: 60 };
    expect(autoTidyDue(cfg, 0, 60_000)).toBe(false);
    expect(autoTidyDue(cfg, 0, 60_001)).toBe(true);
    expect(autoTidyDue({ ...cfg, enabled: false }, 0, 1e12)).toBe(false);
    expect(autoTidyDue({ ...cfg, interval_duration: 0 }, 0, 1e12)).toBe(false);
  });
});

describe("tidy-status shape", () => {
  it("has every key, nulls and Inactive before any tidy", () => {
    const v = statusView(null, false, null, "uuid-1", null);
    expect(v.state).toBe("Inactive");
    expect(v.internal_backend_uuid).toBe("uuid-1");
    for (const k of ["safety_buffer", "tidy_cert_store", "pause_duration", "page_size", "time_started", "cert_store_deleted_count", "current_cert_store_count"]) {
      expect(v).toHaveProperty(k, null);
    }
  });
  it("shows Cancelling for a running job with a cancel request, and clears the message when finished", () => {
    const job = { ...newJob(params({ tidy_cert_store: true }), Date.UTC(2030, 0, 1), false), message: "working" };
    expect(statusView(job, true, null, "u", null).state).toBe("Cancelling");
    const done = statusView({ ...job, state: "Finished", timeFinished: Date.UTC(2030, 0, 1, 0, 1) }, false, 5, "u", { certs: 3, revoked: 1 });
    expect(done).toMatchObject({ state: "Finished", message: null, time_started: "2030-01-01T00:00:00.000Z", time_finished: "2030-01-01T00:01:00.000Z" });
    expect(done).toMatchObject({ current_cert_store_count: 3, current_revoked_cert_count: 1, pause_duration: "0s", page_size: 1000 });
  });
});
