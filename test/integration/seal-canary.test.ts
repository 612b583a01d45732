/**
 * The seal check (src/core/db/seal-canary.ts): the service is sealed unless SEAL_KEY, or one of
 * SEAL_KEYS_PREVIOUS, opens this database's data. Sealed: sys/health 503 `sealed: true` (its
 * query parameters still apply), sys/seal-status `sealed: true`, every other request 503 saying
 * why, never a 500, and nothing written. Vault's behaviour:
 * https://developer.hashicorp.com/vault/api-docs/system/health and /system/seal-status.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { app } from "../../src/app/app";
import { runScheduled } from "../../src/app/cron";
import { forgetSealVerdict, RECHECK_MS, sealProblem } from "../../src/core/db/seal-canary";

const ROOT = "a-long-enough-root-token";
const KEY_A = env.SEAL_KEY as string;
const KEY_B = btoa(String.fromCharCode(...Array.from({ length: 32 }, (_, i) => 200 - i)));
const KEY_C = btoa(String.fromCharCode(...Array.from({ length: 32 }, (_, i) => 7 * i)));
const prod = { ENVIRONMENT: "production", ROOT_TOKEN: ROOT };

interface Answer {
  status: number;
  body: Record<string, unknown> & { errors?: string[] };
  text: string;
}

async function call(overrides: Partial<Env>, method: string, path: string, body?: unknown): Promise<Answer> {
  const ctx = createExecutionContext();
  const res = await app.fetch(
    new Request(`http://x/v1/${path}`, {
      method,
      headers: { "x-service-token": ROOT, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    }),
    { ...env, ...prod, ...overrides },
    ctx,
  );
  await waitOnExecutionContext(ctx);
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Answer["body"]) : {}, text };
}

const count = async (table: string) => (await env.DB.prepare(`SELECT count(*) AS n FROM ${table}`).first<{ n: number }>())?.n ?? 0;
const canary = async () => (await env.DB.prepare("SELECT sealed FROM seal_canary WHERE id = 1").first<{ sealed: string }>())?.sealed ?? null;
const kidOf = (sealed: string | null) => sealed?.split(":")[1];

/** Every way a sealed service must answer, and that nothing was written. */
async function expectSealed(keys: Partial<Env>, why: string) {
  const before = { policies: await count("policies"), versions: await count("kv_versions"), canary: await canary() };
  const health = await call(keys, "GET", "sys/health");
  expect(health.status).toBe(503);
  expect(health.body).toMatchObject({ initialized: true, sealed: true });
  expect(String(health.body.error)).toContain(why);
  // Vault's query parameters still apply while sealed.
  expect((await call(keys, "GET", "sys/health?sealedcode=299")).status).toBe(299);
  const status = await call(keys, "GET", "sys/seal-status");
  expect(status.status).toBe(200);
  expect(status.body).toMatchObject({ sealed: true, initialized: true });
  for (const [method, path, body] of [
    ["GET", "kv/data/app", undefined],
    ["POST", "kv/data/app", { data: { password: "while-sealed" } }],
    ["POST", "sys/policies/acl/sealed-write", { policy: 'path "x" { capabilities = ["read"] }' }],
    ["GET", "sys/mounts", undefined],
  ] as const) {
    const r = await call(keys, method, path, body);
    expect(r.status, `${method} ${path}: ${r.text}`).toBe(503);
    expect(r.body.errors?.[0]).toContain("service is sealed");
    expect(r.body.errors?.[0]).toContain(why);
  }
  expect(await count("policies")).toBe(before.policies);
  expect(await count("kv_versions")).toBe(before.versions);
  expect(await canary()).toBe(before.canary);
  // The keys themselves never appear in an answer.
  for (const k of [KEY_A, KEY_B, KEY_C]) expect(health.text + status.text).not.toContain(k);
}

