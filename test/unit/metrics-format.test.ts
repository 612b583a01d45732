/**
 * The pure parts of metrics (docs/operations.md "Metrics"): the Analytics Engine data point of a
 * request (its layout is what the documented SQL queries read), route families, Vault's JSON form
 * and the Prometheus text rendering (names, special values, empty families). The rendering is
 * also read by the Prometheus project's own parser in test/e2e/metrics-prometheus.test.ts.
 */
import { describe, expect, it } from "vitest";
import { requestDataPoint, routeFamily, statusClass } from "../../src/app/request-metrics";
import { goTimestamp, metricsJson, metricsPrometheus, prometheusName, type GaugeFamily } from "../../src/core/metrics";

describe("request data point", () => {
  it("lays out family, status class, status, mount type, method; duration and status; the family as index", () => {
    expect(requestDataPoint({ family: "pki/issue/:role", mountType: "pki", method: "POST", status: 200, durationMs: 12.5 })).toEqual({
      indexes: ["pki/issue/:role"],
      blobs: ["pki/issue/:role", "2xx", "200", "pki", "POST"],
      doubles: [12.5, 200],
    });
  });

  it("cuts the index to Analytics Engine's 96 bytes without splitting a character", () => {
    const family = `kv/${"é".repeat(60)}`;
    const [index] = requestDataPoint({ family, mountType: "kv", method: "GET", status: 404, durationMs: 1 }).indexes ?? [];
    expect(new TextEncoder().encode(String(index)).length).toBeLessThanOrEqual(96);
    expect(family.startsWith(String(index))).toBe(true);
  });

  it("names route families by backend and pattern, never by path", () => {
    expect(routeFamily("system", "mounts/*path")).toBe("sys/mounts/*path");
    expect(routeFamily("token", "create")).toBe("auth/token/create");
    expect(routeFamily("kv", undefined)).toBe("kv/?");
    expect(routeFamily(undefined, undefined)).toBe("?/?");
    expect([statusClass(204), statusClass(403), statusClass(503)]).toEqual(["2xx", "4xx", "5xx"]);
  });
});

describe("renderings", () => {
  const families: GaugeFamily[] = [
    { name: "lanyard.pki.certificates", help: "Certificates.", samples: [{ labels: { mount: "pki/", expiry: "lt_7d" }, value: 3 }] },
    { name: "lanyard.empty", help: "Nothing yet.", samples: [] },
    { name: "lanyard.odd-name", help: "Special values.", samples: [{ labels: {}, value: Number.NaN }, { labels: { s: "inf" }, value: Infinity }] },
  ];

  it("Prometheus: HELP and TYPE for every family (an empty one too), dots to underscores, Go's special values", () => {
    expect(metricsPrometheus(families)).toBe(
      [
        "# HELP lanyard_pki_certificates Certificates.",
        "# TYPE lanyard_pki_certificates gauge",
        'lanyard_pki_certificates{mount="pki/",expiry="lt_7d"} 3',
        "# HELP lanyard_empty Nothing yet.",
        "# TYPE lanyard_empty gauge",
        "# HELP lanyard_odd_name Special values.",
        "# TYPE lanyard_odd_name gauge",
        "lanyard_odd_name NaN",
        'lanyard_odd_name{s="inf"} +Inf',
        "",
      ].join("\n"),
    );
    expect(prometheusName("9lives.x")).toBe("_lives_x");
  });

  it("JSON: Vault's shape, go-metrics' timestamp, one gauge per sample", () => {
    const at = Date.parse("2026-11-28T10:20:30.400Z");
    expect(goTimestamp(at)).toBe("2026-11-28 10:20:30 +0000 UTC");
    expect(metricsJson(families.slice(0, 2), at)).toEqual({
      Timestamp: "2026-11-28 10:20:30 +0000 UTC",
      Gauges: [{ Name: "lanyard.pki.certificates", Value: 3, Labels: { mount: "pki/", expiry: "lt_7d" } }],
      Points: [],
      Counters: [],
      Samples: [],
    });
  });
});
