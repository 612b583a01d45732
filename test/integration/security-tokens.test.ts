/**
 * Tokens: a use-limited token must not mint children; revocation races creation, and no token
 * may outlive a revoked ancestor; the policy count is bounded, and no stored token can make the
 * ACL read exceed D1's 100 bound parameters.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { openDb } from "../../src/core/db/client";
import { insertToken, revokeTree, type TokenRow } from "../../src/auth/token-store";
import { sha256Hex } from "../../src/core/encoding";
import { api, read, tokenWithPolicy, write, type ApiResult } from "../helpers/api";

const CREATE_POLICY = 'path "auth/token/create" { capabilities = ["update"] }\npath "auth/token/create-orphan" { capabilities = ["update"] }';

async function childCount(parentAccessor: string): Promise<number> {
  const row = await env.DB.prepare("SELECT count(*) AS n FROM tokens WHERE parent_accessor = ?").bind(parentAccessor).first<{ n: number }>();
  return row?.n ?? 0;
}

async function tokenCount(): Promise<number> {
  return (await env.DB.prepare("SELECT count(*) AS n FROM tokens").first<{ n: number }>())?.n ?? 0;
}

/** Every token in `created` (successful create answers) must be unusable and gone from storage. */
async function expectAllDead(created: ApiResult[], context: string): Promise<void> {
  const looks = await Promise.all(created.map((r) => api("GET", "auth/token/lookup-self", { token: r.body.auth.client_token as string })));
  looks.forEach((look, i) => {
    expect(look.status, `${context}: child ${created[i]?.body.auth.accessor} outlived its revoked ancestor`).toBe(403);
  });
  if (created.length === 0) return;
  const accessors = created.map((r) => r.body.auth.accessor as string);
  const stored = await env.DB.prepare(`SELECT accessor FROM tokens WHERE accessor IN (${accessors.map(() => "?").join(",")})`)
    .bind(...accessors)
    .all<{ accessor: string }>();
  expect(stored.results, `${context}: child rows still stored`).toEqual([]);
}

describe("use-limited tokens cannot create child tokens", () => {
  it("refuses auth/token/create from a num_uses=2 token with upstream's 400 and stores no child", async () => {
    const limited = await tokenWithPolicy(CREATE_POLICY, { extra: { num_uses: 2 } });
    const accessor = await accessorFromDb(limited);
    const r = await write("auth/token/create", { ttl: "768h" }, { token: limited }, 400);
    expect(r.body.errors[0]).toBe("restricted use token cannot generate child tokens");
    expect(await childCount(accessor)).toBe(0);
  });

  it("refuses the last use too (the issue's repro: num_uses 1, used once for create)", async () => {
    for (let i = 0; i < 5; i++) {
      const limited = await tokenWithPolicy(CREATE_POLICY, { extra: { num_uses: 1 } });
      const accessor = await accessorFromDb(limited);
      const r = await write("auth/token/create", {}, { token: limited }, 400);
      expect(r.body.errors[0]).toContain("restricted use token");
      expect(await childCount(accessor)).toBe(0);
      // The use was spent: the token itself is gone too.
      expect((await api("GET", "auth/token/lookup-self", { token: limited })).status).toBe(403);
    }
  });

  it("refuses create-orphan and no_parent from a use-limited token as well", async () => {
    const limited = (await write("auth/token/create", { policies: ["root"], num_uses: 5 })).body.auth.client_token as string;
    const before = await tokenCount();
    const orphan = await write("auth/token/create-orphan", {}, { token: limited }, 400);
    expect(orphan.body.errors[0]).toContain("restricted use token");
    const noParent = await write("auth/token/create", { no_parent: true }, { token: limited }, 400);
    expect(noParent.body.errors[0]).toContain("restricted use token");
    expect(await tokenCount()).toBe(before);
  });

  it("still lets an unlimited token create a use-limited child", async () => {
    const parent = await tokenWithPolicy(CREATE_POLICY);
    const r = await write("auth/token/create", { num_uses: 3 }, { token: parent });
    expect(r.body.auth.num_uses).toBe(3);
  });
});

/** The accessor of a token straight from the table, without spending one of its uses. */
async function accessorFromDb(token: string): Promise<string> {
  const hash = await sha256Hex(token);
  const row = await env.DB.prepare("SELECT accessor FROM tokens WHERE hash = ?").bind(hash).first<{ accessor: string }>();
  if (!row) throw new Error("token not stored");
  return row.accessor;
}

