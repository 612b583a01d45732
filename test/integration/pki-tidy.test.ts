/**
 * Tidy and auto-tidy over HTTP (Vault API /pki/tidy, /pki/config/auto-tidy): what goes and what stays around the safety
 * buffers, revocation entries and their issuer associations, invalid entries, expired issuers,
 * status transitions and counters, cancel, issuance during a running tidy, config/auto-tidy
 * validation, and auto-tidy started by the cron handler.
 */
import { createExecutionContext, createScheduledController, env, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import worker from "../../src/app/index";
import { api, list, read, write } from "../helpers/api";
import { parseCert, pkiWithRoot } from "../helpers/pki";
import { storedBody } from "../helpers/cert-body";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function setup(opts: Parameters<typeof pkiWithRoot>[0] = {}) {
  const ctx = await pkiWithRoot(opts);
  await write(`${ctx.path}/roles/r`, { allow_any_name: true, key_type: "ec", max_ttl: "24h" });
  const mounts = await read("sys/mounts");
  return { ...ctx, mountId: mounts.body.data[`${ctx.path}/`].uuid as string, accessor: mounts.body.data[`${ctx.path}/`].accessor as string };
}

/** Issues a leaf; returns its serial and notAfter (Unix seconds) as an independent parser reads it. */
async function issue(path: string, ttl: string, cn = "leaf.example") {
  const r = await write(`${path}/issue/r`, { common_name: cn, ttl });
  return { serial: r.body.data.serial_number as string, notAfter: Math.floor(parseCert(r.body.data.certificate).notAfter.getTime() / 1000) };
}

async function storedSerials(path: string): Promise<string[]> {
  const r = await api("GET", `${path}/certs?list=true`);
  return r.status === 404 ? [] : (r.body.data.keys as string[]);
}

/** Waits until every certificate in `notAfters` is more than `buffer` seconds past its notAfter. */
async function waitPast(notAfters: number[], buffer: number): Promise<void> {
  const until = (Math.max(...notAfters) + buffer + 1) * 1000 + 50;
  const wait = until - Date.now();
  if (wait > 0) await sleep(wait);
}

async function tidy(path: string, body: Record<string, unknown>) {
  const r = await write(`${path}/tidy`, body, {}, 202);
  expect(r.body.data).toBeNull();
  return r;
}

async function finished(path: string, state = "Finished"): Promise<Record<string, unknown>> {
  let data: Record<string, unknown> = {};
  await vi.waitFor(
    async () => {
      data = (await read(`${path}/tidy-status`)).body.data;
      expect(data.state).toBe(state);
    },
    { timeout: 20_000, interval: 100 },
  );
  return data;
}

async function insertRevoked(mountId: string, serial: string, issuerId: string) {
  const cert = await env.DB.prepare("SELECT not_after FROM pki_certs WHERE mount_no = (SELECT no FROM pki_ids WHERE id = ?) AND serial = unhex(replace(?, ':', ''))").bind(mountId, serial).first<{ not_after: number }>();
  if (!cert) throw new Error(`no stored certificate ${serial}`);
  const { der } = await storedBody(serial);
  const now = Math.floor(Date.now() / 1000);
  await env.DB.prepare("INSERT INTO pki_revoked (mount_id, serial, issuer_id, revocation_time, not_after, der, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)")
    .bind(mountId, serial, issuerId, now, cert.not_after, der, Date.now())
    .run();
}

const revokedRows = async (mountId: string) =>
  (await env.DB.prepare("SELECT serial, issuer_id FROM pki_revoked WHERE mount_id = ? ORDER BY id").bind(mountId).all<{ serial: string; issuer_id: string }>()).results;

describe("tidy-status and tidy-cancel before any tidy", () => {
  it("status is 200 with every key null and state Inactive; cancel warns", async () => {
    const { path, mountId } = await setup();
    const s = await read(`${path}/tidy-status`);
    expect(s.body.data.state).toBe("Inactive");
    expect(s.body.data.internal_backend_uuid).toBe(mountId);
    for (const k of ["safety_buffer", "tidy_cert_store", "tidy_revoked_certs", "pause_duration", "time_started", "time_finished", "cert_store_deleted_count", "last_auto_tidy_finished"]) {
      expect(s.body.data, k).toHaveProperty(k, null);
    }
    const c = await write(`${path}/tidy-cancel`, {});
    expect(c.body.data).toBeNull();
    expect(c.body.warnings).toEqual(["Tidy operation cannot be cancelled as none is currently running."]);
  });
});

describe("POST tidy validation", () => {
  it("answers 400 naming the field and starts nothing", async () => {
    const { path } = await setup();
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ safety_buffer: 0 }, /^safety_buffer must be greater than zero$/],
      [{ safety_buffer: "-5s" }, /field "safety_buffer"/],
      [{ revoked_safety_buffer: 0 }, /^revoked_safety_buffer must be greater than zero$/],
      [{ issuer_safety_buffer: "0s" }, /^issuer_safety_buffer must be greater than zero$/],
      [{ acme_account_safety_buffer: 0 }, /^acme_account_safety_buffer must be greater than zero$/],
      [{ pause_duration: "-1s" }, /^received invalid, negative pause_duration$/],
      [{ pause_duration: "a while" }, /^Error parsing pause_duration/],
      // Beyond Go's time.Duration range (upstream's parser refuses it too).
      [{ pause_duration: "99999999h" }, /^Error parsing pause_duration: time: invalid duration "99999999h"$/],
      [{ page_size: 3 }, /^page_size must be greater than five$/],
      [{ page_size: "many" }, /field "page_size"/],
      [{ tidy_cert_store: "perhaps" }, /field "tidy_cert_store"/],
    ];
    for (const [body, msg] of cases) {
      const r = await api("POST", `${path}/tidy`, { body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.errors[0], JSON.stringify(body)).toMatch(msg);
    }
    expect((await read(`${path}/tidy-status`)).body.data.state).toBe("Inactive");
  });

  it("with no operation set: 202 with the warning, and the run finishes at once", async () => {
    const { path } = await setup();
    const r = await tidy(path, { unknown_knob: 1 });
    expect(r.body.warnings).toContain(
      "Manual tidy requested but no tidy operations were set. Enable at least one tidy operation to be run (tidy_cert_store / tidy_revoked_certs / tidy_invalid_certs / tidy_revoked_cert_issuer_associations / tidy_expired_issuers / tidy_move_legacy_ca_bundle / tidy_acme).",
    );
    expect(r.body.warnings).toContain("Endpoint ignored these unrecognized parameters: [unknown_knob]");
    const s = await finished(path);
    expect(s).toMatchObject({ tidy_cert_store: false, cert_store_deleted_count: 0, safety_buffer: 259200, revoked_safety_buffer: 259200, page_size: 1000, pause_duration: "0s" });
  });
});

