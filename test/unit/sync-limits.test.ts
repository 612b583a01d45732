/**
 * The rate-limit rules of secrets sync (src/engines/sync/limits/, docs/secrets-sync.md "4. Provider limits are respected") in plain
 * Node: which answers are throttling (and for how long), what each request costs, the gate's
 * decisions (concurrency, sliding windows, per-resource windows, pauses and their doubling), the
 * gate's name, and the default caps against the providers' published limits.
 */
import { describe, expect, it } from "vitest";
import { chargesOf, gateName } from "../../src/engines/sync/limits";
import { GateState, MAX_THROTTLE_MS, MemoryGateStore, PERMIT_TTL_MS, type AcquireArgs } from "../../src/engines/sync/limits/gate-state";
import { throttleOf } from "../../src/engines/sync/limits/throttle";
import type { GatedRequest } from "../../src/engines/sync/limits/types";
import { providerOf } from "../../src/engines/sync/providers/registry";
import type { DestinationRecord } from "../../src/engines/sync/store";

const T0 = 1_800_000_000_000;

const limitsOf = (type: string) => providerOf(type).limits;

function res(status: number, headers: Record<string, string> = {}, body?: unknown): Response {
  return new Response(body === undefined ? null : JSON.stringify(body), { status, headers });
}

function req(method: string, url: string, headers: Record<string, string> = {}): GatedRequest {
  return { method, url: new URL(url), headers: new Headers(headers) };
}

describe("throttleOf: which answers ask to slow down", () => {
  it("429 with Retry-After (seconds or a date) states the wait", async () => {
    expect(await throttleOf(limitsOf("cloudtwo-kv"), res(429, { "retry-after": "7" }), T0)).toEqual({ waitMs: 7000, stated: true });
    const date = new Date(T0 + 30_000).toUTCString();
    expect(await throttleOf(limitsOf("webhost-project"), res(429, { "retry-after": date }), T0)).toEqual({ waitMs: 30_000, stated: true });
    expect(await throttleOf(limitsOf("webhost-project"), res(429, { "x-ratelimit-reset": String(T0 / 1000 + 12) }), T0)).toEqual({ waitMs: 12_000, stated: true });
    expect(await throttleOf(limitsOf("cloudtwo-kv"), res(429), T0)).toEqual({ waitMs: 0, stated: false });
  });

  it("the repository host: 403 with retry-after or x-ratelimit-remaining 0 is a rate limit, a plain 403 a permission error", async () => {
    expect(await throttleOf(limitsOf("repohost"), res(403, { "retry-after": "60" }), T0)).toEqual({ waitMs: 60_000, stated: true });
    expect(await throttleOf(limitsOf("repohost"), res(403, { "x-ratelimit-remaining": "0", "x-ratelimit-reset": String(T0 / 1000 + 90) }), T0)).toEqual({ waitMs: 90_000, stated: true });
    expect(await throttleOf(limitsOf("repohost"), res(403, { "x-ratelimit-remaining": "17" }, { message: "Resource not accessible by integration" }), T0)).toBeNull();
    expect(await throttleOf(limitsOf("repohost"), res(429, { "retry-after": "3" }), T0)).toEqual({ waitMs: 3000, stated: true });
    // Any answer that used up the quota pauses until the reset, before the next request is refused.
    expect(await throttleOf(limitsOf("repohost"), res(200, { "x-ratelimit-remaining": "0", "x-ratelimit-reset": String(T0 / 1000 + 5) }), T0)).toEqual({ waitMs: 5000, stated: true });
    expect(await throttleOf(limitsOf("repohost"), res(200, { "x-ratelimit-remaining": "4999" }), T0)).toBeNull();
  });

  it("AWS: ThrottlingException on a 400 (body or x-amzn-errortype), no stated wait; other 400s are not throttling", async () => {
    const throttling = res(400, { "content-type": "application/x-amz-json-1.1" }, { __type: "com.amazonaws#ThrottlingException", message: "Rate exceeded" });
    expect(await throttleOf(limitsOf("cloudone-sm"), throttling, T0)).toEqual({ waitMs: 0, stated: false });
    // The body is read from a copy: the connector still reads the error afterwards.
    expect(((await throttling.json()) as { message: string }).message).toBe("Rate exceeded");
    expect(await throttleOf(limitsOf("cloudone-sm"), res(400, { "x-amzn-errortype": "ThrottlingException:http://internal" }), T0)).toEqual({ waitMs: 0, stated: false });
    expect(await throttleOf(limitsOf("cloudone-sm"), res(400, {}, { __type: "ValidationException", message: "bad name" }), T0)).toBeNull();
    expect(await throttleOf(limitsOf("cloudone-sm"), res(400, {}, { __type: "LimitExceededException", message: "too many versions" }), T0)).toBeNull();
  });

  it("Google: RESOURCE_EXHAUSTED with a RetryInfo delay states it", async () => {
    const body = { error: { code: 429, status: "RESOURCE_EXHAUSTED", message: "Quota exceeded", details: [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "2.5s" }] } };
    expect(await throttleOf(limitsOf("cloudthree-sm"), res(429, {}, body), T0)).toEqual({ waitMs: 2500, stated: true });
    expect(await throttleOf(limitsOf("cloudthree-sm"), res(429, {}, { error: { code: 429, status: "RESOURCE_EXHAUSTED" } }), T0)).toEqual({ waitMs: 0, stated: false });
    expect(await throttleOf(limitsOf("cloudthree-sm"), res(403, {}, { error: { status: "PERMISSION_DENIED" } }), T0)).toBeNull();
  });
});