/** Waits for n D1 round trips: D1 runs statements one at a time, so this is a clock in its steps. */
async function d1Hops(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await env.DB.prepare("SELECT 1").first();
}

/**
 * Starts `revoke` now and create i after `offset + i` D1 round trips, so that across rounds with
 * different offsets some insert lands between the revocation's own statements (where the old
 * enumerate-then-delete revocation missed it). Timers do not serve here: workerd's clock stands
 * still between I/O.
 */
async function race(revoke: () => Promise<ApiResult>, creates: (() => Promise<ApiResult>)[], offset: number) {
  const later = (i: number) => d1Hops(offset + i).then(() => (creates[i] as () => Promise<ApiResult>)());
  const [revoked, ...created] = await Promise.all([revoke(), ...creates.map((_, i) => later(i))]);
  for (const r of created) expect([200, 403], JSON.stringify(r.body)).toContain(r.status);
  return { revoked: revoked as ApiResult, created: created.filter((r) => r.status === 200) };
}

describe("revocation excludes concurrent creation", () => {
  it("no child created concurrently with revoke-accessor of its parent survives (many rounds)", async () => {
    for (let round = 0; round < 8; round++) {
      const parent = (await write("auth/token/create", { policies: ["root"], ttl: "1h" })).body.auth;
      const creates = Array.from({ length: 9 }, () => () => api("POST", "auth/token/create", { token: parent.client_token, body: { policies: ["default"] } }));
      const { revoked, created } = await race(() => api("POST", "auth/token/revoke-accessor", { body: { accessor: parent.accessor } }), creates, round % 4);
      expect(revoked.status).toBe(204);
      await expectAllDead(created, `round ${round}`);
      expect(await childCount(parent.accessor)).toBe(0);
    }
  });

  it("revoke-self racing its own child creations leaves no child", async () => {
    for (let round = 0; round < 4; round++) {
      const parent = (await write("auth/token/create", { policies: ["root"], ttl: "1h" })).body.auth;
      const creates = Array.from({ length: 6 }, () => () => api("POST", "auth/token/create", { token: parent.client_token, body: {} }));
      const { revoked, created } = await race(() => api("POST", "auth/token/revoke-self", { token: parent.client_token, body: {} }), creates, round % 4);
      expect(revoked.status).toBe(204);
      await expectAllDead(created, `round ${round}`);
      expect(await childCount(parent.accessor)).toBe(0);
    }
  });

  it("no grandchild created concurrently with revoking its grandparent survives", async () => {
    for (let round = 0; round < 3; round++) {
      const top = (await write("auth/token/create", { policies: ["root"], ttl: "1h" })).body.auth;
      const kids: string[] = [];
      for (let i = 0; i < 3; i++) kids.push((await write("auth/token/create", { policies: ["root"] }, { token: top.client_token })).body.auth.client_token);
      const creates = kids.flatMap((k) => [0, 1, 2].map(() => () => api("POST", "auth/token/create", { token: k, body: { policies: ["default"] } })));
      const { revoked, created } = await race(() => api("POST", "auth/token/revoke", { body: { token: top.client_token } }), creates, round % 3);
      expect(revoked.status).toBe(204);
      await expectAllDead(created, `round ${round}`);
      const kidLooks = await Promise.all(kids.map((k) => api("GET", "auth/token/lookup-self", { token: k })));
      expect(kidLooks.map((l) => l.status)).toEqual([403, 403, 403]);
    }
  });

  it("the store inserts a child only under a parent that is valid at that instant", async () => {
    const db = openDb(env.DB);
    const now = Date.now();
    const row = (accessor: string, parent: string | null, extra: Partial<TokenRow> = {}): TokenRow => ({
      hash: `h-${accessor}`,
      accessor,
      namespaceId: "root",
      parentAccessor: parent,
      policies: ["default"],
      displayName: "token",
      meta: null,
      numUses: 0,
      usesLeft: 0,
      ttl: 3600,
      explicitMaxTtl: 0,
      renewable: true,
      creationTime: now,
      expireTime: now + 3_600_000,
      maxExpireTime: now + 3_600_000,
      path: "auth/token/create",
      period: 0,
      authMountId: null,
      roleName: "",
      boundCidrs: [],
      ...extra,
    });
    const id = crypto.randomUUID().slice(0, 8);
    expect(await insertToken(db, row(`ok-${id}`, null), now)).toBe(true);
    expect(await insertToken(db, row(`spent-${id}`, null, { numUses: 1, usesLeft: 0 }), now)).toBe(true);
    expect(await insertToken(db, row(`old-${id}`, null, { expireTime: now - 1 }), now)).toBe(true);
    // Used up (the waitUntil window), expired, revoked, never existed: nothing stored.
    for (const parent of [`spent-${id}`, `old-${id}`, `gone-${id}`]) {
      expect(await insertToken(db, row(`c-${parent}`, parent), now), parent).toBe(false);
      expect(await childCount(parent)).toBe(0);
    }
    const child = row(`c-ok-${id}`, `ok-${id}`, { meta: { k: "v" }, renewable: false, expireTime: null });
    expect(await insertToken(db, child, now)).toBe(true);
    const stored = await env.DB.prepare("SELECT * FROM tokens WHERE accessor = ?").bind(child.accessor).first();
    expect(stored).toMatchObject({ policies: '["default"]', meta: '{"k":"v"}', renewable: 0, expire_time: null, parent_accessor: `ok-${id}` });
    expect(await revokeTree(db, `ok-${id}`)).toBe(2);
    expect(await insertToken(db, row(`late-${id}`, `ok-${id}`), now)).toBe(false);
  });

  it("a create whose parent was revoked before the insert answers 403 and stores nothing", async () => {
    const parent = (await write("auth/token/create", { policies: ["root"], ttl: "1h" })).body.auth;
    await write("auth/token/revoke-accessor", { accessor: parent.accessor }, {}, 204);
    expect((await api("POST", "auth/token/create", { token: parent.client_token, body: {} })).status).toBe(403);
    expect(await childCount(parent.accessor)).toBe(0);
  });
});