describe("tidy_cert_store", () => {
  it("keeps expired certificates inside the safety buffer and removes them past it", async () => {
    const { path, root } = await setup();
    const rootSerial = parseCert(root).serialNumber;
    const short = await issue(path, "2s", "short.example");
    const long = await issue(path, "1h", "long.example");
    await waitPast([short.notAfter], 1);

    const started = await tidy(path, { tidy_cert_store: true, safety_buffer: "1h" });
    expect(started.body.warnings).toEqual(["Tidy operation successfully started. Any information from the operation will be printed to Lanyard's server logs."]);
    const kept = await finished(path);
    expect(kept).toMatchObject({ tidy_cert_store: true, safety_buffer: 3600, cert_store_deleted_count: 0, message: null, error: null });
    expect(await storedSerials(path)).toContain(short.serial);

    await tidy(path, { tidy_cert_store: true, safety_buffer: 1, page_size: 5 });
    const done = await finished(path);
    expect(done).toMatchObject({ state: "Finished", safety_buffer: 1, page_size: 5, cert_store_deleted_count: 1, revoked_cert_deleted_count: 0 });
    expect(Date.parse(String(done.time_finished))).toBeGreaterThanOrEqual(Date.parse(String(done.time_started)));
    expect(done.last_auto_tidy_finished).toBeTruthy();
    const left = await storedSerials(path);
    expect(left).not.toContain(short.serial);
    expect(left).toContain(long.serial);
    // The root (valid until 2035) stays: same serial as an independent parser reads it.
    expect(left.map((s) => BigInt(`0x${s.replace(/:/g, "")}`))).toContain(BigInt(`0x${rootSerial}`));
    expect((await api("GET", `${path}/cert/${short.serial}`, { token: null })).status).toBe(404);
    expect((await api("GET", `${path}/cert/${long.serial}`, { token: null })).status).toBe(200);
  });

  it("pages through many certificates (page_size 5) and counts each deletion once", async () => {
    const { path } = await setup();
    const expired = await Promise.all(Array.from({ length: 12 }, (_, i) => issue(path, "2s", `e${i}.example`)));
    const valid = await Promise.all(Array.from({ length: 3 }, (_, i) => issue(path, "1h", `v${i}.example`)));
    await waitPast(expired.map((c) => c.notAfter), 1);
    await tidy(path, { tidy_cert_store: true, safety_buffer: 1, page_size: 5 });
    expect(await finished(path)).toMatchObject({ cert_store_deleted_count: 12 });
    const left = await storedSerials(path);
    for (const c of valid) expect(left).toContain(c.serial);
    for (const c of expired) expect(left).not.toContain(c.serial);
  });

  it("uses revoked_safety_buffer for revoked certificates, and removes the revocation with tidy_revoked_certs", async () => {
    const { path, mountId, issuerId } = await setup();
    const a = await issue(path, "2s", "a.example");
    const b = await issue(path, "2s", "b.example");
    await insertRevoked(mountId, a.serial, issuerId);
    await insertRevoked(mountId, b.serial, issuerId);
    await waitPast([a.notAfter, b.notAfter], 1);

    // Revoked ones follow the (long) revoked buffer, not safety_buffer.
    await tidy(path, { tidy_cert_store: true, safety_buffer: 1, revoked_safety_buffer: "1h" });
    expect(await finished(path)).toMatchObject({ cert_store_deleted_count: 0, revoked_safety_buffer: 3600 });
    // Past the revoked buffer, without tidy_revoked_certs: only the stored certificate goes.
    await tidy(path, { tidy_cert_store: true, safety_buffer: "1h", revoked_safety_buffer: 1 });
    expect(await finished(path)).toMatchObject({ cert_store_deleted_count: 2, revoked_cert_deleted_count: 0 });
    expect((await revokedRows(mountId)).map((r) => r.serial).sort()).toEqual([a.serial, b.serial].sort());
  });
});

