/**
 * src/core/read-cache.ts: the staleness bound, CACHE_TTL_MS = 0 (off), invalidation by area,
 * the generation rule (a read an invalidation overtook is not kept) and the size bound of the
 * BoundedCache under it (src/core/bounded-cache.ts); config.ts refuses a bad value.
 */
import { afterEach, describe, expect, it } from "vitest";
import { configProblem } from "../../src/core/config";
import { BoundedCache } from "../../src/core/bounded-cache";
import { cacheTtl, configureCaches, generationOf, invalidate, parseCacheTtl, ReadCache } from "../../src/core/read-cache";

const env = (ttl?: string) => ({ ENVIRONMENT: "development", ROOT_TOKEN: "x".repeat(20), SEAL_KEY: btoa("k".repeat(32)), CACHE_TTL_MS: ttl }) as unknown as Env;

afterEach(() => configureCaches(undefined));

describe("read caches", () => {
  it("serve a value for less than CACHE_TTL_MS after its read started, then not", () => {
    configureCaches("1000");
    const c = new ReadCache<string>("test.tokens", "tokens", 10);
    c.set("k", "v", 5_000, generationOf("tokens"));
    expect(c.get("k", 5_700)).toBe("v");
    expect(c.get("k", 6_000)).toBeUndefined();
  });

  it("past 3/4 of its life one caller re-reads while the others keep the value", () => {
    configureCaches("1000");
    const c = new ReadCache<string>("test.tokens", "tokens", 10);
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
    const c = new ReadCache<string>("test.policies", "policies", 10);
    c.set("k", "v", Date.now(), generationOf("policies"));
    expect(c.get("k")).toBeUndefined();
  });

  it("invalidate clears its area only", () => {
    configureCaches("1000");
    const a = new ReadCache<string>("test.mounts", "mounts", 10);
    const b = new ReadCache<string>("test.namespaces", "namespaces", 10);
    const now = Date.now();
    a.set("k", "a", now, generationOf("mounts"));
    b.set("k", "b", now, generationOf("namespaces"));
    invalidate("mounts");
    expect(a.get("k", now)).toBeUndefined();
    expect(b.get("k", now)).toBe("b");
  });

  it("a value read before an invalidation is not kept after it", () => {
    configureCaches("1000");
    const c = new ReadCache<string>("test.pki", "pki", 10);
    const before = generationOf("pki");
    invalidate("pki"); // a write lands while the read is in flight
    c.set("k", "stale", Date.now(), before);
    expect(c.get("k")).toBeUndefined();
  });

  it("is bounded: a full cache evicts its oldest entry, not the others", () => {
    configureCaches("1000");
    const c = new ReadCache<number>("test.audit", "audit", 3);
    const now = Date.now();
    for (let i = 0; i < 4; i++) c.set(`k${i}`, i, now, generationOf("audit"));
    expect(c.get("k0", now)).toBeUndefined();
    expect([1, 2, 3].map((i) => c.get(`k${i}`, now))).toEqual([1, 2, 3]);
  });

  it("maxAgeMs keeps the shorter bound, refreshAhead false serves to the end; last() until an invalidation", () => {
    configureCaches("5000");
    const c = new ReadCache<string>("test.audit", "audit", 1, { maxAgeMs: 1000, refreshAhead: false });
    c.set("", "v", 20_000, generationOf("audit"));
    expect(c.get("", 20_800)).toBe("v");
    expect(c.get("", 20_900)).toBe("v");
    expect(c.get("", 21_000)).toBeUndefined();
    expect(c.last("")).toBe("v");
    invalidate("audit");
    expect(c.last("")).toBeUndefined();
  });

  it("a BoundedCache evicts the oldest-stored entries past its count or weight; a set makes a key the newest", () => {
    const c = new BoundedCache<string>("test.bounded", 3, { max: 10, of: (v) => v.length });
    c.set("a", "1234");
    c.set("b", "1234");
    c.set("a", "12"); // a is now the newest
    c.set("c", "1234"); // 2 + 4 + 4 = 10: fits
    expect([c.get("a"), c.get("b"), c.get("c")]).toEqual(["12", "1234", "1234"]);
    c.set("d", "1"); // 4 entries: the oldest (b) goes
    expect(c.get("b")).toBeUndefined();
    c.set("e", "123456789"); // 7 + 9 over 10: a and c go, d stays (1 + 9 = 10)
    expect([c.get("a"), c.get("c"), c.get("d"), c.get("e")]).toEqual([undefined, undefined, "1", "123456789"]);
    expect(c.size).toBe(2);
    // Values, never promises: a cache of promises does not compile.
    const p = new BoundedCache<Promise<string>>("test.promises", 1);
    // @ts-expect-error a promise is not a value this cache may hold
    p.set("k", Promise.resolve("v"));
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
