import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app/app";
import { ROOT, api, del, patch, read, tokenWithPolicy, write } from "../helpers/api";
import { uid } from "../helpers/sync-bodies";

/** Calls the app with Worker variables overridden (ADMIN_NAMESPACE). */
async function callWith(vars: Partial<Env>, method: string, path: string, opts: { namespace?: string; body?: unknown } = {}) {
  const ctx = createExecutionContext();
  const headers: Record<string, string> = { "x-service-token": ROOT };
  if (opts.namespace) headers["x-service-namespace"] = opts.namespace;
  if (opts.body !== undefined) headers["content-type"] = "application/merge-patch+json";
  const res = await app.fetch(
    new Request(`http://x/v1/${path}`, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) }),
    { ...env, ...vars },
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return res;
}

describe("sys/sync/config", () => {
  it("reads the defaults in the system envelope", async () => {
    await del("sys/sync/config");
    const r = await read("sys/sync/config");
    expect(r.body).toMatchObject({ lease_id: "", renewable: false, lease_duration: 0, mount_type: "system", wrap_info: null, auth: null });
    expect(r.body.data).toEqual({ disabled: false, queue_capacity: 1000000, reconcile_interval: "1h0m0s" });
  });

  it("patches one field at a time, and DELETE resets", async () => {
    const a = await patch("sys/sync/config", { disabled: true });
    expect(a.body.data).toEqual({ disabled: true, queue_capacity: 1000000, reconcile_interval: "1h0m0s" });
    expect(a.body.mount_type).toBe("system");
    const b = await patch("sys/sync/config", { queue_capacity: "500" });
    expect(b.body.data).toEqual({ disabled: true, queue_capacity: 500, reconcile_interval: "1h0m0s" });
    expect((await read("sys/sync/config")).body.data).toEqual({ disabled: true, queue_capacity: 500, reconcile_interval: "1h0m0s" });
    const c = await patch("sys/sync/config", { disabled: null });
    expect(c.body.data).toEqual({ disabled: false, queue_capacity: 500, reconcile_interval: "1h0m0s" });
    // reconcile_interval (docs/secrets-sync.md "What Lanyard guarantees at the destination"): a duration, 0 turns drift reconciliation off, null resets.
    expect((await patch("sys/sync/config", { reconcile_interval: "30m" })).body.data.reconcile_interval).toBe("30m0s");
    expect((await patch("sys/sync/config", { reconcile_interval: 0 })).body.data.reconcile_interval).toBe("0s");
    expect((await patch("sys/sync/config", { reconcile_interval: "soon" }, {}, 400)).body.errors[0]).toMatch(/reconcile_interval/);
    expect((await patch("sys/sync/config", { reconcile_interval: null })).body.data.reconcile_interval).toBe("1h0m0s");
    await del("sys/sync/config");
    expect((await read("sys/sync/config")).body.data).toEqual({ disabled: false, queue_capacity: 1000000, reconcile_interval: "1h0m0s" });
  });

  it("refuses bad values naming the field and stores nothing", async () => {
    await del("sys/sync/config");
    const r = await patch("sys/sync/config", { disabled: true, queue_capacity: 0 }, {}, 400);
    expect(r.body.errors[0]).toContain("queue_capacity");
    const s = await patch("sys/sync/config", { disabled: "maybe" }, {}, 400);
    expect(s.body.errors[0]).toContain('"disabled"');
    const t = await patch("sys/sync/config", { queue_capacity: "lots" }, {}, 400);
    expect(t.body.errors[0]).toContain('"queue_capacity"');
    for (const bad of [1e20, "1e20", -5, "-5", 2 ** 53, "9007199254740993"]) {
      const u = await patch("sys/sync/config", { disabled: true, queue_capacity: bad }, {}, 400);
      expect(u.body.errors[0], String(bad)).toContain("queue_capacity");
    }
    expect((await patch("sys/sync/config", { queue_capacity: Number.MAX_SAFE_INTEGER })).body.data.queue_capacity).toBe(Number.MAX_SAFE_INTEGER);
    await del("sys/sync/config");
    expect((await read("sys/sync/config")).body.data).toEqual({ disabled: false, queue_capacity: 1000000, reconcile_interval: "1h0m0s" });
  });

  it("warns about unknown fields and needs the merge-patch content type", async () => {
    const r = await patch("sys/sync/config", { queue_capacity: 7, colour: "red" });
    expect(r.body.warnings).toEqual(["Endpoint ignored these unrecognized parameters: [colour]"]);
    expect((await api("PATCH", "sys/sync/config", { body: { disabled: true }, contentType: "application/json" })).status).toBe(415);
    await del("sys/sync/config");
  });

  it("has no POST (the spec shows PATCH only)", async () => {
    expect((await api("POST", "sys/sync/config", { body: { disabled: true } })).status).toBe(405);
  });

  it("is refused (403) from a namespace that is not the root or the administrative one", async () => {
    const ns = `ns${uid()}`;
    await write(`sys/namespaces/${ns}`);
    expect((await api("GET", "sys/sync/config", { namespace: ns })).status).toBe(403);
    expect((await api("GET", `${ns}/sys/sync/config`)).status).toBe(403);
    expect((await api("PATCH", "sys/sync/config", { namespace: ns, body: { disabled: true } })).status).toBe(403);
    expect((await api("DELETE", "sys/sync/config", { namespace: ns })).status).toBe(403);
    expect((await read("sys/sync/config")).body.data.disabled).toBe(false);
  });

  it("is allowed from the administrative namespace (ADMIN_NAMESPACE), and only from there", async () => {
    const admin = `adm${uid()}`;
    const other = `oth${uid()}`;
    await write(`sys/namespaces/${admin}`);
    await write(`sys/namespaces/${other}`);
    await write("sys/namespaces/child", {}, { namespace: admin });
    const vars = { ADMIN_NAMESPACE: admin } as Partial<Env>;
    const ok = await callWith(vars, "PATCH", "sys/sync/config", { namespace: admin, body: { queue_capacity: 42, reconcile_interval: "1h0m0s" } });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { data: unknown }).data).toEqual({ disabled: false, queue_capacity: 42, reconcile_interval: "1h0m0s" });
    expect((await callWith(vars, "GET", "sys/sync/config", { namespace: other })).status).toBe(403);
    expect((await callWith(vars, "GET", "sys/sync/config", { namespace: `${admin}/child` })).status).toBe(403);
    expect((await callWith(vars, "GET", "sys/sync/config")).status).toBe(200);
    // Without ADMIN_NAMESPACE the same namespace is refused.
    expect((await api("GET", "sys/sync/config", { namespace: admin })).status).toBe(403);
    await del("sys/sync/config");
  });

  it("applies the read, patch and delete capabilities (Vault docs: secrets sync policies)", async () => {
    const reader = await tokenWithPolicy('path "sys/sync/config" { capabilities = ["read"] }');
    expect((await api("GET", "sys/sync/config", { token: reader })).status).toBe(200);
    expect((await api("PATCH", "sys/sync/config", { token: reader, body: { disabled: true } })).status).toBe(403);
    expect((await api("DELETE", "sys/sync/config", { token: reader })).status).toBe(403);
    const updater = await tokenWithPolicy('path "sys/sync/config" { capabilities = ["update"] }');
    expect((await api("PATCH", "sys/sync/config", { token: updater, body: { disabled: true } })).status).toBe(403);
    const patcher = await tokenWithPolicy('path "sys/sync/config" { capabilities = ["patch", "delete"] }');
    expect((await api("PATCH", "sys/sync/config", { token: patcher, body: { queue_capacity: 9 } })).status).toBe(200);
    expect((await api("GET", "sys/sync/config", { token: patcher })).status).toBe(403);
    expect((await api("DELETE", "sys/sync/config", { token: patcher })).status).toBe(204);
    expect((await api("GET", "sys/sync/config", { token: null })).status).toBe(403);
  });
});
