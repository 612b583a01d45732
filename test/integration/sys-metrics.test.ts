/**
 * sys/metrics (docs/operations.md "Metrics"; Vault API: /sys/metrics): the gauges move as
 * certificates are issued, revoked and expire (a certificate issued with a ttl of a few seconds,
 * waited out), one computation is answered for at most 10 s per isolate, and access follows the
 * ACL (read on sys/metrics), the root namespace only, and METRICS_UNAUTHENTICATED. The Analytics
 * Engine hook writes one data point per request to a METRICS_DATASET binding (a recording fake:
 * Miniflare's local dataset accepts points but keeps none to read back).
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { app } from "../../src/app/app";
import { currentMetrics, METRICS_CACHE_MS } from "../../src/app/sys/metrics";
import { openDb } from "../../src/core/db/client";
import { ROOT, tokenWithPolicy, write } from "../helpers/api";
import { CLOUDONE_HOSTS, FakeCloudone } from "../helpers/fake-cloudone";
import { installFakes } from "../helpers/fake-router";
import { pkiWithRoot } from "../helpers/pki";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { destPath, kvSecret, setAssoc } from "../helpers/sync-engine";

interface Gauge {
  Name: string;
  Value: number;
  Labels: Record<string, string>;
}

/** One request straight to the Worker's app with extra bindings (the metrics cache is this isolate's). */
async function call(path: string, opts: { token?: string | null; namespace?: string; env?: Partial<Env>; method?: string; body?: unknown } = {}) {
  const headers: Record<string, string> = {};
  const token = opts.token === undefined ? ROOT : opts.token;
  if (token !== null) headers["x-vault-token"] = token;
  if (opts.namespace) headers["x-vault-namespace"] = opts.namespace;
  if (opts.body !== undefined) headers["content-type"] = "application/json";
  const ctx = createExecutionContext();
  const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  const res = await app.fetch(new Request(`http://lanyard.test/v1/${path}`, { method: opts.method ?? "GET", headers, body }), { ...env, ...opts.env }, ctx);
  await waitOnExecutionContext(ctx);
  return res;
}

async function metrics(): Promise<{ Timestamp: string; Gauges: Gauge[] }> {
  const res = await call("sys/metrics");
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("application/json");
  return (await res.json()) as { Timestamp: string; Gauges: Gauge[] };
}

