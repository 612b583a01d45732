/**
 * src/core/read-cache.ts: the staleness bound, CACHE_TTL_MS = 0 (off), invalidation by area and
 * the generation rule (a read an invalidation overtook is not kept); config.ts refuses a bad value.
 */
import { afterEach, describe, expect, it } from "vitest";
import { configProblem } from "../../src/core/config";
import { cacheTtl, configureCaches, generationOf, invalidate, parseCacheTtl, ReadCache } from "../../src/core/read-cache";

const env = (ttl?: string) => ({ ENVIRONMENT: "development", ROOT_TOKEN: "x".repeat(20), SEAL_KEY: btoa("k".repeat(32)), CACHE_TTL_MS: ttl }) as unknown as Env;

afterEach(() => configureCaches(undefined));

describe("read caches", () => {
  it("serve a value for less than CACHE_TTL_MS after its read started, then not", () => {
    configureCaches("1000");
    const c = new ReadCache<string>("tokens", 10);
    c.set("k", "v", 5_000, generationOf("tokens"));
    expect(c.get("k", 5_700)).toBe("v");
    expect(c.get("k", 6_000)).toBeUndefined();
  });

  it("past 3/4 of its life one caller re-reads while the others keep the value", () => {
    configureCaches("1000");
    const c = new ReadCache<string>("tokens", 10);
    c.set("k", "v", 10_000, generationOf("tokens"));
    expect(c.get("k", 10_700)).toBe("v");
    expect(c.get("k", 10_800)).toBeUndefined(); // this caller refreshes
    expect(c.get("k", 10_810)).toBe("v"); // the others do not
    c.set("k", "v2", 10_800, generationOf("tokens"));
    expect(c.get("k", 11_500)).toBe("v2");
    expect(c.get("k", 11_800)).toBeUndefined();
  });

  it("CACHE_TTL_MS = 0 keeps nothing", () => {
    configureCaches("0");
    expect(cacheTtl()).toBe(0);
    const c = new ReadCache<string>("policies", 10);
    c.set("k", "v", Date.now(), generationOf("policies"));
    expect(c.get("k")).toBeUndefined();
  });

  it("invalidate clears its area only", () => {
    configureCaches("1000");
    const a = new ReadCache<string>("mounts", 10);
    const b = new ReadCache<string>("namespaces", 10);
    const now = Date.now();
    a.set("k", "a", now, generationOf("mounts"));
    b.set("k", "b", now, generationOf("namespaces"));
    invalidate("mounts");
    expect(a.get("k", now)).toBeUndefined();
    expect(b.get("k", now)).toBe("b");
  });

  it("a value read before an invalidation is not kept after it", () => {
    configureCaches("1000");
    const c = new ReadCache<string>("pki", 10);
    const before = generationOf("pki");
    invalidate("pki"); // a write lands while the read is in flight
    c.set("k", "stale", Date.now(), before);
    expect(c.get("k")).toBeUndefined();
  });

  it("is bounded: a full cache is cleared whole", () => {
    configureCaches("1000");
    const c = new ReadCache<number>("audit", 3);
    const now = Date.now();
    for (let i = 0; i < 4; i++) c.set(`k${i}`, i, now, generationOf("audit"));
    expect(c.get("k0", now)).toBeUndefined();
    expect(c.get("k3", now)).toBe(3);
  });

  it("CACHE_TTL_MS is a whole number of ms up to 60000; anything else is a 503 naming it", () => {
    expect(parseCacheTtl(undefined)).toBe(1000);
    expect(parseCacheTtl("250")).toBe(250);
    expect(parseCacheTtl("-1")).toBeNull();
    expect(parseCacheTtl("1s")).toBeNull();
    expect(parseCacheTtl("60001")).toBeNull();
    expect(configProblem(env("0"))).toBeNull();
    expect(configProblem(env("soon"))).toContain("CACHE_TTL_MS");
  });
});