describe("tidy_revoked_certs", () => {
  it("removes revocation entries (and their certificates) past notAfter + revoked_safety_buffer only", async () => {
    const { path, mountId, issuerId } = await setup();
    const old = await issue(path, "2s", "old.example");
    const fresh = await issue(path, "1h", "fresh.example");
    await insertRevoked(mountId, old.serial, issuerId);
    await insertRevoked(mountId, fresh.serial, issuerId);
    await waitPast([old.notAfter], 1);

    await tidy(path, { tidy_revocation_list: true, safety_buffer: "1h" });
    expect(await finished(path)).toMatchObject({ tidy_revoked_certs: true, revoked_cert_deleted_count: 0 });
    expect(await revokedRows(mountId)).toHaveLength(2);

    await tidy(path, { tidy_revoked_certs: true, revoked_safety_buffer: 1 });
    expect(await finished(path)).toMatchObject({ revoked_cert_deleted_count: 1, cert_store_deleted_count: 0 });
    expect((await revokedRows(mountId)).map((r) => r.serial)).toEqual([fresh.serial]);
    const left = await storedSerials(path);
    expect(left).not.toContain(old.serial);
    expect(left).toContain(fresh.serial);
  });
});

describe("tidy_revoked_cert_issuer_associations", () => {
  it("re-associates entries whose issuer is missing with the issuer whose key verifies them", async () => {
    const { path, mountId, issuerId } = await setup();
    // A second root in the same mount: the association must pick the one that really signed.
    const other = await write(`${path}/issuers/generate/root/internal`, { common_name: "Other Root", key_type: "ec", issuer_name: "other" });
    const otherId = other.body.data.issuer_id as string;
    await write(`${path}/roles/o`, { allow_any_name: true, key_type: "ec", issuer_ref: "other" });
    const a = await issue(path, "1h", "a.example");
    // An explicit TTL: the default (the mount's 768h) would end a second after the root made just
    // before it whenever the two straddle a second boundary, and issue refuses that (flaked in CI).
    const b = (await write(`${path}/issue/o`, { common_name: "b.example", ttl: "1h" })).body.data.serial_number as string;
    const c = await issue(path, "1h", "c.example");
    await insertRevoked(mountId, a.serial, "");
    await insertRevoked(mountId, b, "00000000-0000-0000-0000-000000000000");
    await insertRevoked(mountId, c.serial, issuerId);

    await tidy(path, { tidy_revoked_cert_issuer_associations: true });
    expect(await finished(path)).toMatchObject({ tidy_revoked_cert_issuer_associations: true, missing_issuer_cert_count: 2, revoked_cert_deleted_count: 0 });
    expect(await revokedRows(mountId)).toEqual([
      { serial: a.serial, issuer_id: issuerId },
      { serial: b, issuer_id: otherId },
      { serial: c.serial, issuer_id: issuerId },
    ]);
  });
});

