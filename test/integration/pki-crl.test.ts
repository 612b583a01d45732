/**
 * CRLs over HTTP (RFC 5280 §5; Vault API /pki/crl, /pki/config/crl), read back with @peculiar/x509 (an independent
 * parser): the profile (v2, AKI, CRL Number, Delta CRL Indicator, Freshest CRL, validity from
 * config/crl expiry, signature by the issuer key), every endpoint's shape and content type,
 * 204 and 304, config/crl defaults and validation, disable, numbering, delta CRLs, the
 * auto_rebuild cron, and 100 concurrent revocations across two issuers (all on the CRLs, CRL
 * numbers strictly increasing, builds never overlapping, and coalesced).
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { pkiCrlAutoRebuildJob } from "../../src/engines/pki/revocation/crl-cron";
import { api, read, write } from "../helpers/api";
import { pkiWithRoot, x509 } from "../helpers/pki";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function setup(opts: Parameters<typeof pkiWithRoot>[0] = {}) {
  const ctx = await pkiWithRoot(opts);
  await write(`${ctx.path}/roles/ec`, { allow_any_name: true, key_type: "ec", max_ttl: "24h" });
  const mounts = await read("sys/mounts");
  return { ...ctx, accessor: mounts.body.data[`${ctx.path}/`].accessor as string };
}

async function issue(path: string, role = "ec"): Promise<string> {
  return (await write(`${path}/issue/${role}`, { common_name: "leaf.example", ttl: "1h" })).body.data.serial_number as string;
}

const intOf = (b: ArrayBuffer) => new Uint8Array(b).slice(2).reduce((a, x) => a * 256 + x, 0);

function crlFacts(crl: x509.X509Crl) {
  const ext = (oid: string) => crl.extensions.find((e) => e.type === oid);
  const num = ext("2.5.29.20");
  const delta = ext("2.5.29.27");
  return {
    number: num ? intOf(num.value) : -1,
    deltaOf: delta ? intOf(delta.value) : null,
    deltaCritical: delta?.critical ?? false,
    freshest: ext("2.5.29.46") ?? null,
    aki: ext("2.5.29.35") ?? null,
    serials: crl.entries.map((e) => (e.serialNumber.toLowerCase().match(/../g) ?? []).join(":").replace(/^(00:)+/, "")),
  };
}

async function getCrl(path: string, which: string): Promise<x509.X509Crl> {
  const r = await api("GET", `${path}/${which}`, { token: null });
  expect(r.status, `${which}: ${r.text}`).toBe(200);
  return new x509.X509Crl(r.text);
}

describe("the CRL of a fresh root", () => {
  it("is a v2 CRL signed by the root, with AKI, CRL Number and 72h validity; its delta has a critical indicator", async () => {
    const { path, root } = await setup();
    const rootCert = new x509.X509Certificate(root);
    const crl = await getCrl(path, "crl/pem");
    // v2 is encoded as INTEGER 1 (RFC 5280 §5.1.2.1), which is what the parser reports.
    expect(crl.version).toBe(1);
    expect(await crl.verify({ publicKey: rootCert.publicKey })).toBe(true);
    expect(crl.issuer).toBe(rootCert.subject);
    const f = crlFacts(crl);
    expect(f.aki).not.toBeNull();
    const ski = rootCert.extensions.find((e) => e.type === "2.5.29.14");
    expect(Buffer.from(new Uint8Array(f.aki?.value ?? new ArrayBuffer(0))).toString("hex")).toContain(Buffer.from(new Uint8Array(ski?.value ?? new ArrayBuffer(0)).slice(2)).toString("hex"));
    expect(f.serials).toEqual([]);
    expect(f.freshest).toBeNull();
    expect((crl.nextUpdate?.getTime() ?? 0) - crl.thisUpdate.getTime()).toBe(72 * 3600 * 1000);
    const delta = crlFacts(await getCrl(path, "crl/delta/pem"));
    expect(delta.deltaOf).toBe(f.number);
    expect(delta.deltaCritical).toBe(true);
    expect(delta.number).toBe(f.number + 1);
  });

  it("every endpoint's shape, content type and trailing newline; 304 on If-Modified-Since", async () => {
    const { path, issuerId } = await setup();
    const der = await api("GET", `${path}/crl`, { token: null });
    expect(der.headers.get("content-type")).toBe("application/pkix-crl");
    const pem = await api("GET", `${path}/crl/pem`, { token: null });
    expect(pem.headers.get("content-type")).toBe("application/x-pem-file");
    expect(pem.text.startsWith("-----BEGIN X509 CRL-----")).toBe(true);
    expect(pem.text.endsWith("-----END X509 CRL-----")).toBe(true);
    expect((await api("GET", `${path}/crl/delta`, { token: null })).headers.get("content-type")).toBe("application/pkix-crl");
    const ipem = await api("GET", `${path}/issuer/${issuerId}/crl/pem`, { token: null });
    expect(ipem.text).toBe(`${pem.text}\n`);
    const ider = await api("GET", `${path}/issuer/root-ca/crl/der`, { token: null });
    expect(ider.headers.get("content-type")).toBe("application/pkix-crl");
    expect(new Uint8Array(await new Response(ider.text).arrayBuffer()).length).toBeGreaterThan(0);
    const json = await api("GET", `${path}/issuer/root-ca/crl`, { token: null });
    expect(json.body.data.crl).toBe(pem.text);
    const djson = await api("GET", `${path}/issuer/root-ca/crl/delta`, { token: null });
    expect(djson.body.data.crl).toContain("BEGIN X509 CRL");
    expect((await api("GET", `${path}/issuer/root-ca/crl/delta/pem`, { token: null })).text.endsWith("-----\n")).toBe(true);
    expect((await api("GET", `${path}/issuer/root-ca/crl/delta/der`, { token: null })).status).toBe(200);
    const cert = await api("GET", `${path}/cert/crl`, { token: null });
    expect(cert.body.data).toEqual({ certificate: pem.text, revocation_time: 0, revocation_time_rfc3339: "" });
    expect((await api("GET", `${path}/cert/delta-crl`, { token: null })).body.data.certificate).toContain("BEGIN X509 CRL");

    const lastModified = der.headers.get("last-modified");
    expect(lastModified).toBeTruthy();
    const later = new Date(Date.now() + 60_000).toUTCString();
    expect((await api("GET", `${path}/crl`, { token: null, headers: { "if-modified-since": later } })).status).toBe(304);
    expect((await api("GET", `${path}/crl`, { token: null, headers: { "if-modified-since": "Mon, 01 Jan 2001 00:00:00 GMT" } })).status).toBe(200);
  });

  it("204 without a default issuer; unknown issuer 400; rotate needs a token", async () => {
    const path = `pki-${crypto.randomUUID().slice(0, 8)}`;
    await write(`sys/mounts/${path}`, { type: "pki" }, {}, 204);
    expect((await api("GET", `${path}/crl`, { token: null })).status).toBe(204);
    expect((await api("GET", `${path}/crl/delta/pem`, { token: null })).status).toBe(204);
    expect((await api("GET", `${path}/cert/crl`, { token: null })).status).toBe(400);
    expect((await api("GET", `${path}/issuer/nope/crl/pem`, { token: null })).status).toBe(400);
    expect((await api("GET", `${path}/crl/rotate`, { token: null })).status).toBe(403);
  });
});

describe("numbering and rotation", () => {
  it("complete n, delta n+1 (indicator n), next complete n+2: numbers only grow", async () => {
    const { path } = await setup();
    const seen: number[] = [];
    for (let i = 0; i < 3; i++) {
      const c = crlFacts(await getCrl(path, "crl/pem"));
      const d = crlFacts(await getCrl(path, "crl/delta/pem"));
      expect(d.number).toBe(c.number + 1);
      expect(d.deltaOf).toBe(c.number);
      seen.push(c.number, d.number);
      expect((await read(`${path}/crl/rotate`)).body.data).toEqual({ success: true });
    }
    for (let i = 1; i < seen.length; i++) expect(seen[i]).toBeGreaterThan(seen[i - 1] ?? 0);
  });
});

describe("config/crl", () => {
  it("reads defaults, updates partially, and validates with upstream's messages", async () => {
    const { path } = await setup();
    const d = await read(`${path}/config/crl`);
    expect(d.body.data).toEqual({
      expiry: "72h",
      disable: false,
      ocsp_disable: false,
      ocsp_expiry: "12h",
      auto_rebuild: false,
      auto_rebuild_grace_period: "12h",
      enable_delta: false,
      delta_rebuild_interval: "15m",
      allow_expired_cert_revocation: false,
      max_crl_entries: 100000,
      shard_count: 1,
      published_shards: 1,
      cross_cluster_revocation: false,
      unified_crl: false,
      unified_crl_on_existing_paths: false,
    });
    const u = await write(`${path}/config/crl`, { expiry: "48h" });
    expect(u.body.data.expiry).toBe("48h");
    expect(u.body.data.ocsp_expiry).toBe("12h");
    const bad = async (body: Record<string, unknown>, message: string) => {
      const r = await api("POST", `${path}/config/crl`, { body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.errors[0]).toContain(message);
    };
    await bad({ expiry: "soon" }, "given expiry could not be decoded");
    await bad({ ocsp_expiry: "-1h" }, "ocsp_expiry must be greater than or equal to 0");
    await bad({ auto_rebuild_grace_period: "x" }, "given auto_rebuild_grace_period could not be decoded");
    await bad({ delta_rebuild_interval: "x" }, "given delta_rebuild_interval could not be decoded");
    await bad({ auto_rebuild: true, auto_rebuild_grace_period: "48h" }, "CRL auto-rebuilding grace period (48h) must be strictly shorter than CRL expiry (48h)");
    await bad({ enable_delta: true }, "Delta CRLs cannot be enabled when auto rebuilding is disabled as the complete CRL is always regenerated!");
    await bad({ auto_rebuild: true, enable_delta: true, delta_rebuild_interval: "49h" }, "CRL delta rebuild window (49h) must be strictly shorter than CRL expiry (48h)");
    await bad({ disable: "maybe" }, 'error converting input for field "disable"');
    await bad({ max_crl_entries: 0 }, "max_crl_entries");
    await bad({ unified_crl_on_existing_paths: true }, "unified_crl_on_existing_paths cannot be enabled if unified_crl is disabled");
    // Nothing was written by the refused updates.
    expect((await read(`${path}/config/crl`)).body.data.auto_rebuild).toBe(false);
    // The expiry drives nextUpdate.
    await read(`${path}/crl/rotate`);
    const crl = await getCrl(path, "crl/pem");
    expect((crl.nextUpdate?.getTime() ?? 0) - crl.thisUpdate.getTime()).toBe(48 * 3600 * 1000);
  });

  it("refuses durations past Go's time.Duration range, so nextUpdate always has a 4-digit year", async () => {
    const { path } = await setup();
    for (const field of ["expiry", "ocsp_expiry", "auto_rebuild_grace_period", "delta_rebuild_interval"]) {
      const r = await api("POST", `${path}/config/crl`, { body: { [field]: "99999999h" } });
      expect(r.status, field).toBe(400);
      expect(r.body.errors[0]).toBe(`given ${field} could not be decoded: time: invalid duration "99999999h"`);
    }
    expect((await read(`${path}/config/crl`)).body.data.expiry).toBe("72h");
    // The longest duration Go can hold is accepted and gives a CRL whose nextUpdate parses.
    expect((await write(`${path}/config/crl`, { expiry: "9223372036s" })).body.data.expiry).toBe("9223372036s");
    await read(`${path}/crl/rotate`);
    const crl = await getCrl(path, "crl/pem");
    expect((crl.nextUpdate?.getTime() ?? 0) - crl.thisUpdate.getTime()).toBe(9_223_372_036 * 1000);
  });

  it("disable publishes an empty CRL; revocations reappear once re-enabled", async () => {
    const { path } = await setup();
    const serial = await issue(path);
    await write(`${path}/revoke`, { serial_number: serial });
    expect(crlFacts(await getCrl(path, "crl/pem")).serials).toContain(serial);
    await write(`${path}/config/crl`, { disable: true });
    const off = crlFacts(await getCrl(path, "crl/pem"));
    expect(off.serials).toEqual([]);
    await write(`${path}/config/crl`, { disable: false });
    expect(crlFacts(await getCrl(path, "crl/pem")).serials).toContain(serial);
  });

  it("max_crl_entries: a CRL above the limit is refused and the last one stays", async () => {
    const { path } = await setup();
    await write(`${path}/config/crl`, { max_crl_entries: 1 });
    const a = await issue(path);
    const b = await issue(path);
    await write(`${path}/revoke`, { serial_number: a });
    const r = await write(`${path}/revoke`, { serial_number: b });
    expect(r.body.warnings.join(" ")).toContain("revocation list size (2) exceeds configured maximum (1)");
    expect(crlFacts(await getCrl(path, "crl/pem")).serials).toEqual([a]);
    const rot = await api("GET", `${path}/crl/rotate`);
    expect(rot.status).toBe(400);
  });
});

describe("delta CRLs", () => {
  it("list revocations since the complete CRL; the complete CRL points at them (Freshest CRL)", async () => {
    const { path } = await setup();
    await write(`${path}/config/urls`, { delta_crl_distribution_points: ["http://crl.example/delta.crl"] });
    await write(`${path}/config/crl`, { auto_rebuild: true, enable_delta: true });
    const complete = crlFacts(await getCrl(path, "crl/pem"));
    expect(complete.freshest).not.toBeNull();
    const serial = await issue(path);
    await write(`${path}/revoke`, { serial_number: serial });
    expect(crlFacts(await getCrl(path, "crl/delta/pem")).serials).toEqual([]);
    const rd = await read(`${path}/crl/rotate-delta`);
    expect(rd.body.data).toEqual({ success: true });
    const delta = crlFacts(await getCrl(path, "crl/delta/pem"));
    expect(delta.serials).toEqual([serial]);
    expect(delta.deltaOf).toBe(complete.number);
    expect(delta.number).toBeGreaterThan(complete.number + 1);
    expect(crlFacts(await getCrl(path, "crl/pem")).serials).toEqual([]);
    // A complete rebuild takes it over and empties the delta.
    await read(`${path}/crl/rotate`);
    expect(crlFacts(await getCrl(path, "crl/pem")).serials).toEqual([serial]);
    expect(crlFacts(await getCrl(path, "crl/delta/pem")).serials).toEqual([]);
  });

  it("rotate-delta without delta CRLs is a no-op with upstream's warning", async () => {
    const { path } = await setup();
    const r = await read(`${path}/crl/rotate-delta`);
    expect(r.body.warnings).toEqual(["requested rebuild of delta CRL when delta CRL is not enabled; this is a no-op"]);
  });
});

describe("the auto_rebuild cron job", () => {
  it("rebuilds within the grace period of nextUpdate and builds deltas when revocations arrived", async () => {
    const { path } = await setup();
    await write(`${path}/config/crl`, { auto_rebuild: true, expiry: "1h", auto_rebuild_grace_period: "3599s", enable_delta: true, delta_rebuild_interval: "1s" });
    const first = crlFacts(await getCrl(path, "crl/pem"));
    await sleep(1500);
    await pkiCrlAutoRebuildJob(env);
    const second = crlFacts(await getCrl(path, "crl/pem"));
    expect(second.number).toBeGreaterThan(first.number);

    await write(`${path}/config/crl`, { auto_rebuild_grace_period: "1m" });
    const serial = await issue(path);
    await write(`${path}/revoke`, { serial_number: serial });
    await sleep(1100);
    await pkiCrlAutoRebuildJob(env);
    const delta = crlFacts(await getCrl(path, "crl/delta/pem"));
    expect(delta.serials).toEqual([serial]);
    // Nothing new: the next tick builds nothing.
    const before = crlFacts(await getCrl(path, "crl/delta/pem")).number;
    await sleep(1100);
    await pkiCrlAutoRebuildJob(env);
    expect(crlFacts(await getCrl(path, "crl/delta/pem")).number).toBe(before);
  });
});

describe("100 concurrent revocations across two issuers", () => {
  it("end in CRLs that hold all 100, with CRL numbers strictly increasing and builds never overlapping", async () => {
    const { path, accessor, issuerId: first } = await setup();
    const second = (await write(`${path}/issuers/generate/root/internal`, { common_name: "Second Root", key_type: "rsa", key_bits: 2048, issuer_name: "second" })).body.data.issuer_id as string;
    await write(`${path}/roles/a`, { allow_any_name: true, key_type: "ec", issuer_ref: first });
    await write(`${path}/roles/b`, { allow_any_name: true, key_type: "ec", issuer_ref: second });
    const serials: { serial: string; issuer: string }[] = [];
    for (let i = 0; i < 50; i++) {
      const [a, b] = await Promise.all([issue(path, "a"), issue(path, "b")]);
      serials.push({ serial: a, issuer: first }, { serial: b, issuer: second });
    }
    const numbersBefore = {
      [first]: crlFacts(await getCrl(path, `issuer/${first}/crl/pem`)).number,
      [second]: crlFacts(await getCrl(path, `issuer/${second}/crl/pem`)).number,
    };
    const results = await Promise.all(serials.map((s) => api("POST", `${path}/revoke`, { body: { serial_number: s.serial } })));
    for (const r of results) expect(r.status, r.text).toBe(200);

    for (const id of [first, second]) {
      const crl = await getCrl(path, `issuer/${id}/crl/pem`);
      const f = crlFacts(crl);
      const mine = serials.filter((s) => s.issuer === id).map((s) => s.serial);
      expect(f.serials.sort()).toEqual(mine.sort());
      expect(f.number).toBeGreaterThan(numbersBefore[id] ?? 0);
    }

    const history = await env.AUTHORITY.getByName(accessor).crlBuildHistory();
    const builds = history.filter((h) => h.startedAt > 0);
    expect(builds.every((h) => h.error === null)).toBe(true);
    // Coalesced: far fewer builds than requests, every request answered by one build.
    expect(builds.length).toBeLessThan(100);
    for (let i = 1; i < builds.length; i++) {
      const prev = builds[i - 1];
      const cur = builds[i];
      if (!prev || !cur) continue;
      expect(cur.startedAt).toBeGreaterThanOrEqual(prev.finishedAt);
      expect(cur.seq).toBe(prev.seq + 1);
      for (const id of [first, second]) {
        const a = prev.numbers[id]?.complete;
        const b = cur.numbers[id]?.complete;
        if (a !== undefined && b !== undefined) expect(b).toBeGreaterThan(a);
      }
    }
  });
});
