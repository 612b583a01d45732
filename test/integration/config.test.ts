import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app/app";

async function call(overrides: Partial<Env>, path = "sys/mounts") {
  const ctx = createExecutionContext();
  const res = await app.fetch(
    new Request(`http://x/v1/${path}`, { headers: { "x-service-token": overrides.ROOT_TOKEN ?? "" } }),
    { ...env, ...overrides },
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return res;
}

describe("production configuration", () => {
  const good = { ENVIRONMENT: "production", ROOT_TOKEN: "a-long-enough-root-token", SEAL_KEY: env.SEAL_KEY };

  it("serves with a valid ROOT_TOKEN and SEAL_KEY", async () => {
    expect((await call(good)).status).toBe(200);
  });

  it.each([
    [{ ROOT_TOKEN: "short" }, "ROOT_TOKEN"],
    [{ ROOT_TOKEN: undefined }, "ROOT_TOKEN"],
    [{ SEAL_KEY: "c2hvcnQ=" }, "SEAL_KEY"],
    [{ SEAL_KEY: undefined }, "SEAL_KEY"],
  ])("refuses to serve with %j (503 naming the setting)", async (bad, name) => {
    const res = await call({ ...good, ...bad });
    expect(res.status).toBe(503);
    const body = (await res.json()) as { errors: string[] };
    expect(body.errors[0]).toContain(name);
    const health = await call({ ...good, ...bad }, "sys/health");
    expect(health.status).toBe(503);
  });

  it.each(["CLOUDONE_ENDPOINT", "CLOUDTWO_ENDPOINT", "CLOUDTHREE_ENDPOINT", "REPOHOST_ENDPOINT", "WEBHOST_ENDPOINT", "NEWCLOUD_ENDPOINT"])(
    "refuses to serve with the development endpoint override %s set (503 naming it; any *_ENDPOINT, so a new provider's too)",
    async (name) => {
      const bad = { ...good, [name]: "http://127.0.0.1:9999" };
      for (const path of ["sys/mounts", "sys/health"]) {
        const res = await call(bad, path);
        expect(res.status).toBe(503);
        const text = await res.text();
        expect(text).toContain(name);
        expect(text).not.toContain("127.0.0.1:9999");
      }
    },
  );

  it("a blank endpoint override counts as unset; development takes overrides", async () => {
    expect((await call({ ...good, CLOUDONE_ENDPOINT: "  " })).status).toBe(200);
    expect((await call({ ...good, ENVIRONMENT: "development", CLOUDONE_ENDPOINT: "http://127.0.0.1:9999" })).status).toBe(200);
  });

  it("never echoes the configured secrets", async () => {
    const res = await call({ ...good, ROOT_TOKEN: "short" });
    expect(await res.text()).not.toContain("short\"");
  });
});
