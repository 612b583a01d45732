/**
 * `tidy_acme` with `acme_account_safety_buffer` (Vault API /pki/tidy) over HTTP: ACME rows are
 * seeded straight into D1 with times around the buffers, POST tidy runs the job in the mount's
 * Authority, and the rows left and the tidy-status counters are checked. Orders go after their
 * certificate's notAfter + safety_buffer (the account's latest one only after the account
 * buffer), orders without a certificate once expired; idle valid accounts are revoked, long
 * revoked or deactivated ones deleted; old unused EAB keys deleted. A small page_size makes the
 * job page through the accounts.
 */
import { env } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { read, write } from "../helpers/api";
import { pkiWithRoot } from "../helpers/pki";

const S = 1000;

async function seedAccount(mountId: string, id: string, status: string, createdAt: number, updatedAt = createdAt): Promise<void> {
  await env.DB.prepare("INSERT INTO pki_acme_accounts (mount_id, id, thumbprint, jwk, status, contact, directory, eab_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, '[]', 'acme', '', ?, ?)")
    .bind(mountId, id, `thumb-${id}`, JSON.stringify({ kty: "EC", crv: "P-256", x: id, y: id }), status, createdAt, updatedAt)
    .run();
}

/** An order with one authorization and its http-01 challenge; `certExpiresAt` 0 = no certificate. */
async function seedOrder(mountId: string, accountId: string, id: string, expiresAt: number, certExpiresAt: number): Promise<void> {
  const serial = certExpiresAt > 0 ? `aa:${id.length.toString(16).padStart(2, "0")}:${id}` : "";
  await env.DB.batch([
    env.DB.prepare(
      "INSERT INTO pki_acme_orders (mount_id, id, account_id, directory, status, identifiers, not_after, role, issuer, expires_at, cert_serial, cert_chain, cert_expires_at, error, created_at) VALUES (?, ?, ?, 'acme', ?, '[]', '', '', 'default', ?, ?, '', ?, NULL, ?)",
    ).bind(mountId, id, accountId, certExpiresAt > 0 ? "valid" : "pending", expiresAt, serial, certExpiresAt, expiresAt - 86_400 * S),
    env.DB.prepare("INSERT INTO pki_acme_authzs (mount_id, id, order_id, account_id, identifier_type, identifier_value, wildcard, status, expires_at, created_at) VALUES (?, ?, ?, ?, 'dns', 'a.example', 0, 'pending', ?, ?)").bind(
      mountId,
      `authz-${id}`,
      id,
      accountId,
      expiresAt,
      expiresAt - 86_400 * S,
    ),
    env.DB.prepare("INSERT INTO pki_acme_challenges (mount_id, authz_id, type, token, status, validated_at, error) VALUES (?, ?, 'http-01', 'tok', 'pending', 0, NULL)").bind(mountId, `authz-${id}`),
  ]);
}

async function column(sql: string, ...args: unknown[]): Promise<string[]> {
  const r = await env.DB.prepare(sql)
    .bind(...args)
    .all<{ v: string }>();
  return r.results.map((x) => x.v).sort();
}