describe("the seal check", () => {
  it("first start writes the canary with SEAL_KEY and serves", async () => {
    expect(await canary()).toBeNull();
    expect((await call({ SEAL_KEY: KEY_A }, "POST", "sys/mounts/kv", { type: "kv", options: { version: "2" } })).status).toBe(204);
    expect((await call({ SEAL_KEY: KEY_A }, "POST", "kv/data/app", { data: { password: "under-a" } })).status).toBe(200);
    const health = await call({ SEAL_KEY: KEY_A }, "GET", "sys/health");
    expect(health.status).toBe(200);
    expect(health.body.sealed).toBe(false);
    expect((await call({ SEAL_KEY: KEY_A }, "GET", "sys/seal-status")).body.sealed).toBe(false);
    expect(await canary()).toMatch(/^v1:[0-9a-f]{8}:/);
  });

  it("a wrong key is sealed: 503 saying so, never a 500, nothing written", async () => {
    await expectSealed({ SEAL_KEY: KEY_B }, "no configured key");
  });

  it("a missing key is sealed, and says the key is missing", async () => {
    await expectSealed({ SEAL_KEY: undefined }, "SEAL_KEY is not set");
    await expectSealed({ SEAL_KEY: "" }, "SEAL_KEY is not set");
  });

  it("a rotation without SEAL_KEYS_PREVIOUS is sealed", async () => {
    await expectSealed({ SEAL_KEY: KEY_B, SEAL_KEYS_PREVIOUS: KEY_C }, "no configured key");
  });

  it("a malformed SEAL_KEYS_PREVIOUS entry is sealed, naming it", async () => {
    await expectSealed({ SEAL_KEY: KEY_A, SEAL_KEYS_PREVIOUS: `${KEY_C},not-a-key` }, "SEAL_KEYS_PREVIOUS entry 2");
  });

  it("the scheduled jobs do nothing while sealed", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      const controller = { cron: "* * * * *", scheduledTime: Date.now(), noRetry: () => undefined } as ScheduledController;
      await runScheduled(controller, { ...env, ...prod, SEAL_KEY: KEY_B });
      expect(logged.mock.calls.map((c) => String(c[0])).join("\n")).toContain("scheduled jobs skipped: service is sealed");
    } finally {
      logged.mockRestore();
    }
  });

  it("a rotation with SEAL_KEYS_PREVIOUS serves, reads old data and re-seals the canary with the new key", async () => {
    const rotated = { SEAL_KEY: KEY_B, SEAL_KEYS_PREVIOUS: KEY_A };
    const before = kidOf(await canary());
    const r = await call(rotated, "GET", "kv/data/app");
    expect(r.status, r.text).toBe(200);
    expect((r.body.data as { data: unknown }).data).toEqual({ password: "under-a" });
    expect((await call(rotated, "GET", "sys/health")).status).toBe(200);
    const after = kidOf(await canary());
    expect(after).not.toBe(before);
    expect((await call(rotated, "POST", "kv/data/app", { data: { password: "under-b" } })).status).toBe(200);
    const newest = await env.DB.prepare("SELECT sealed_data AS s FROM kv_versions ORDER BY version DESC LIMIT 1").first<{ s: string }>();
    expect(kidOf(newest?.s ?? null)).toBe(after);
  });

  it("dropping the old key while rows sealed by it remain is sealed", async () => {
    // The canary now opens with KEY_B, but the first KV version is still sealed by KEY_A.
    await expectSealed({ SEAL_KEY: KEY_B }, "no configured key");
    expect((await call({ SEAL_KEY: KEY_B, SEAL_KEYS_PREVIOUS: KEY_A }, "GET", "kv/data/app?version=1")).status).toBe(200);
  });

  it("a database sealed before the canary existed is checked against its data (an upgrade with the wrong key)", async () => {
    await env.DB.prepare("DELETE FROM seal_canary").run();
    forgetSealVerdict();
    await expectSealed({ SEAL_KEY: KEY_C }, "no configured key");
    expect(await canary()).toBeNull();
    expect((await call({ SEAL_KEY: KEY_B, SEAL_KEYS_PREVIOUS: KEY_A }, "GET", "sys/health")).status).toBe(200);
    expect(kidOf(await canary())).toBeDefined();
  });

  it("a sealed verdict is checked again after a few seconds, so a repaired database heals without a restart", async () => {
    await env.DB.prepare("DELETE FROM seal_canary").run();
    await env.DB.prepare("DELETE FROM kv_versions").run();
    forgetSealVerdict();
    const keys = { current: KEY_C };
    await env.DB.prepare("INSERT INTO seal_canary (id, sealed, updated_at) VALUES (1, 'v1:00000000:AAAA', 0)").run();
    const t = Date.now();
    expect(await sealProblem(env.DB, keys, t)).toContain("no configured key");
    await env.DB.prepare("DELETE FROM seal_canary").run();
    // Within the interval the verdict stands (no D1 read); after it the check runs again.
    expect(await sealProblem(env.DB, keys, t + 1000)).toContain("no configured key");
    expect(await sealProblem(env.DB, keys, Date.now() + RECHECK_MS + 1)).toBeNull();
  });
});
