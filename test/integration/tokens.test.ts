import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, read, tokenWithPolicy, write } from "../helpers/api";

const create = (body: Record<string, unknown>, token?: string) => write("auth/token/create", body, { token });

describe("tokens", () => {
  it("creates a token with policies, ttl, display name, meta, and looks it up", async () => {
    const r = await create({ policies: "a,b", ttl: "1h", display_name: "ci bot", meta: { team: "blue" } });
    const auth = r.body.auth;
    expect(auth.client_token).toMatch(/^lys\./);
    expect(auth.policies).toEqual(["a", "b", "default"]);
    expect(auth.lease_duration).toBe(3600);
    expect(auth.renewable).toBe(true);
    expect(auth.metadata).toEqual({ team: "blue" });
    const self = await read("auth/token/lookup-self", { token: auth.client_token });
    expect(self.body.data).toMatchObject({
      accessor: auth.accessor,
      display_name: "token-ci-bot",
      policies: ["a", "b", "default"],
      meta: { team: "blue" },
      type: "service",
      id: auth.client_token,
    });
    expect(self.body.data.ttl).toBeGreaterThan(3590);
    const other = await write("auth/token/lookup", { token: auth.client_token });
    expect(other.body.data.accessor).toBe(auth.accessor);
  });

  it("stores only a hash of the token", async () => {
    const r = await create({ policies: ["default"] });
    const rows = await env.DB.prepare("SELECT * FROM tokens").all();
    expect(JSON.stringify(rows.results)).not.toContain(r.body.auth.client_token);
  });

  it("refuses unknown, revoked and expired tokens with 403", async () => {
    expect((await api("GET", "auth/token/lookup-self", { token: "lys.nope" })).status).toBe(403);
    const t = (await create({ policies: ["default"] })).body.auth.client_token;
    await write("auth/token/revoke-self", {}, { token: t }, 204);
    expect((await api("GET", "auth/token/lookup-self", { token: t })).status).toBe(403);
    const short = (await create({ policies: ["default"], ttl: "1s" })).body.auth.client_token;
    await new Promise((r) => setTimeout(r, 1100));
    expect((await api("GET", "auth/token/lookup-self", { token: short })).status).toBe(403);
  });

  it("limits a child to its parent's policies unless the parent is root", async () => {
    const parent = await tokenWithPolicy('path "auth/token/create" { capabilities = ["update"] }');
    const lookup = await read("auth/token/lookup-self", { token: parent });
    const parentPolicy = lookup.body.data.policies.find((p: string) => p !== "default");
    const ok = await create({ policies: [parentPolicy] }, parent);
    expect(ok.body.auth.policies).toEqual(["default", parentPolicy].sort());
    const bad = await write("auth/token/create", { policies: ["admin"] }, { token: parent }, 400);
    expect(bad.body.errors[0]).toContain("admin");
    const rootAttempt = await write("auth/token/create", { policies: ["root"] }, { token: parent }, 400);
    expect(rootAttempt.body.errors[0]).toContain("subset");
    const inherited = await create({}, parent);
    expect(inherited.body.auth.policies).toEqual(lookup.body.data.policies);
  });

  it("revoking a parent revokes its children and grandchildren", async () => {
    const parent = (await create({ policies: ["root"], ttl: "1h" })).body.auth.client_token;
    const child = (await create({ policies: ["root"] }, parent)).body.auth.client_token;
    const grandchild = (await create({ policies: ["default"] }, child)).body.auth.client_token;
    const orphan = (await write("auth/token/create-orphan", { policies: ["default"] }, { token: parent })).body.auth;
    expect(orphan.orphan).toBe(true);
    await write("auth/token/revoke", { token: parent }, {}, 204);
    for (const t of [parent, child, grandchild]) {
      expect((await api("GET", "auth/token/lookup-self", { token: t })).status).toBe(403);
    }
    expect((await api("GET", "auth/token/lookup-self", { token: orphan.client_token })).status).toBe(200);
  });

  it("spends num_uses and revokes the token after the last one", async () => {
    const t = (await create({ policies: ["default"], num_uses: 2 })).body.auth.client_token;
    const first = await read("auth/token/lookup-self", { token: t });
    expect(first.body.data.num_uses).toBe(1);
    await read("auth/token/lookup-self", { token: t });
    expect((await api("GET", "auth/token/lookup-self", { token: t })).status).toBe(403);
  });

  it("renews within explicit_max_ttl and caps beyond it", async () => {
    const t = (await create({ policies: ["default"], ttl: "10m", explicit_max_ttl: "1h" })).body.auth.client_token;
    const r = await write("auth/token/renew-self", { increment: "30m" }, { token: t });
    expect(r.body.auth.lease_duration).toBeGreaterThan(1790);
    const capped = await write("auth/token/renew-self", { increment: "5h" }, { token: t });
    expect(capped.body.auth.lease_duration).toBeLessThanOrEqual(3600);
    expect(capped.body.warnings?.[0]).toContain("capped");
    const fixed = (await create({ policies: ["default"], ttl: "10m", renewable: false })).body.auth.client_token;
    await write("auth/token/renew-self", {}, { token: fixed }, 400);
  });

  it("caps a ttl above explicit_max_ttl with a warning", async () => {
    const r = await create({ policies: ["default"], ttl: "2h", explicit_max_ttl: "1h" });
    expect(r.body.auth.lease_duration).toBe(3600);
    expect(r.body.warnings[0]).toContain("capped");
  });

  it("gives root-policy tokens without a ttl no expiry", async () => {
    const r = await create({ policies: ["root"] });
    expect(r.body.auth.lease_duration).toBe(0);
    const look = await read("auth/token/lookup-self", { token: r.body.auth.client_token });
    expect(look.body.data.expire_time).toBeNull();
  });

  it("refuses to revoke the configured root token", async () => {
    const r = await write("auth/token/revoke-self", {}, {}, 400);
    expect(r.body.errors[0]).toContain("ROOT_TOKEN");
  });

  it("looks up and revokes by accessor; listing accessors needs sudo", async () => {
    const t = (await create({ policies: ["default"] })).body.auth;
    const look = await write("auth/token/lookup-accessor", { accessor: t.accessor });
    expect(look.body.data.policies).toEqual(["default"]);
    expect(look.body.data.id).toBe("");
    const keys = await read("auth/token/accessors?list=true");
    expect(keys.body.data.keys).toContain(t.accessor);
    const noSudo = await tokenWithPolicy('path "auth/token/accessors" { capabilities = ["list"] }');
    expect((await api("GET", "auth/token/accessors?list=true", { token: noSudo })).status).toBe(403);
    const withSudo = await tokenWithPolicy('path "auth/token/accessors" { capabilities = ["list", "sudo"] }');
    expect((await api("GET", "auth/token/accessors?list=true", { token: withSudo })).status).toBe(200);
    await write("auth/token/revoke-accessor", { accessor: t.accessor }, {}, 204);
    expect((await api("GET", "auth/token/lookup-self", { token: t.client_token })).status).toBe(403);
  });

  it("orphans via no_parent need root or sudo", async () => {
    const plain = await tokenWithPolicy('path "auth/token/create" { capabilities = ["update"] }');
    const r = await write("auth/token/create", { no_parent: true }, { token: plain }, 400);
    expect(r.body.errors[0]).toContain("no_parent");
  });
});