describe("tidy_acme", () => {
  it("tidies orders, revokes idle accounts, deletes long-revoked ones and old EAB keys; counts them", async () => {
    const ctx = await pkiWithRoot();
    const mounts = await read("sys/mounts");
    const mountId = mounts.body.data[`${ctx.path}/`].uuid as string;
    const now = Date.now();
    const old = now - 10_000 * S;
    // Buffers of the tidy below: safety_buffer 50 s, acme_account_safety_buffer 100 s.
    await seedAccount(mountId, "a-idle", "valid", old);
    await seedOrder(mountId, "a-idle", "o-idle-cert", old, now - 500 * S); // cert past both buffers: goes
    await seedOrder(mountId, "a-idle", "o-idle-nocert", now - 10 * S, 0); // expired, no certificate: goes
    await seedAccount(mountId, "b-active", "valid", old);
    await seedOrder(mountId, "b-active", "o-active", old, now + 3600 * S); // unexpired certificate: stays
    await seedAccount(mountId, "c-recent", "valid", old);
    await seedOrder(mountId, "c-recent", "o-recent-old", old, now - 500 * S); // goes
    await seedOrder(mountId, "c-recent", "o-recent-latest", old, now - 70 * S); // past safety, not past the account buffer: the latest stays
    await seedAccount(mountId, "d-revoked-long", "revoked", old, now - 200 * S); // deleted
    await seedAccount(mountId, "e-revoked-new", "revoked", old, now - 10 * S); // stays
    await seedAccount(mountId, "f-new", "valid", now - 10 * S); // created inside the buffer: stays valid
    await seedAccount(mountId, "g-deactivated", "deactivated", old, now - 200 * S); // deleted
    await seedAccount(mountId, "h-pending", "valid", old);
    await seedOrder(mountId, "h-pending", "o-pending", now + 3600 * S, 0); // live order: account stays valid
    await env.DB.batch([
      env.DB.prepare("INSERT INTO pki_acme_eab (mount_id, id, sealed_key, directory, created_at) VALUES (?, 'eab-old', 'x', 'acme', ?)").bind(mountId, now - 200 * S),
      env.DB.prepare("INSERT INTO pki_acme_eab (mount_id, id, sealed_key, directory, created_at) VALUES (?, 'eab-new', 'x', 'acme', ?)").bind(mountId, now - 10 * S),
    ]);

    await write(`${ctx.path}/tidy`, { tidy_acme: true, safety_buffer: 50, acme_account_safety_buffer: 100, page_size: 5 }, {}, 202);
    let status: Record<string, unknown> = {};
    await vi.waitFor(
      async () => {
        status = (await read(`${ctx.path}/tidy-status`)).body.data;
        expect(status.state).toBe("Finished");
      },
      { timeout: 20_000, interval: 100 },
    );
    expect(status).toMatchObject({
      tidy_acme: true,
      acme_account_safety_buffer: 100,
      total_acme_account_count: 8,
      acme_account_revoked_count: 1,
      acme_account_deleted_count: 2,
      acme_orders_deleted_count: 3,
    });

    const accounts = await env.DB.prepare("SELECT id, status FROM pki_acme_accounts WHERE mount_id = ? ORDER BY id").bind(mountId).all<{ id: string; status: string }>();
    expect(accounts.results).toEqual([
      { id: "a-idle", status: "revoked" },
      { id: "b-active", status: "valid" },
      { id: "c-recent", status: "valid" },
      { id: "e-revoked-new", status: "revoked" },
      { id: "f-new", status: "valid" },
      { id: "h-pending", status: "valid" },
    ]);
    expect(await column("SELECT id AS v FROM pki_acme_orders WHERE mount_id = ?", mountId)).toEqual(["o-active", "o-pending", "o-recent-latest"]);
    // Authorizations and challenges went with their orders.
    expect(await column("SELECT order_id AS v FROM pki_acme_authzs WHERE mount_id = ?", mountId)).toEqual(["o-active", "o-pending", "o-recent-latest"]);
    expect(await column("SELECT authz_id AS v FROM pki_acme_challenges WHERE mount_id = ?", mountId)).toEqual(["authz-o-active", "authz-o-pending", "authz-o-recent-latest"]);
    expect(await column("SELECT id AS v FROM pki_acme_eab WHERE mount_id = ?", mountId)).toEqual(["eab-new"]);

    // A second run: the account revoked just now is inside the buffer again, nothing else is due.
    await write(`${ctx.path}/tidy`, { tidy_acme: true, safety_buffer: 50, acme_account_safety_buffer: 100 }, {}, 202);
    await vi.waitFor(
      async () => {
        status = (await read(`${ctx.path}/tidy-status`)).body.data;
        expect(status.state).toBe("Finished");
      },
      { timeout: 20_000, interval: 100 },
    );
    expect(status).toMatchObject({ total_acme_account_count: 6, acme_account_revoked_count: 0, acme_account_deleted_count: 0, acme_orders_deleted_count: 0 });
  });

  it("without tidy_acme the ACME rows are untouched; acme_account_safety_buffer must be positive", async () => {
    const ctx = await pkiWithRoot();
    const mounts = await read("sys/mounts");
    const mountId = mounts.body.data[`${ctx.path}/`].uuid as string;
    await seedAccount(mountId, "z-old", "deactivated", 1, 1);
    await write(`${ctx.path}/tidy`, { tidy_cert_store: true }, {}, 202);
    await vi.waitFor(async () => expect((await read(`${ctx.path}/tidy-status`)).body.data.state).toBe("Finished"), { timeout: 20_000, interval: 100 });
    expect((await read(`${ctx.path}/tidy-status`)).body.data).toMatchObject({ tidy_acme: false, total_acme_account_count: 0 });
    expect(await column("SELECT id AS v FROM pki_acme_accounts WHERE mount_id = ?", mountId)).toEqual(["z-old"]);
    const bad = await write(`${ctx.path}/tidy`, { tidy_acme: true, acme_account_safety_buffer: 0 }, {}, 400);
    expect(bad.body.errors[0]).toBe("acme_account_safety_buffer must be greater than zero");
  });
});