describe("chargesOf: what a request costs", () => {
  it("AWS: reads and writes count in separate budgets", () => {
    const l = limitsOf("cloudone-sm");
    const put = chargesOf(l, req("POST", "https://secretsmanager.us-east-1.amazonaws.com/", { "x-amz-target": "secretsmanager.PutSecretValue" }));
    const get = chargesOf(l, req("POST", "https://secretsmanager.us-east-1.amazonaws.com/", { "x-amz-target": "secretsmanager.GetSecretValue" }));
    expect(put.map((c) => c.key)).toEqual(["writes"]);
    expect(get.map((c) => c.key)).toEqual(["reads"]);
  });

  it("the repository host: GET costs 1 point, writes 5, every request 1 of the hour", () => {
    const l = limitsOf("repohost");
    const get = chargesOf(l, req("GET", "https://api.github.com/repos/o/r/actions/secrets/public-key"));
    const put = chargesOf(l, req("PUT", "https://api.github.com/repos/o/r/actions/secrets/X"));
    expect(get.map((c) => [c.key, c.cost])).toEqual([["points", 1], ["hour", 1]]);
    expect(put.map((c) => [c.key, c.cost])).toEqual([["points", 5], ["hour", 1]]);
  });

  it("Google: AddSecretVersion is also counted per secret; accesses in their own budget", () => {
    const l = limitsOf("cloudthree-sm");
    const add = chargesOf(l, req("POST", "https://secretmanager.googleapis.com/v1/projects/p/secrets/a:addVersion"));
    expect(add.filter((c) => c.resource).map((c) => c.key)).toEqual(["version-s\u0000/v1/projects/p/secrets/a", "version-min\u0000/v1/projects/p/secrets/a"]);
    expect(add.filter((c) => !c.resource).map((c) => c.key)).toEqual(["writes"]);
    const access = chargesOf(l, req("GET", "https://secretmanager.googleapis.com/v1/projects/p/secrets/a/versions/latest:access"));
    expect(access.map((c) => c.key)).toEqual(["access"]);
  });
});

const args = (over: Partial<AcquireArgs> = {}): AcquireArgs => ({
  concurrency: 2,
  charges: [{ key: "w", budget: 3, windowMs: 1000, cost: 1, resource: false }],
  maxWaitMs: 15_000,
  ...over,
});

