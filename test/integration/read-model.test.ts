/**
 * The hot path's read model (docs/architecture.md "Caches and concurrency invariants"):
 * tokens, ACLs, mounts and PKI issuance state are cached per isolate for at most CACHE_TTL_MS
 * (1000 ms here, the default). A change made by another isolate is simulated by writing D1
 * directly (env.DB), which no store sees, so nothing is invalidated: the old answer may be served
 * for a while, and the new one must come within the bound. The writing isolate's own changes go
 * through the stores and must show at once (also pki-read-model.test.ts, policies.test.ts).
 * Group commit (src/engines/pki/issuance/cert-commit.ts) is driven directly at the end.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, del, patch, read, tokenWithPolicy, write } from "../helpers/api";
import { parseCert, pkiWithRoot } from "../helpers/pki";
import { openDb } from "../../src/core/db/client";
import { commitCertificate } from "../../src/engines/pki/issuance/cert-commit";
import { generationOf } from "../../src/core/read-cache";

/** The bound under test, plus the scheduling slack of a shared 2-core machine. */
const BOUND_MS = 1000;
const SLACK_MS = 400;

/** Polls `check` until it holds; returns how long that took (fails past the bound and slack). */
async function within(check: () => Promise<boolean>): Promise<number> {
  const start = Date.now();
  for (;;) {
    if (await check()) return Date.now() - start;
    if (Date.now() - start > BOUND_MS + SLACK_MS) throw new Error(`not seen within ${BOUND_MS + SLACK_MS} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const lookupSelf = (token: string) => api("GET", "auth/token/lookup-self", { token });

describe("changes made elsewhere are seen within CACHE_TTL_MS", () => {
  it("a token deleted by another isolate stops working within the bound", async () => {
    const token = await tokenWithPolicy(`path "sys/policies/acl/*" { capabilities = ["read"] }`);
    expect((await lookupSelf(token)).status).toBe(200);
    const accessor = (await lookupSelf(token)).body.data.accessor as string;
    await env.DB.prepare("DELETE FROM tokens WHERE accessor = ?").bind(accessor).run();
    const took = await within(async () => (await lookupSelf(token)).status === 403);
    expect(took).toBeLessThanOrEqual(BOUND_MS + SLACK_MS);
  });

  it("a token revoked through the API stops at once in the isolate that revoked it", async () => {
    const token = await tokenWithPolicy(`path "sys/policies/acl/*" { capabilities = ["read"] }`);
    const accessor = (await lookupSelf(token)).body.data.accessor as string;
    await write("auth/token/revoke-accessor", { accessor }, {}, 204);
    expect((await lookupSelf(token)).status).toBe(403);
  });

  it("a policy narrowed by another isolate applies within the bound", async () => {
    const name = `narrow-${crypto.randomUUID().slice(0, 8)}`;
    await write(`sys/policies/acl/${name}`, { policy: `path "sys/policies/acl/*" { capabilities = ["read"] }` }, {}, 204);
    const token = (await write("auth/token/create", { policies: [name] })).body.auth.client_token as string;
    expect((await read(`sys/policies/acl/${name}`, { token })).status).toBe(200);
    await env.DB.prepare("UPDATE policies SET text = ? WHERE name = ?").bind(`path "nothing/*" { capabilities = ["read"] }`, name).run();
    await within(async () => (await api("GET", `sys/policies/acl/${name}`, { token })).status === 403);
  });

  it("a role changed by another isolate is used within the bound", async () => {
    const { path } = await pkiWithRoot();
    await write(`${path}/roles/web`, { allow_any_name: true, key_type: "ec", ttl: "1h", organization: "One" });
    const org = async () => parseCert((await write(`${path}/issue/web`, { common_name: "a.example" })).body.data.certificate).subject;
    expect(await org()).toContain("O=One");
    await env.DB.prepare(`UPDATE pki_roles SET data = json_set(data, '$.organization', json('["Two"]')) WHERE name = 'web' AND mount_id = (SELECT id FROM mounts WHERE path = ?)`)
      .bind(`${path}/`)
      .run();
    await within(async () => (await org()).includes("O=Two"));
  });

  it("a mount enabled by another isolate is routed to within the bound", async () => {
    const { path } = await pkiWithRoot();
    const other = `${path}-moved`;
    // Another isolate moves the mount: only D1 knows.
    await env.DB.prepare("UPDATE mounts SET path = ? WHERE path = ?").bind(`${other}/`, `${path}/`).run();
    await within(async () => (await api("GET", `${other}/ca/pem`, { token: null })).status === 200);
  });

  it("a token whose cached row has expired is read again, so a renewal elsewhere counts", async () => {
    const token = (await write("auth/token/create", { policies: ["default"], ttl: "2s" })).body.auth.client_token as string;
    const accessor = (await lookupSelf(token)).body.data.accessor as string;
    await env.DB.prepare("UPDATE tokens SET expire_time = expire_time + 60000 WHERE accessor = ?").bind(accessor).run();
    await new Promise((r) => setTimeout(r, 2200));
    expect((await lookupSelf(token)).status).toBe(200);
  });
});

describe("the writer invalidates its area at once (docs/architecture.md \"Every cache\")", () => {
  it("a namespace metadata update invalidates \"namespaces\"", async () => {
    const name = `meta-${crypto.randomUUID().slice(0, 8)}`;
    await write(`sys/namespaces/${name}`, {});
    const before = generationOf("namespaces");
    await patch(`sys/namespaces/${name}`, { custom_metadata: { owner: "team" } });
    expect(generationOf("namespaces")).toBeGreaterThan(before);
  });

  it("enabling and disabling an audit device invalidate \"audit\" (the device list and layer 0)", async () => {
    const device = `rm-${crypto.randomUUID().slice(0, 6)}`;
    const before = generationOf("audit");
    await write(`sys/audit/${device}`, { type: "stdout" }, {}, 204);
    const enabled = generationOf("audit");
    expect(enabled).toBeGreaterThan(before);
    await del(`sys/audit/${device}`);
    expect(generationOf("audit")).toBeGreaterThan(enabled);
  });
});

describe("group commit of certificate rows", () => {
  it("concurrent rows share batches; a row that fails alone fails only itself", async () => {
    const { path, issuerId } = await pkiWithRoot();
    const mountId = (await env.DB.prepare("SELECT id FROM mounts WHERE path = ?").bind(`${path}/`).first<{ id: string }>())?.id ?? "";
    expect(mountId).not.toBe("");
    const db = openDb(env.DB);
    const row = (serial: string) => ({ mountId, serial, der: "AA==", issuerId, notAfter: 2_000_000_000, createdAt: Date.now() });
    await commitCertificate(db, [row("aa:00")]);
    // 40 rows at once, one of them a duplicate serial (the unique index refuses it).
    const serials = Array.from({ length: 40 }, (_, i) => `aa:${(i + 1).toString(16).padStart(2, "0")}`);
    serials[17] = "aa:00";
    const outcomes = await Promise.allSettled(serials.map((s) => commitCertificate(openDb(env.DB), [row(s)])));
    expect(outcomes.filter((o) => o.status === "rejected")).toHaveLength(1);
    expect(outcomes[17]?.status).toBe("rejected");
    const stored = await env.DB.prepare("SELECT count(*) AS n FROM pki_certs WHERE mount_no = (SELECT no FROM pki_ids WHERE id = ?)").bind(mountId).first<{ n: number }>();
    // The root's own row, "aa:00" and the 39 others.
    expect(stored?.n).toBe(41);
  });

  it("100 concurrent issues get 100 distinct serials, every one stored", async () => {
    const { path } = await pkiWithRoot();
    await write(`${path}/roles/web`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
    const issued = await Promise.all(Array.from({ length: 100 }, () => write(`${path}/issue/web`, { common_name: "a.example" })));
    const serials = new Set(issued.map((r) => r.body.data.serial_number as string));
    expect(serials.size).toBe(100);
    const listed = new Set(((await api("GET", `${path}/certs?list=true`)).body.data.keys as string[]).map((k) => k.replace(/-/g, ":")));
    expect(listed.size).toBe(101); // and the root's own
    for (const s of serials) expect(listed.has(s)).toBe(true);
  });
});