/** The value of the gauge whose labels include `labels`, 0 when there is none. */
function valueOf(gauges: Gauge[], name: string, labels: Record<string, string>): number {
  const hit = gauges.filter((g) => g.Name === name && Object.entries(labels).every(([k, v]) => g.Labels[k] === v));
  expect(hit.length).toBeLessThanOrEqual(1);
  return hit[0]?.Value ?? 0;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("sys/metrics gauges", () => {
  it("move as certificates are issued, revoked and expire; one read is answered for at most 10 s", async () => {
    const { path, issuerId } = await pkiWithRoot();
    await write(`${path}/roles/web`, { allow_any_name: true, key_type: "ec", max_ttl: "24h" });
    const at = { namespace: "root", mount: `${path}/`, issuer: issuerId };
    const a = await write(`${path}/issue/web`, { common_name: "a.example", ttl: "1h" });
    await write(`${path}/issue/web`, { common_name: "short.example", ttl: "4s" });
    await write(`${path}/issue/web`, { common_name: "week.example", ttl: "23h" });

    const t0 = Date.now();
    const m0 = await metrics();
    expect(valueOf(m0.Gauges, "lanyard.pki.certificates", { ...at, expiry: "lt_24h" })).toBe(3);
    expect(valueOf(m0.Gauges, "lanyard.pki.certificates", { ...at, expiry: "expired" })).toBe(0);
    // The root's own certificate is stored too, expiring in 2035.
    expect(valueOf(m0.Gauges, "lanyard.pki.certificates", { ...at, expiry: "later" })).toBe(1);
    expect(valueOf(m0.Gauges, "lanyard.pki.certificates.revoked", at)).toBe(0);
    const toExpiry = valueOf(m0.Gauges, "lanyard.pki.issuer.expiry_seconds", { ...at, issuer_name: "root-ca" });
    expect(Math.abs(toExpiry - (Date.parse("2035-01-01T00:00:00Z") - t0) / 1000)).toBeLessThan(60);
    expect(valueOf(m0.Gauges, "lanyard.token.count", { namespace: "root" })).toBeGreaterThanOrEqual(0);

    await write(`${path}/revoke`, { serial_number: a.body.data.serial_number });
    await write(`${path}/issue/web`, { common_name: "c.example", ttl: "1h" });
    // Within 10 s of the read this isolate answers the same computation.
    const m1 = await metrics();
    expect(m1).toEqual(m0);

    // The 4 s certificate expires, and the computation ages past 10 s.
    await sleep(Math.max(0, t0 + 10_500 - Date.now()));
    const m2 = await metrics();
    expect(m2.Timestamp).not.toBe(m0.Timestamp);
    expect(valueOf(m2.Gauges, "lanyard.pki.certificates", { ...at, expiry: "lt_24h" })).toBe(3);
    expect(valueOf(m2.Gauges, "lanyard.pki.certificates", { ...at, expiry: "expired" })).toBe(1);
    expect(valueOf(m2.Gauges, "lanyard.pki.certificates.revoked", at)).toBe(1);
    // The revocation rebuilt the CRL: its age is seconds, not absent.
    const crlAge = valueOf(m2.Gauges, "lanyard.pki.crl.age_seconds", { ...at, kind: "complete" });
    expect(crlAge).toBeGreaterThanOrEqual(0);
    expect(crlAge).toBeLessThan(60);
    // The other contributors answer too: secrets sync, and both queues' backlogs as their bindings report them.
    const names = new Set(m2.Gauges.map((g) => g.Name));
    for (const n of ["lanyard.sync.pending.oldest_age_seconds", "lanyard.audit.queue.backlog.messages", "lanyard.sync.queue.backlog.messages"]) expect(names).toContain(n);
  }, 60_000);

  it("answers the Prometheus text format with ?format=prometheus, and 400 naming format for another", async () => {
    const res = await call("sys/metrics?format=prometheus");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    expect(text).toContain("# TYPE lanyard_pki_certificates gauge");
    expect(text).toMatch(/^lanyard_pki_certificates\{namespace="root",mount="[^"]+",issuer="[^"]+",expiry="(expired|lt_24h|lt_7d|lt_30d|later)"\} \d+$/m);
    const bad = await call("sys/metrics?format=xml");
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { errors: string[] }).errors[0]).toMatch(/^format: /);
  });
});

describe("sys/metrics sync gauges", () => {
  const fake = new FakeCloudone({ [SECRETS.awsKey]: SECRETS.awsSecret });
  let uninstall: () => void;
  beforeAll(() => {
    uninstall = installFakes([{ hosts: CLOUDONE_HOSTS, fake }]);
  });
  afterAll(() => uninstall());

  it("count associations by status, with nothing pending once they are synced", async () => {
    const gaugesAt = async (now: number) =>
      (await currentMetrics(openDb(env.DB), env, now)).families.flatMap((f) => f.samples.map((s) => ({ Name: f.name, Value: s.value, Labels: { ...s.labels } })));
    const at = { namespace: "root", destination_type: "cloudone-sm" };
    // A read as of one cache lifetime later: computed afresh, whatever this isolate kept.
    const before = await gaugesAt(Date.now() + METRICS_CACHE_MS);
    const name = `aws-${uid()}`;
    await write(destPath("cloudone-sm", name), BODIES["cloudone-sm"]);
    await setAssoc("cloudone-sm", name, await kvSecret({ x: "1" }, "metrics/a"));
    await setAssoc("cloudone-sm", name, await kvSecret({ y: "2" }, "metrics/b"));
    const after = await gaugesAt(Date.now() + 2 * METRICS_CACHE_MS);
    expect(valueOf(after, "lanyard.sync.associations", { ...at, status: "SYNCED" }) - valueOf(before, "lanyard.sync.associations", { ...at, status: "SYNCED" })).toBe(2);
    expect(valueOf(after, "lanyard.sync.pending", at)).toBe(0);
    expect(valueOf(after, "lanyard.sync.dead_letters", at)).toBe(0);
    expect(valueOf(after, "lanyard.sync.pending.oldest_age_seconds", {})).toBe(0);
  });
});

