/**
 * sys/metrics?format=prometheus read by an independent parser: the Prometheus project's Python
 * client (Debian's python3-prometheus-client, `text_string_to_metric_families`, driven by
 * ./prometheus_parse.py). Against the e2e Worker, the families, labels and values move as
 * certificates are issued, revoked and expire (a certificate of a 3 s ttl waited out); and the
 * renderer's escaping of label values and help text (backslash, double quote, line feed) is read
 * back exactly.
 *
 * The parser must be importable: a missing python3-prometheus-client fails this file with the
 * install command (CI's .ci/run installs it), it never skips.
 */
import { execFile } from "node:child_process";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { metricsPrometheus } from "../../src/core/metrics";
import { call, ok } from "./client";

interface Family {
  name: string;
  type: string;
  documentation: string;
  samples: { name: string; labels: Record<string, string>; value: number | string }[];
}

const PYTHON = process.env.PROMETHEUS_PYTHON ?? "/usr/bin/python3";

/** Parses `text` with prometheus_client; fails naming the install command when it is missing. */
function parse(text: string): Promise<Family[]> {
  return new Promise((resolve, reject) => {
    const child = execFile(PYTHON, [path.join(import.meta.dirname, "prometheus_parse.py")], { timeout: 30_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) {
        const missing = /No module named 'prometheus_client'/.test(stderr);
        reject(new Error(missing ? "prometheus_client is not installed: apt-get install -y python3-prometheus-client (.ci/run does this in CI)" : `the Prometheus parser refused the text: ${stderr || String(err)}`));
        return;
      }
      resolve(JSON.parse(stdout) as Family[]);
    });
    child.stdin?.end(text);
  });
}

async function scrape(): Promise<Family[]> {
  const r = await call("GET", "sys/metrics?format=prometheus");
  expect(r.status, r.text).toBe(200);
  expect(r.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return parse(r.text);
}

function sampleValue(families: Family[], name: string, labels: Record<string, string>): number {
  const family = families.find((f) => f.name === name);
  const hit = family?.samples.find((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return typeof hit?.value === "number" ? hit.value : 0;
}

/** Scrapes until `done` holds (the Worker answers one computation for up to 10 s), at most 25 s. */
async function scrapeUntil(done: (families: Family[]) => boolean): Promise<Family[]> {
  const deadline = Date.now() + 25_000;
  for (;;) {
    const families = await scrape();
    if (done(families) || Date.now() > deadline) return families;
    await new Promise((r) => setTimeout(r, 1000));
  }
}

describe("sys/metrics in the Prometheus text format, read by prometheus_client", () => {
  it("escapes label values and help text as the format requires", async () => {
    const nasty = 'a "quoted" \\ back\nslash, ünïcode';
    const text = metricsPrometheus([{ name: "lanyard.test.gauge", help: "line one\nline two \\ end", samples: [{ labels: { v: nasty, empty: "" }, value: 1.5 }, { labels: { v: "x" }, value: -3 }] }]);
    const [family] = await parse(text);
    expect(family?.name).toBe("lanyard_test_gauge");
    expect(family?.type).toBe("gauge");
    expect(family?.documentation).toBe("line one\nline two \\ end");
    expect(family?.samples).toEqual([
      { name: "lanyard_test_gauge", labels: { v: nasty, empty: "" }, value: 1.5 },
      { name: "lanyard_test_gauge", labels: { v: "x" }, value: -3 },
    ]);
  });

  it("families, labels and values move as certificates are issued, revoked and expire", async () => {
    const mount = `pki-prom-${crypto.randomUUID().slice(0, 8)}`;
    await ok("POST", `sys/mounts/${mount}`, { type: "pki" }, 204);
    const root = await ok("POST", `${mount}/root/generate/internal`, { common_name: "Prometheus Root", key_type: "ec", issuer_name: "prom-root", not_after: "2035-01-01T00:00:00Z" });
    const issuer = root.body.data.issuer_id as string;
    await ok("POST", `${mount}/roles/web`, { allow_any_name: true, key_type: "ec", max_ttl: "24h" });
    const at = { namespace: "root", mount: `${mount}/`, issuer };
    const a = await ok("POST", `${mount}/issue/web`, { common_name: "a.example", ttl: "1h" });
    await ok("POST", `${mount}/issue/web`, { common_name: "short.example", ttl: "3s" });

    const count = (f: Family[], expiry: string) => sampleValue(f, "lanyard_pki_certificates", { ...at, expiry });
    const before = await scrapeUntil((f) => count(f, "lt_24h") === 2);
    expect(count(before, "lt_24h")).toBe(2);
    expect(count(before, "later")).toBe(1);
    expect(count(before, "expired")).toBe(0);
    for (const name of ["lanyard_pki_certificates", "lanyard_pki_certificates_revoked", "lanyard_pki_issuer_expiry_seconds", "lanyard_pki_crl_age_seconds", "lanyard_token_count", "lanyard_sync_associations", "lanyard_audit_devices"]) {
      const family = before.find((f) => f.name === name);
      expect(family?.type, name).toBe("gauge");
      expect(family?.documentation, name).not.toBe("");
    }
    expect(sampleValue(before, "lanyard_pki_issuer_expiry_seconds", { ...at, issuer_name: "prom-root" })).toBeGreaterThan(8 * 365 * 86_400);

    await ok("POST", `${mount}/revoke`, { serial_number: a.body.data.serial_number });
    await ok("POST", `${mount}/issue/web`, { common_name: "c.example", ttl: "1h" });
    const after = await scrapeUntil((f) => count(f, "expired") === 1 && sampleValue(f, "lanyard_pki_certificates_revoked", at) === 1 && count(f, "lt_24h") === 2);
    expect(count(after, "expired")).toBe(1);
    expect(count(after, "lt_24h")).toBe(2);
    expect(sampleValue(after, "lanyard_pki_certificates_revoked", at)).toBe(1);
    const crl = after.find((f) => f.name === "lanyard_pki_crl_age_seconds")?.samples.find((s) => s.labels.mount === `${mount}/` && s.labels.kind === "complete");
    expect(typeof crl?.value === "number" && crl.value >= 0 && crl.value < 120).toBe(true);
  }, 90_000);
});