describe("policy count and D1's bound-parameter limit", () => {
  const names = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

  it("refuses a token with more than 64 policies with a 400 naming `policies`", async () => {
    const r = await write("auth/token/create", { policies: names(99, "many") }, {}, 400);
    expect(r.body.errors[0]).toMatch(/^policies: /);
    expect(r.body.errors[0]).toContain("64");
    // 63 named policies plus `default` is exactly the limit.
    const ok = await write("auth/token/create", { policies: names(63, "edge") });
    expect(ok.body.auth.policies).toHaveLength(64);
    expect((await read("auth/token/lookup-self", { token: ok.body.auth.client_token })).status).toBe(200);
    const over = await write("auth/token/create", { policies: names(64, "edge") }, {}, 400);
    expect(over.body.errors[0]).toContain("policies");
    // Duplicates and blanks do not count.
    const dup = await write("auth/token/create", { policies: [...names(60, "dup"), ...names(60, "dup"), "", " "] });
    expect(dup.body.auth.policies).toHaveLength(61);
  });

  it("a stored token with 150 policies (made before the limit) is served, and its last policy counts", async () => {
    const mountPath = `sec-${crypto.randomUUID().slice(0, 8)}`;
    await write(`sys/mounts/${mountPath}`, { type: "kv", options: { version: "2" } }, {}, 204);
    const policies = names(150, "legacy");
    await write(`sys/policies/acl/legacy-149`, { policy: `path "${mountPath}/data/*" { capabilities = ["create", "update", "read"] }\npath "auth/token/create" { capabilities = ["update"] }` }, {}, 204);
    const token = `lys.legacy-${crypto.randomUUID()}`;
    const hash = await sha256Hex(token);
    const now = Date.now();
    await env.DB.prepare(
      `INSERT INTO tokens (hash, accessor, namespace_id, parent_accessor, policies, display_name, meta, num_uses, uses_left, ttl,
         explicit_max_ttl, renewable, creation_time, expire_time, max_expire_time)
       VALUES (?, ?, 'root', NULL, ?, 'token', NULL, 0, 0, 3600, 0, 1, ?, ?, ?)`,
    )
      .bind(hash, `acc-${crypto.randomUUID()}`, JSON.stringify([...policies, "default"].sort()), now, now + 3_600_000, now + 3_600_000)
      .run();
    const self = await api("GET", "auth/token/lookup-self", { token });
    expect(self.status, self.text).toBe(200);
    await write(`${mountPath}/data/x`, { data: { a: "1" } }, { token });
    expect((await api("GET", `${mountPath}/data/x`, { token })).status).toBe(200);
    // sys/capabilities builds the same ACL for a token named in the body.
    const caps = await write("sys/capabilities", { token, paths: [`${mountPath}/data/x`] });
    expect(caps.body.data[`${mountPath}/data/x`]).toEqual(["create", "read", "update"]);
    // A child of it may not copy all 151 policies.
    const child = await write("auth/token/create", {}, { token }, 400);
    expect(child.body.errors[0]).toMatch(/^policies: /);
  });
});