describe("sys/metrics access", () => {
  it("needs a token with read on sys/metrics", async () => {
    expect((await call("sys/metrics", { token: null })).status).toBe(403);
    const other = await tokenWithPolicy('path "sys/mounts" { capabilities = ["read"] }');
    expect((await call("sys/metrics", { token: other })).status).toBe(403);
    const reader = await tokenWithPolicy('path "sys/metrics" { capabilities = ["read"] }');
    expect((await call("sys/metrics", { token: reader })).status).toBe(200);
  });

  it("is the root namespace's only: a namespaced token is refused, a child namespace's path is 400", async () => {
    const ns = `m${crypto.randomUUID().slice(0, 6)}`;
    await write(`sys/namespaces/${ns}`, {});
    const token = await tokenWithPolicy('path "sys/metrics" { capabilities = ["read"] }', { namespace: ns });
    expect((await call("sys/metrics", { token })).status).toBe(403);
    const child = await call("sys/metrics", { token, namespace: ns });
    expect(child.status).toBe(400);
    expect(((await child.json()) as { errors: string[] }).errors[0]).toContain("root namespace");
  });

  it("answers without a token with METRICS_UNAUTHENTICATED=true, and refuses to serve a value other than true or false", async () => {
    expect((await call("sys/metrics?format=prometheus", { token: null, env: { METRICS_UNAUTHENTICATED: "true" } })).status).toBe(200);
    expect((await call("sys/metrics", { token: null, env: { METRICS_UNAUTHENTICATED: "false" } })).status).toBe(403);
    // Only sys/metrics is opened.
    expect((await call("sys/mounts", { token: null, env: { METRICS_UNAUTHENTICATED: "true" } })).status).toBe(403);
    const bad = await call("sys/metrics", { env: { METRICS_UNAUTHENTICATED: "yes" } });
    expect(bad.status).toBe(503);
    expect(((await bad.json()) as { errors: string[] }).errors[0]).toContain("METRICS_UNAUTHENTICATED");
  });
});

describe("request data points (METRICS_DATASET)", () => {
  it("writes one point per request: route family, status class, status, mount type, method; duration and status", async () => {
    const points: AnalyticsEngineDataPoint[] = [];
    const dataset: AnalyticsEngineDataset = { writeDataPoint: (p) => void points.push(p ?? {}) };
    const { path } = await pkiWithRoot();
    await write(`${path}/roles/web`, { allow_any_name: true, key_type: "ec", max_ttl: "24h" });
    const withDataset = { METRICS_DATASET: dataset };

    expect((await call("sys/mounts", { env: withDataset })).status).toBe(200);
    expect((await call(`${path}/issue/web`, { env: withDataset, method: "POST", body: { common_name: "x.example", ttl: "1h" } })).status).toBe(200);
    expect((await call("sys/mounts", { token: null, env: withDataset })).status).toBe(403);
    expect((await call(`${path}/no/such/route`, { env: withDataset })).status).toBe(404);
    expect((await call(`${path}/issue/nobody`, { env: withDataset, method: "POST", body: { common_name: "x.example" } })).status).toBe(400);

    expect(points.map((p) => p.blobs)).toEqual([
      ["sys/mounts", "2xx", "200", "system", "GET"],
      ["pki/issue/:role", "2xx", "200", "pki", "POST"],
      ["sys/mounts", "4xx", "403", "system", "GET"],
      ["pki/?", "4xx", "404", "pki", "GET"],
      ["pki/issue/:role", "4xx", "400", "pki", "POST"],
    ]);
    for (const p of points) {
      expect(p.indexes).toEqual([p.blobs?.[0]]);
      const [duration, status] = p.doubles ?? [];
      expect(duration).toBeGreaterThanOrEqual(0);
      expect(String(status)).toBe(p.blobs?.[2]);
    }
    // Without the binding nothing is written anywhere: the same request, no point added.
    await call("sys/mounts");
    expect(points).toHaveLength(5);
  });

  it("a throwing dataset never fails the request", async () => {
    const dataset: AnalyticsEngineDataset = {
      writeDataPoint: () => {
        throw new Error("dataset gone");
      },
    };
    expect((await call("sys/mounts", { env: { METRICS_DATASET: dataset } })).status).toBe(200);
  });
});