describe("tidy_invalid_certs", () => {
  it("removes stored and revoked entries whose DER does not parse, and nothing else", async () => {
    const { path, mountId, issuerId } = await setup();
    const good = await issue(path, "1h");
    const junk = btoa("definitely not a certificate");
    await env.DB.prepare("INSERT INTO pki_certs (mount_no, serial, der, issuer_no, not_after, created_at) VALUES ((SELECT no FROM pki_ids WHERE id = ?), unhex(replace(?, ':', '')), ?, (SELECT no FROM pki_ids WHERE id = ?), ?, ?)")
      .bind(mountId, "0f:0f", junk, issuerId, 4102444800, Date.now())
      .run();
    await env.DB.prepare("INSERT INTO pki_revoked (mount_id, serial, issuer_id, revocation_time, not_after, der, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)")
      .bind(mountId, "0e:0e", issuerId, 1, 4102444800, junk, Date.now())
      .run();
    // Without the flag the cert-store pass leaves an unparsable entry alone.
    await tidy(path, { tidy_cert_store: true });
    expect(await finished(path)).toMatchObject({ cert_store_deleted_count: 0 });
    await tidy(path, { tidy_invalid_certs: true });
    expect(await finished(path)).toMatchObject({ tidy_invalid_certs: true, cert_store_deleted_count: 1, revoked_cert_deleted_count: 1 });
    const left = await storedSerials(path);
    expect(left).not.toContain("0f:0f");
    expect(left).toContain(good.serial);
    expect(await revokedRows(mountId)).toEqual([]);
  });
});

describe("tidy_expired_issuers", () => {
  it("removes expired non-default issuers, keeps the default and every key, and rebuilds chains", async () => {
    const { path, issuerId } = await setup();
    const short = await write(`${path}/issuers/generate/root/internal`, { common_name: "Short Root", key_type: "ec", ttl: "2s", issuer_name: "short" });
    const shortId = short.body.data.issuer_id as string;
    const notAfter = Math.floor(parseCert(short.body.data.certificate).notAfter.getTime() / 1000);
    await waitPast([notAfter], 1);

    await tidy(path, { tidy_expired_issuers: true });
    await finished(path);
    expect((await list(`${path}/issuers`, { token: null })).body.data.keys).toContain(shortId);

    await tidy(path, { tidy_expired_issuers: true, issuer_safety_buffer: 1 });
    expect(await finished(path)).toMatchObject({ tidy_expired_issuers: true, issuer_safety_buffer: 1 });
    expect((await list(`${path}/issuers`, { token: null })).body.data.keys).toEqual([issuerId]);
    expect((await list(`${path}/keys`)).body.data.keys).toHaveLength(2);
    expect((await read(`${path}/issuer/default`)).body.data.ca_chain).toHaveLength(1);
  });

  it("never removes the default issuer, even when it has expired", async () => {
    const { path, issuerId } = await setup({ ttl: "2s" });
    const notAfter = Math.floor(parseCert((await read(`${path}/issuer/default`)).body.data.certificate).notAfter.getTime() / 1000);
    await waitPast([notAfter], 1);
    await tidy(path, { tidy_expired_issuers: true, issuer_safety_buffer: 1 });
    await finished(path);
    expect((await list(`${path}/issuers`, { token: null })).body.data.keys).toEqual([issuerId]);
  });
});