describe("GateState", () => {
  it("caps requests in flight; a release or an expired permit frees a slot", () => {
    const g = new GateState(new MemoryGateStore());
    const a = g.grant(args(), T0);
    g.grant(args(), T0);
    expect(g.check(args({ charges: [] }), T0)).toMatchObject({ ok: false, reason: "busy" });
    g.release({ permit: a, throttle: null, throttleMs: 1000 }, T0 + 5);
    expect(g.check(args({ charges: [] }), T0 + 5)).toEqual({ ok: true });
    g.grant(args({ charges: [] }), T0 + 5);
    // A caller that never released (it crashed) holds its slot only until the permit expires.
    expect(g.check(args({ charges: [] }), T0 + PERMIT_TTL_MS + 1)).toEqual({ ok: true });
  });

  it("a sliding window: the budget frees when the oldest entries leave it, not at a boundary", () => {
    const g = new GateState(new MemoryGateStore());
    const wide = args({ concurrency: 100 });
    g.grant(wide, T0);
    g.grant(wide, T0 + 400);
    g.grant(wide, T0 + 800);
    expect(g.check(wide, T0 + 999)).toEqual({ ok: false, at: T0 + 1000, reason: "budget" });
    expect(g.check(wide, T0 + 1000)).toEqual({ ok: true });
    g.grant(wide, T0 + 1000);
    expect(g.check(wide, T0 + 1200)).toEqual({ ok: false, at: T0 + 1400, reason: "budget" });
    // A request costing 2 waits until two entries have left.
    expect(g.check(args({ concurrency: 100, charges: [{ key: "w", budget: 3, windowMs: 1000, cost: 2, resource: false }] }), T0 + 1200)).toEqual({
      ok: false,
      at: T0 + 1800,
      reason: "budget",
    });
  });

  it("a per-resource window holds only that resource", () => {
    const g = new GateState(new MemoryGateStore());
    const secret = (id: string): AcquireArgs => args({ concurrency: 100, charges: [{ key: `v\u0000${id}`, budget: 1, windowMs: 1000, cost: 1, resource: true }] });
    g.grant(secret("a"), T0);
    expect(g.check(secret("a"), T0 + 10)).toEqual({ ok: false, at: T0 + 1000, reason: "resource" });
    expect(g.check(secret("b"), T0 + 10)).toEqual({ ok: true });
  });

  it("a throttling answer pauses everything: for the stated time, else the type's pause doubling in a row (capped)", () => {
    const g = new GateState(new MemoryGateStore());
    const p = g.grant(args(), T0);
    expect(g.release({ permit: p, throttle: { waitMs: 3000, stated: true }, throttleMs: 2000 }, T0 + 10)).toBe(T0 + 3010);
    expect(g.check(args({ charges: [] }), T0 + 3000)).toEqual({ ok: false, at: T0 + 3010, reason: "paused" });
    expect(g.check(args({ charges: [] }), T0 + 3010)).toEqual({ ok: true });
    let now = T0 + 4000;
    const waits: number[] = [];
    for (let i = 0; i < 10; i++) {
      const q = g.grant(args({ charges: [] }), now);
      const until = g.release({ permit: q, throttle: { waitMs: 0, stated: false }, throttleMs: 2000 }, now);
      waits.push(until - now);
      now = until;
    }
    expect(waits.slice(0, 4)).toEqual([4000, 8000, 16_000, 32_000]);
    expect(Math.max(...waits)).toBe(MAX_THROTTLE_MS);
    // A normal answer ends the run: the next unstated throttle pauses for the base time again.
    g.release({ permit: g.grant(args({ charges: [] }), now), throttle: null, throttleMs: 2000 }, now);
    expect(g.release({ permit: g.grant(args({ charges: [] }), now), throttle: { waitMs: 0, stated: false }, throttleMs: 2000 }, now) - now).toBe(2000);
  });

  it("restarted (the Durable Object evicted), a gate keeps its pause and its long windows; short windows were in memory only", () => {
    const store = new MemoryGateStore();
    const both = args({
      concurrency: 100,
      charges: [
        { key: "short", budget: 1, windowMs: 1000, cost: 1, resource: false },
        { key: "long", budget: 2, windowMs: 60_000, cost: 1, resource: false },
      ],
    });
    const g = new GateState(store);
    g.release({ permit: g.grant(both, T0), throttle: { waitMs: 5000, stated: true }, throttleMs: 1000 }, T0);
    const restarted = new GateState(store);
    expect(restarted.check(both, T0 + 10)).toEqual({ ok: false, at: T0 + 5000, reason: "paused" });
    // After the pause: the short window is empty again (it would have been anyway), the long one remembers.
    expect(restarted.check(both, T0 + 5000)).toEqual({ ok: true });
    restarted.grant(both, T0 + 5000);
    expect(new GateState(store).check(both, T0 + 7000)).toEqual({ ok: false, at: T0 + 60_000, reason: "budget" });
  });

  it("a pause never shortens one in force", () => {
    const g = new GateState(new MemoryGateStore());
    g.release({ permit: "x", throttle: { waitMs: 60_000, stated: true }, throttleMs: 1000 }, T0);
    expect(g.release({ permit: "y", throttle: { waitMs: 1000, stated: true }, throttleMs: 1000 }, T0 + 10)).toBe(T0 + 60_000);
  });
});

