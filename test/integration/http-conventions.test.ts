import { SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, list, mount, read, write } from "../helpers/api";

describe("HTTP conventions", () => {
  it("sys/health answers 200 without a token", async () => {
    const r = await api("GET", "sys/health", { token: null });
    expect(r.status).toBe(200);
    expect(r.body.initialized).toBe(true);
  });

  it("answers 403 without a token, even on a path that does not exist", async () => {
    const r = await api("GET", "nowhere/at/all", { token: null });
    expect(r.status).toBe(403);
    expect(r.body).toEqual({ errors: ["permission denied"] });
    expect((await api("GET", "sys/mounts", { token: "bogus" })).status).toBe(403);
  });

  it("answers 404 for an unknown path with a valid token", async () => {
    const r = await api("GET", "nowhere/at/all");
    expect(r.status).toBe(404);
    expect(Array.isArray(r.body.errors)).toBe(true);
  });

  it("wraps successful answers in the envelope with a request id", async () => {
    const r = await read("sys/mounts");
    expect(r.body).toMatchObject({ lease_id: "", renewable: false, lease_duration: 0, wrap_info: null, auth: null });
    expect(r.body.request_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.headers.get("x-request-id")).toBe(r.body.request_id);
    expect(r.body.warnings).toBeNull();
  });

  it("accepts Authorization: Bearer", async () => {
    const res = await SELF.fetch("http://x/v1/sys/mounts", { headers: { authorization: "Bearer test-root-token-0123456789" } });
    expect(res.status).toBe(200);
  });

  it("accepts Vault's X-Vault-Token, after X-Service-Token and Bearer (docs/http-conventions.md)", async () => {
    const ok = await SELF.fetch("http://x/v1/sys/mounts", { headers: { "x-vault-token": "test-root-token-0123456789" } });
    expect(ok.status).toBe(200);
    // X-Service-Token wins: a wrong one is not rescued by a right X-Vault-Token.
    const first = await SELF.fetch("http://x/v1/sys/mounts", { headers: { "x-service-token": "wrong", "x-vault-token": "test-root-token-0123456789" } });
    expect(first.status).toBe(403);
  });

  it("accepts Vault's X-Vault-Namespace as the namespace header: writes land in that namespace", async () => {
    const ns = `vns-${crypto.randomUUID().slice(0, 8)}`;
    await write(`sys/namespaces/${ns}`, {});
    const headers = { "x-vault-token": "test-root-token-0123456789", "x-vault-namespace": ns, "content-type": "application/json" };
    const res = await SELF.fetch("http://x/v1/sys/mounts/kvx", { method: "POST", headers, body: JSON.stringify({ type: "kv", options: { version: "2" } }) });
    expect(res.status).toBe(204);
    expect((await read(`${ns}/sys/mounts`)).body.data["kvx/"]).toBeDefined();
    expect((await read("sys/mounts")).body.data["kvx/"]).toBeUndefined();
  });

  // The LIST verb itself cannot be sent through fetch (workerd refuses it, as the Workers front end
  // does); operationOf maps it and is unit-tested in test/unit/request.test.ts.
  it("lists with GET ?list=true and refuses a non-boolean list value", async () => {
    await write("sys/policies/acl/listme", { policy: 'path "a" { capabilities = ["read"] }' }, {}, 204);
    const viaQuery = await list("sys/policies/acl");
    expect(viaQuery.body.data.keys).toContain("listme");
    expect((await api("GET", "sys/policies/acl?list=maybe")).status).toBe(400);
  });

  it("treats POST and PUT as the same write", async () => {
    const r = await api("PUT", "sys/policies/acl/viaput", { body: { policy: 'path "b" { capabilities = ["read"] }' } });
    expect(r.status).toBe(204);
    expect((await read("sys/policies/acl/viaput")).body.data.name).toBe("viaput");
  });

  it("refuses PATCH without the merge-patch content type (415)", async () => {
    const r = await api("PATCH", "sys/namespaces/x", { body: {}, contentType: "application/json" });
    expect(r.status).toBe(415);
    expect(r.body.errors[0]).toContain("merge-patch+json");
  });

  it("answers 400 for malformed JSON and for a non-object body", async () => {
    const bad = await api("POST", "sys/policies/acl/x", { body: "{not json" });
    expect(bad.status).toBe(400);
    expect(bad.body.errors[0]).toContain("JSON");
    expect((await api("POST", "sys/policies/acl/x", { body: "[1,2]" })).status).toBe(400);
  });

  it("answers 413 for a body over the limit, before parsing", async () => {
    const big = JSON.stringify({ policy: "x".repeat(1024 * 1024 + 10) });
    const r = await api("POST", "sys/policies/acl/big", { body: big });
    expect(r.status).toBe(413);
  });

  it("answers 405 for a verb the path does not support", async () => {
    expect((await api("DELETE", "sys/mounts")).status).toBe(405);
    expect((await api("HEAD", "sys/mounts")).status).toBe(405);
  });

  it("warns about unrecognized fields and still does the write", async () => {
    const path = await mount("kv");
    // A write that would answer 204 answers 200 instead, so that the warning reaches the client.
    const r = await write(`sys/mounts/${path}-2`, { type: "kv", bogus: 1, alsobad: true }, {}, 200);
    expect(r.body.warnings).toEqual(["Endpoint ignored these unrecognized parameters: [alsobad bogus]"]);
    expect(r.body.data).toBeNull();
    expect((await read(`sys/mounts/${path}-2`)).body.data.type).toBe("kv");
    const tok = await write("auth/token/create", { policies: ["default"], colour: "blue", zeta: 1 });
    expect(tok.body.warnings).toContain("Endpoint ignored these unrecognized parameters: [colour zeta]");
  });

  it("names the field when a value cannot be coerced", async () => {
    const r = await write("auth/token/create", { ttl: "soon" }, {}, 400);
    expect(r.body.errors[0]).toContain('field "ttl"');
    const r2 = await write("auth/token/create", { num_uses: "many" }, {}, 400);
    expect(r2.body.errors[0]).toContain('field "num_uses"');
  });

  it("refuses paths with '..' or empty segments", async () => {
    const r = await SELF.fetch("http://x/v1/sys//mounts", { headers: { "x-service-token": "test-root-token-0123456789" } });
    expect(r.status).toBe(400);
    expect((await write("sys/mounts/bad!name", { type: "kv" }, {}, 400)).body.errors[0]).toContain("path");
    // ".." inside a name is refused as well, for mounts and for secret names.
    expect((await write("sys/mounts/a..b", { type: "pki" }, {}, 400)).body.errors[0]).toContain("'..'");
    const mounts = await SELF.fetch("http://x/v1/sys/mounts", { headers: { "x-service-token": "test-root-token-0123456789" } });
    expect(Object.keys(((await mounts.json()) as { data: Record<string, unknown> }).data)).not.toContain("a..b/");
  });

  it("answers other verbs on sys/health with 405", async () => {
    for (const method of ["POST", "DELETE", "PUT"]) {
      const r = await SELF.fetch("http://x/v1/sys/health", { method });
      expect(r.status).toBe(405);
      expect(((await r.json()) as { errors: string[] }).errors[0]).toContain("unsupported operation");
    }
    expect((await SELF.fetch("http://x/v1/sys/health")).status).toBe(200);
  });

  it("answers 413 to an oversized streamed body and keeps serving", async () => {
    const chunk = new Uint8Array(256 * 1024).fill(0x61);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(ctrl) {
        if (sent >= 8) return ctrl.close();
        sent++;
        ctrl.enqueue(chunk);
      },
    });
    const r = await SELF.fetch("http://x/v1/sys/policies/acl/big", {
      method: "POST",
      headers: { "x-service-token": "test-root-token-0123456789", "content-type": "application/json" },
      body,
      duplex: "half",
    } as RequestInit);
    expect(r.status).toBe(413);
    await write("sys/policies/acl/small", { policy: 'path "x" { capabilities = ["read"] }' }, {}, 204);
  });

  it("answers unknown top-level paths with 404 JSON", async () => {
    const res = await SELF.fetch("http://x/elsewhere");
    expect(res.status).toBe(404);
    expect(await res.json()).toHaveProperty("errors");
  });
});
