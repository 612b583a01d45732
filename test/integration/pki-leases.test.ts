/**
 * Certificate leases (docs/leases.md; OpenBao builtin/logical/pki/secret_certs.go): a role with generate_lease makes
 * issue/sign (and their issuer/:ref forms) answer a lease `<request path>/<24 base62>` running to
 * the certificate's notAfter (capped by the mount's max lease TTL, with Vault's warning), and
 * sys/leases/lookup, renew, revoke, revoke-prefix (sudo), LIST lookup (sudo) work on it; revoking
 * a lease revokes the certificate (cert/:serial and the CRL show it); leases expire with the
 * certificate, disappear with their mount, and are namespace-relative.
 */
import { createScheduledController, env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { leaseExpiryJob } from "../../src/app/leases";
import { api, list, read, tokenWithPolicy, write } from "../helpers/api";
import { makeCsr, pkiWithRoot, x509 } from "../helpers/pki";

async function setup(role: Record<string, unknown> = {}) {
  const ctx = await pkiWithRoot();
  await write(`${ctx.path}/roles/web`, { allow_any_name: true, key_type: "ec", max_ttl: "24h", generate_lease: true, ...role });
  return ctx;
}

interface Issued {
  leaseId: string;
  leaseDuration: number;
  renewable: boolean;
  serial: string;
  expiration: number;
  warnings: string[] | null;
}

async function issue(path: string, body: Record<string, unknown> = {}, at = "issue/web", opts: { namespace?: string } = {}): Promise<Issued> {
  const r = await write(`${path}/${at}`, { common_name: "leaf.example", ttl: "1h", ...body }, opts);
  return {
    leaseId: r.body.lease_id,
    leaseDuration: r.body.lease_duration,
    renewable: r.body.renewable,
    serial: r.body.data.serial_number,
    expiration: Number(r.body.data.expiration),
    warnings: r.body.warnings,
  };
}

/** Serials on the mount's CRL, colon hex without leading zero octets. */
async function crlSerials(path: string, namespace?: string): Promise<string[]> {
  const r = await api("GET", `${path}/crl/pem`, { token: null, namespace });
  expect(r.status).toBe(200);
  return new x509.X509Crl(r.text).entries.map((e) => (e.serialNumber.match(/../g) ?? []).join(":").toLowerCase().replace(/^(00:)+/, ""));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const runExpiry = () => leaseExpiryJob.run(env, createScheduledController({ scheduledTime: new Date(), cron: "* * * * *" }));
const BASE62_24 = "[0-9A-Za-z]{24}";

describe("issue and sign with generate_lease", () => {
  it("answer a lease id, the seconds until notAfter and renewable false at the top level", async () => {
    const { path } = await setup();
    const t0 = Math.floor(Date.now() / 1000);
    const leaf = await issue(path);
    expect(leaf.leaseId).toMatch(new RegExp(`^${path}/issue/web/${BASE62_24}$`));
    expect(leaf.renewable).toBe(false);
    expect(leaf.leaseDuration).toBeGreaterThan(3590);
    expect(leaf.leaseDuration).toBeLessThanOrEqual(leaf.expiration - t0);

    const csr = await makeCsr("signed.example");
    const signed = await issue(path, { csr: csr.pem, common_name: "signed.example" }, "sign/web");
    expect(signed.leaseId).toMatch(new RegExp(`^${path}/sign/web/${BASE62_24}$`));
    expect(signed.leaseDuration).toBeGreaterThan(3590);

    // The per-issuer forms: the lease id is the full request path, as Vault's.
    const viaIssuer = await issue(path, {}, "issuer/root-ca/issue/web");
    expect(viaIssuer.leaseId).toMatch(new RegExp(`^${path}/issuer/root-ca/issue/web/${BASE62_24}$`));
    const signedViaIssuer = await issue(path, { csr: csr.pem, common_name: "signed.example" }, "issuer/default/sign/web");
    expect(signedViaIssuer.leaseId).toMatch(new RegExp(`^${path}/issuer/default/sign/web/${BASE62_24}$`));
    expect(new Set([leaf.leaseId, signed.leaseId, viaIssuer.leaseId, signedViaIssuer.leaseId]).size).toBe(4);
  });

  it("sign-verbatim with a generate_lease role answers a lease too (the role's generate_lease takes effect)", async () => {
    const { path } = await setup();
    const csr = await makeCsr("verbatim.example");
    const withRole = await issue(path, { csr: csr.pem }, "sign-verbatim/web");
    expect(withRole.leaseId).toMatch(new RegExp(`^${path}/sign-verbatim/web/${BASE62_24}$`));
    expect(withRole.renewable).toBe(false);
    expect(withRole.leaseDuration).toBeGreaterThan(3590);
    const viaIssuer = await issue(path, { csr: csr.pem }, "issuer/default/sign-verbatim/web");
    expect(viaIssuer.leaseId).toMatch(new RegExp(`^${path}/issuer/default/sign-verbatim/web/${BASE62_24}$`));
    // The lease revokes the certificate, as for issue/sign.
    expect((await api("PUT", "sys/leases/revoke", { body: { lease_id: withRole.leaseId } })).status).toBe(204);
    expect((await read(`${path}/cert/${withRole.serial}`)).body.data.revocation_time).toBeGreaterThan(0);
    // Without a role there is no generate_lease to apply.
    const noRole = await issue(path, { csr: csr.pem }, "sign-verbatim");
    expect(noRole.leaseId).toBe("");
    expect(noRole.leaseDuration).toBe(0);
  });

  it("no lease without generate_lease, nor with no_store (which forces it off)", async () => {
    const { path } = await setup({ generate_lease: false });
    const plain = await issue(path);
    expect(plain.leaseId).toBe("");
    expect(plain.leaseDuration).toBe(0);
    await write(`${path}/roles/nostore`, { allow_any_name: true, key_type: "ec", no_store: true, generate_lease: true });
    const noStore = await issue(path, {}, "issue/nostore");
    expect(noStore.leaseId).toBe("");
  });

  it("caps the lease at the mount's max lease TTL with Vault's warning", async () => {
    const { path } = await setup();
    const leaf = await issue(path, { ttl: undefined, not_after: "2030-01-01T00:00:00Z" });
    expect(leaf.leaseDuration).toBe(768 * 3600);
    expect(leaf.warnings).toContainEqual(expect.stringMatching(/^TTL of "\d+h\d+m\d+s" exceeded the effective max_ttl of "768h0m0s"; TTL value is capped accordingly$/));
  });
});

describe("sys/leases/lookup", () => {
  it("answers id, issue_time, expire_time, last_renewal null, renewable false and ttl", async () => {
    const { path } = await setup();
    const leaf = await issue(path);
    const r = await write("sys/leases/lookup", { lease_id: leaf.leaseId });
    const d = r.body.data;
    expect(d.id).toBe(leaf.leaseId);
    expect(d.last_renewal).toBeNull();
    expect(d.renewable).toBe(false);
    expect(Math.abs(d.ttl - leaf.leaseDuration)).toBeLessThanOrEqual(2);
    expect(Math.abs(Date.parse(d.issue_time) - Date.now())).toBeLessThan(60_000);
    expect(Math.abs(Date.parse(d.expire_time) / 1000 - leaf.expiration)).toBeLessThanOrEqual(2);
    // PUT as the Go client sends it.
    expect((await api("PUT", "sys/leases/lookup", { body: { lease_id: leaf.leaseId } })).body.data.id).toBe(leaf.leaseId);
  });

  it("refuses a missing or unknown lease id as Vault does", async () => {
    expect((await write("sys/leases/lookup", {}, {}, 400)).body.errors).toEqual(["lease_id must be specified"]);
    expect((await write("sys/leases/lookup", { lease_id: "pki/issue/web/nope" }, {}, 400)).body.errors).toEqual(["invalid lease"]);
  });

  it("LIST sys/leases/lookup/:prefix lists the next segment and needs sudo", async () => {
    const { path } = await setup();
    const a = await issue(path);
    const b = await issue(path);
    const keys = (await list(`sys/leases/lookup/${path}/issue/web/`)).body.data.keys as string[];
    expect(keys).toEqual([a.leaseId, b.leaseId].map((id) => id.split("/").pop()).sort());
    expect((await list(`sys/leases/lookup/${path}`)).body.data.keys).toEqual(["issue/"]);
    await list(`sys/leases/lookup/${path}-none/`, {}, 404);

    const noSudo = await tokenWithPolicy(`path "sys/leases/*" { capabilities = ["read", "update", "list"] }`);
    await list(`sys/leases/lookup/${path}/`, { token: noSudo }, 403);
    const sudo = await tokenWithPolicy(`path "sys/leases/*" { capabilities = ["list", "sudo"] }`);
    expect((await list(`sys/leases/lookup/${path}/`, { token: sudo })).body.data.keys).toEqual(["issue/"]);
  });
});

describe("sys/leases/renew", () => {
  it("answers Vault's errors: certificate leases are not renewable", async () => {
    const { path } = await setup();
    const leaf = await issue(path);
    expect((await write("sys/leases/renew", { lease_id: leaf.leaseId }, {}, 400)).body.errors).toEqual(["lease is not renewable"]);
    expect((await write(`sys/leases/renew/${leaf.leaseId}`, {}, {}, 400)).body.errors).toEqual(["lease is not renewable"]);
    expect((await write("sys/leases/renew", { lease_id: `${path}/issue/web/x` }, {}, 400)).body.errors).toEqual(["lease not found"]);
    expect((await write("sys/leases/renew", {}, {}, 400)).body.errors).toEqual(["lease_id must be specified"]);
  });
});

describe("sys/leases/revoke", () => {
  it("revokes the certificate (cert/:serial, the CRL) and forgets the lease; 204 also for unknown ids", async () => {
    const { path } = await setup();
    const leaf = await issue(path);
    const other = await issue(path);
    const t0 = Math.floor(Date.now() / 1000);
    const r = await api("PUT", "sys/leases/revoke", { body: { lease_id: leaf.leaseId } });
    expect(r.status).toBe(204);
    const cert = await read(`${path}/cert/${leaf.serial}`, { token: null });
    expect(cert.body.data.revocation_time).toBeGreaterThanOrEqual(t0);
    expect(await crlSerials(path)).toContain(leaf.serial);
    expect(await crlSerials(path)).not.toContain(other.serial);
    expect((await write("sys/leases/lookup", { lease_id: leaf.leaseId }, {}, 400)).body.errors).toEqual(["invalid lease"]);
    // Vault answers 204 for a lease it does not know.
    expect((await api("PUT", "sys/leases/revoke", { body: { lease_id: leaf.leaseId } })).status).toBe(204);
    expect((await read(`${path}/cert/${other.serial}`, { token: null })).body.data.revocation_time).toBe(0);
  });

  it("takes the lease id in the path too, and sync=false answers 202", async () => {
    const { path } = await setup();
    const leaf = await issue(path);
    expect((await api("PUT", `sys/leases/revoke/${leaf.leaseId}`)).status).toBe(204);
    expect((await read(`${path}/cert/${leaf.serial}`, { token: null })).body.data.revocation_time).toBeGreaterThan(0);
    const later = await issue(path);
    const r = await api("PUT", "sys/leases/revoke", { body: { lease_id: later.leaseId, sync: false } });
    expect(r.status).toBe(202);
    expect(r.text).toBe("");
    await write("sys/leases/revoke", {}, {}, 400);
  });

  it("revoke-prefix revokes every lease under the prefix and needs sudo", async () => {
    const { path } = await setup();
    await write(`${path}/roles/api`, { allow_any_name: true, key_type: "ec", generate_lease: true });
    const a = await issue(path);
    const b = await issue(path);
    const c = await issue(path, {}, "issue/api");

    const noSudo = await tokenWithPolicy(`path "sys/leases/*" { capabilities = ["update"] }`);
    expect((await api("PUT", `sys/leases/revoke-prefix/${path}/issue/web`, { token: noSudo })).status).toBe(403);
    const sudo = await tokenWithPolicy(`path "sys/leases/*" { capabilities = ["update", "sudo"] }`);
    expect((await api("PUT", `sys/leases/revoke-prefix/${path}/issue/web`, { token: sudo })).status).toBe(204);

    const crl = await crlSerials(path);
    expect(crl).toEqual(expect.arrayContaining([a.serial, b.serial]));
    expect(crl).not.toContain(c.serial);
    await write("sys/leases/lookup", { lease_id: a.leaseId }, {}, 400);
    await write("sys/leases/lookup", { lease_id: c.leaseId });
    // "issue/we" is not a folder of "issue/web/…": prefixes are whole segments.
    expect((await api("PUT", `sys/leases/revoke-prefix/${path}/issue/a`)).status).toBe(204);
    await write("sys/leases/lookup", { lease_id: c.leaseId });
  });
});

describe("expiry", () => {
  it("an expired lease is an invalid lease, and the expiry job removes it", async () => {
    const { path } = await setup();
    const leaf = await issue(path, { ttl: "2s" });
    expect(leaf.leaseDuration).toBeLessThanOrEqual(2);
    await sleep(2500);
    expect((await write("sys/leases/lookup", { lease_id: leaf.leaseId }, {}, 400)).body.errors).toEqual(["invalid lease"]);
    expect((await write("sys/leases/renew", { lease_id: leaf.leaseId }, {}, 400)).body.errors).toEqual(["lease expired"]);
    await runExpiry();
    expect((await write("sys/leases/renew", { lease_id: leaf.leaseId }, {}, 400)).body.errors).toEqual(["lease not found"]);
    // The certificate ran out on its own: not put on the CRL.
    expect(await crlSerials(path)).not.toContain(leaf.serial);
  });

  it("a lease capped below the certificate's life revokes the certificate when it expires", async () => {
    const { path } = await setup();
    await write(`sys/mounts/${path}/tune`, { max_lease_ttl: "2s" }, {}, 204);
    const leaf = await issue(path, { ttl: undefined, not_after: "2030-01-01T00:00:00Z" });
    expect(leaf.leaseDuration).toBe(2);
    await sleep(2500);
    await runExpiry();
    expect((await read(`${path}/cert/${leaf.serial}`, { token: null })).body.data.revocation_time).toBeGreaterThan(0);
    expect(await crlSerials(path)).toContain(leaf.serial);
  });
});

describe("lifecycle and namespaces", () => {
  it("disabling the mount removes its leases", async () => {
    const { path } = await setup();
    const leaf = await issue(path);
    await api("DELETE", `sys/mounts/${path}`);
    expect((await write("sys/leases/renew", { lease_id: leaf.leaseId }, {}, 400)).body.errors).toEqual(["lease not found"]);
    // Mounted again at the same path: the old lease does not come back.
    await write(`sys/mounts/${path}`, { type: "pki" }, {}, 204);
    await list(`sys/leases/lookup/${path}/`, {}, 404);
  });

  it("lease ids are namespace-relative: another namespace can neither see nor revoke them", async () => {
    const ns = `team-${crypto.randomUUID().slice(0, 8)}`;
    const other = `other-${crypto.randomUUID().slice(0, 8)}`;
    await write(`sys/namespaces/${ns}`, {});
    await write(`sys/namespaces/${other}`, {});
    await write(`${ns}/sys/mounts/pki`, { type: "pki" }, {}, 204);
    await write(`${ns}/pki/root/generate/internal`, { common_name: "Team CA", key_type: "ec", ttl: "48h" });
    await write(`${ns}/pki/roles/web`, { allow_any_name: true, key_type: "ec", generate_lease: true });
    const leaf = await issue("pki", {}, "issue/web", { namespace: ns });
    // Relative to the namespace, with Vault's ".<namespace id>" suffix.
    expect(leaf.leaseId).toMatch(new RegExp(`^pki/issue/web/${BASE62_24}\\.[\\w-]+$`));

    // Team's own token sees it; the root namespace and a sibling do not.
    const policy = `path "sys/leases/*" { capabilities = ["update", "list", "sudo"] }`;
    const teamToken = await tokenWithPolicy(policy, { namespace: ns });
    const otherToken = await tokenWithPolicy(policy, { namespace: other });
    expect((await write("sys/leases/lookup", { lease_id: leaf.leaseId }, { token: teamToken, namespace: ns })).body.data.id).toBe(leaf.leaseId);
    expect((await write(`${ns}/sys/leases/lookup`, { lease_id: leaf.leaseId })).body.data.id).toBe(leaf.leaseId);
    await write("sys/leases/lookup", { lease_id: leaf.leaseId }, {}, 400);
    await write("sys/leases/lookup", { lease_id: leaf.leaseId }, { token: otherToken, namespace: other }, 400);
    await write("sys/leases/lookup", { lease_id: leaf.leaseId }, { token: otherToken, namespace: ns }, 403);
    await list("sys/leases/lookup/pki/", {}, 404);

    // A revoke from elsewhere is a 204 that does nothing; from the namespace it revokes.
    expect((await api("PUT", "sys/leases/revoke", { body: { lease_id: leaf.leaseId }, token: otherToken, namespace: other })).status).toBe(204);
    expect((await api("PUT", "sys/leases/revoke-prefix/pki/", { token: otherToken, namespace: other })).status).toBe(204);
    expect((await api("PUT", "sys/leases/revoke", { body: { lease_id: leaf.leaseId }, token: otherToken, namespace: ns })).status).toBe(403);
    expect((await read(`${ns}/pki/cert/${leaf.serial}`, { token: null })).body.data.revocation_time).toBe(0);
    expect((await api("PUT", "sys/leases/revoke", { body: { lease_id: leaf.leaseId }, token: teamToken, namespace: ns })).status).toBe(204);
    expect((await read(`${ns}/pki/cert/${leaf.serial}`, { token: null })).body.data.revocation_time).toBeGreaterThan(0);
    expect(await crlSerials("pki", ns)).toContain(leaf.serial);
  });
});