describe("a running tidy", () => {
  it("is Running, refuses a second start, lets issuance through, and stops as Cancelled on cancel", async () => {
    const { path } = await setup();
    const certs = await Promise.all(Array.from({ length: 8 }, (_, i) => issue(path, "2s", `c${i}.example`)));
    await waitPast(certs.map((c) => c.notAfter), 1);
    // One entry per second: the job is still running while the test works.
    await tidy(path, { tidy_cert_store: true, safety_buffer: 1, pause_duration: "1s" });
    const running = (await read(`${path}/tidy-status`)).body.data;
    expect(running).toMatchObject({ state: "Running", pause_duration: "1s", time_finished: null });

    const again = await write(`${path}/tidy`, { tidy_cert_store: true });
    expect(again.status).toBe(200);
    expect(again.body.warnings).toEqual(["Tidy operation already in progress."]);

    // Issuance is not blocked by the tidy (the Authority serves serials between and during steps).
    const t0 = Date.now();
    const issued = await Promise.all(Array.from({ length: 5 }, (_, i) => issue(path, "1h", `during${i}.example`)));
    expect(Date.now() - t0).toBeLessThan(5000);
    expect((await read(`${path}/tidy-status`)).body.data.state).toBe("Running");

    const cancel = await write(`${path}/tidy-cancel`, {});
    expect(cancel.body.data.state).toBe("Cancelling");
    const done = await finished(path, "Cancelled");
    expect(done.time_finished).toBeTruthy();
    expect(Number(done.cert_store_deleted_count)).toBeLessThan(8);
    const left = await storedSerials(path);
    for (const c of issued) expect(left).toContain(c.serial);
    // A cancelled tidy can be followed by a new one, which finishes the work.
    await tidy(path, { tidy_cert_store: true, safety_buffer: 1 });
    await finished(path);
    const after = await storedSerials(path);
    for (const c of certs) expect(after).not.toContain(c.serial);
  });

  it("cancel during a long pause_duration stops the job at once instead of after the pause", async () => {
    const { path, accessor } = await setup();
    await Promise.all([issue(path, "1h", "a.example"), issue(path, "1h", "b.example")]);
    // The job sleeps 2,500,000h (past the year 2189, the latest alarm a Durable Object takes)
    // between entries: it must wait rather than fail, and a cancel must not leave the mount's
    // tidy wedged ("already in progress") until then.
    await tidy(path, { tidy_cert_store: true, pause_duration: "2500000h" });
    await vi.waitFor(async () => expect((await read(`${path}/tidy-status`)).body.data.message).toBeTruthy(), { timeout: 5000, interval: 100 });
    await sleep(3000);
    const waiting = (await read(`${path}/tidy-status`)).body.data;
    expect(waiting).toMatchObject({ state: "Running", error: null, pause_duration: "2500000h0m0s" });
    expect(waiting.message).toMatch(/total certs checked: 1$/);
    // The next step is scheduled (a date Durable Objects accept), not lost to a failed setAlarm.
    const alarm = await runInDurableObject(env.AUTHORITY.getByName(accessor), (_o, state: DurableObjectState) => state.storage.getAlarm());
    expect(alarm).toBeGreaterThan(Date.now() + 50 * 365 * 86400_000);
    expect((await write(`${path}/tidy-cancel`, {})).body.data.state).toBe("Cancelling");
    await finished(path, "Cancelled");
    await tidy(path, { tidy_cert_store: true });
    await finished(path);
  });
});