describe("gateName", () => {
  const dest = (type: DestinationRecord["type"], connection: Record<string, string>): DestinationRecord => ({
    namespaceId: "root",
    type,
    name: "d",
    connection,
    options: { granularity: "secret-path", secretNameTemplate: "", customTags: {}, driftRepair: true },
    purgeInitiatedAt: null,
    purgeError: null,
    version: 1,
    createdAt: 0,
    updatedAt: 0,
  });

  it("destinations sharing the provider's limit scope share a gate; the name carries no secret", async () => {
    const a = await gateName(limitsOf("repohost"), dest("repohost", { access_token: "ghp_secret_token_1", repository_owner: "o", repository_name: "a" }));
    const b = await gateName(limitsOf("repohost"), { ...dest("repohost", { access_token: "ghp_secret_token_1", repository_owner: "o", repository_name: "b" }), name: "other" });
    const c = await gateName(limitsOf("repohost"), dest("repohost", { access_token: "ghp_secret_token_2", repository_owner: "o", repository_name: "a" }));
    expect(a).toBe(b);
    expect(a).not.toBe(c);
    expect(a).toMatch(/^repohost:[0-9a-f]{64}$/);
    expect(a).not.toContain("ghp_secret");
    const east = await gateName(limitsOf("cloudone-sm"), dest("cloudone-sm", { access_key_id: "AKIA1", region: "us-east-1" }));
    const west = await gateName(limitsOf("cloudone-sm"), dest("cloudone-sm", { access_key_id: "AKIA1", region: "us-west-2" }));
    const dflt = await gateName(limitsOf("cloudone-sm"), dest("cloudone-sm", { access_key_id: "AKIA1" }));
    expect(east).not.toBe(west);
    expect(dflt).toBe(east);
    const vault = await gateName(limitsOf("cloudtwo-kv"), dest("cloudtwo-kv", { key_vault_uri: "https://KV1.vault.azure.net/" }));
    expect(await gateName(limitsOf("cloudtwo-kv"), dest("cloudtwo-kv", { key_vault_uri: "https://kv1.vault.azure.net" }))).toBe(vault);
    const project = await gateName(limitsOf("cloudthree-sm"), dest("cloudthree-sm", { credentials: JSON.stringify({ project_id: "p1" }) }));
    expect(await gateName(limitsOf("cloudthree-sm"), dest("cloudthree-sm", { credentials: "{}", project_id: "p1" }))).toBe(project);
  });
});

describe("the default caps stay below the published limits", () => {
  const budget = (type: string, id: string) => {
    const w = limitsOf(type).windows.find((x) => x.id === id);
    if (!w) throw new Error(`${type} has no window ${id}`);
    return (w.budget * 1000) / w.windowMs;
  };
  it.each([
    ["repohost concurrency", limitsOf("repohost").concurrency, 100],
    ["repohost points/s", budget("repohost", "points"), 900 / 60],
    ["repohost requests/s", budget("repohost", "hour"), 5000 / 3600],
    ["cloudone-sm writes/s", budget("cloudone-sm", "writes"), 50],
    ["cloudone-sm reads/s", budget("cloudone-sm", "reads"), 10_000],
    ["cloudtwo-kv requests/s", budget("cloudtwo-kv", "all"), 4000 / 10],
    ["cloudthree-sm writes/s", budget("cloudthree-sm", "writes"), 600 / 60],
    ["cloudthree-sm AddSecretVersion/s per secret", budget("cloudthree-sm", "version-s"), 2],
    ["cloudthree-sm AddSecretVersion/min per secret", budget("cloudthree-sm", "version-min") * 60, 120],
    ["webhost-project requests/s", budget("webhost-project", "minute"), 120 / 60],
  ])("%s: %d < %d", (_name, ours, published) => {
    expect(ours).toBeLessThan(published);
  });
});