describe("config/auto-tidy", () => {
  it("reads defaults, updates partially, validates without writing, and shapes durations", async () => {
    const { path } = await setup();
    const d = (await read(`${path}/config/auto-tidy`)).body.data;
    expect(d).toEqual({
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
    const w = await write(`${path}/config/auto-tidy`, { tidy_cert_store: true, interval_duration: "2h", safety_buffer: "1h", pause_duration: "250ms" });
    expect(w.body.data).toMatchObject({ tidy_cert_store: true, interval_duration: 7200, safety_buffer: 3600, revoked_safety_buffer: 3600, pause_duration: "250ms" });
    await write(`${path}/config/auto-tidy`, { enabled: true, page_size: 50 });
    const r = (await read(`${path}/config/auto-tidy`)).body.data;
    expect(r).toMatchObject({ enabled: true, tidy_cert_store: true, interval_duration: 7200, page_size: 50, pause_duration: "250ms" });

    const bad: [Record<string, unknown>, RegExp][] = [
      [{ tidy_cert_store: false }, /^Auto-tidy enabled but no tidy operations were requested/],
      [{ safety_buffer: 0 }, /^given safety_buffer must be at least one second/],
      [{ revoked_safety_buffer: 0 }, /^revoked_safety_buffer must be at least one second/],
      [{ page_size: 4 }, /^page_size must be at least 5$/],
      [{ pause_duration: "-1s" }, /^received invalid, negative pause_duration$/],
      [{ interval_duration: "-1h" }, /field "interval_duration"/],
      [{ publish_stored_certificate_count_metrics: true }, /maintain_stored_certificate_counts/],
    ];
    for (const [body, msg] of bad) {
      const res = await api("POST", `${path}/config/auto-tidy`, { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.errors[0], JSON.stringify(body)).toMatch(msg);
    }
    expect((await read(`${path}/config/auto-tidy`)).body.data).toEqual(r);
  });

  it("maintain_stored_certificate_counts adds the current counts to tidy-status", async () => {
    const { path, mountId, issuerId } = await setup();
    const a = await issue(path, "1h");
    await issue(path, "1h", "b.example");
    await insertRevoked(mountId, a.serial, issuerId);
    expect((await read(`${path}/tidy-status`)).body.data.current_cert_store_count).toBeNull();
    await write(`${path}/config/auto-tidy`, { maintain_stored_certificate_counts: true, publish_stored_certificate_count_metrics: true });
    const s = (await read(`${path}/tidy-status`)).body.data;
    expect(s.current_cert_store_count).toBe((await storedSerials(path)).length);
    expect(s.current_revoked_cert_count).toBe(1);
  });
});

describe("auto-tidy from the cron handler", () => {
  async function runCron() {
    const ctx = createExecutionContext();
    await (worker as ExportedHandler<Env>).scheduled?.(createScheduledController({ scheduledTime: new Date(), cron: "* * * * *" }), env, ctx);
    await waitOnExecutionContext(ctx);
  }

  it("starts a tidy once the interval since the mount's creation has passed, then waits a full interval", async () => {
    const due = await setup();
    const notDue = await setup();
    const disabled = await setup();
    const expired = await issue(due.path, "2s", "x.example");
    const keep = await issue(notDue.path, "2s", "y.example");
    await write(`${due.path}/config/auto-tidy`, { enabled: true, tidy_cert_store: true, safety_buffer: 1, interval_duration: 1 });
    await write(`${notDue.path}/config/auto-tidy`, { enabled: true, tidy_cert_store: true, safety_buffer: 1, interval_duration: "1h" });
    await write(`${disabled.path}/config/auto-tidy`, { enabled: false, tidy_cert_store: true, interval_duration: 1 });
    await waitPast([expired.notAfter, keep.notAfter], 1);

    await runCron();
    const s = await finished(due.path);
    expect(s).toMatchObject({ tidy_cert_store: true, safety_buffer: 1, cert_store_deleted_count: 1 });
    expect(await storedSerials(due.path)).not.toContain(expired.serial);
    expect((await read(`${notDue.path}/tidy-status`)).body.data.state).toBe("Inactive");
    expect((await read(`${disabled.path}/tidy-status`)).body.data.state).toBe("Inactive");
    expect(await storedSerials(notDue.path)).toContain(keep.serial);

    // The next run waits for interval_duration after the last end: not due with 1h ...
    const lastEnd = String(s.last_auto_tidy_finished);
    await write(`${due.path}/config/auto-tidy`, { interval_duration: "1h" });
    await runCron();
    expect((await read(`${due.path}/tidy-status`)).body.data).toMatchObject({ state: "Finished", last_auto_tidy_finished: lastEnd });
    // ... and due again once 1s has passed since that end.
    await write(`${due.path}/config/auto-tidy`, { interval_duration: 1 });
    await sleep(Math.max(0, Date.parse(lastEnd) + 1100 - Date.now()));
    await runCron();
    await vi.waitFor(async () => expect((await read(`${due.path}/tidy-status`)).body.data.last_auto_tidy_finished).not.toBe(lastEnd), { timeout: 10_000 });
  });
});
