/**
 * node-vault (the npm package, pinned, unmodified) through the first day of Vault's tutorials
 * against the e2e Worker. The client is configured as its README says, with the one documented
 * list switch `noCustomHTTPVerbs: true` (lists go as `GET ?list=1`, since the Workers front end
 * answers the LIST verb with 501 before any code runs).
 * Each step is one test; they run in order and share what earlier steps made, as a user would.
 * Where node-vault has a named command (tokenCreate, addPolicy, mount, …) the step uses it; the
 * rest goes through its generic read/write/update/list/delete.
 */
import createVault from "node-vault";
import { describe, expect, inject, it } from "vitest";
import { openssl, opensslCsr, verify, withFiles, x509Field } from "../helpers/openssl";
import { BODIES } from "../helpers/sync-bodies";
import { E2E_ROOT_TOKEN } from "./env";

const RUN = crypto.randomUUID().slice(0, 8);
const KV = `kv-nv-${RUN}`;
const PKI = `pki-nv-${RUN}`;
const NS = `team-nv-${RUN}`;
const POLICY_ACL = `nv-acl-${RUN}`;
const POLICY_LEGACY = `nv-legacy-${RUN}`;
const DEST = `nv-${RUN}`;
const VALUE = `k1-${RUN}`;
const RULES = `path "${KV}/data/app/*" {\n  capabilities = ["read"]\n}\n`;

/** A node-vault client as its README configures one, plus the list switch. */
function nv(token: string = E2E_ROOT_TOKEN, namespace?: string) {
  return createVault({ apiVersion: "v1", endpoint: inject("baseUrl"), token, namespace, noCustomHTTPVerbs: true });
}

/** node-vault rejects non-2xx answers with an ApiResponseError carrying the status. */
async function status(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (e) {
    const code = (e as { response?: { statusCode?: number } }).response?.statusCode;
    if (code === undefined) throw e;
    return code;
  }
}

const serialHex = (s: string) => s.replace(/[:-]/g, "").toUpperCase().replace(/^0+/, "");

async function fakeState(name: "CLOUDONE_ENDPOINT"): Promise<string> {
  const res = await fetch(`${inject("fakeEndpoints")[name]}/__fake/state`);
  return res.text();
}

async function until(what: string, cond: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

const root = () => nv();
const s: { child?: ReturnType<typeof nv>; childToken?: string; accessor?: string; root?: string; issued?: string; signed?: string } = {};

describe("node-vault 0.12.0 (unmodified, noCustomHTTPVerbs: true)", () => {
  describe("tokens", () => {
    it("token.create", async () => {
      const c = nv();
      const r = await c.tokenCreate({ policies: ["default"], ttl: "1h", display_name: "node-vault", renewable: true });
      expect(r.auth.lease_duration).toBe(3600);
      expect(r.auth.renewable).toBe(true);
      expect(r.auth.policies).toContain("default");
      // node-vault switches the client to the token it created (tokenSource): that client is now the child.
      expect(c.token).toBe(r.auth.client_token);
      Object.assign(s, { child: c, childToken: r.auth.client_token, accessor: r.auth.accessor });
    });

    it("token.lookup_self", async () => {
      const d = (await s.child!.tokenLookupSelf()).data;
      expect(d.id).toBe(s.childToken);
      expect(d.accessor).toBe(s.accessor);
      expect(d.ttl).toBeGreaterThan(0);
      expect(d.ttl).toBeLessThanOrEqual(3600);
      expect(d.display_name).toBe("token-node-vault");
    });

    it("token.lookup", async () => {
      const d = (await root().tokenLookup({ token: s.childToken })).data;
      expect(d.accessor).toBe(s.accessor);
    });

    it("token.lookup_accessor", async () => {
      const d = (await root().tokenLookupAccessor({ accessor: s.accessor })).data;
      expect(d.accessor).toBe(s.accessor);
      expect(d.id ?? "").toBe("");
    });

    it("token.renew", async () => {
      const a = (await root().tokenRenew({ token: s.childToken, increment: "30m" })).auth;
      expect(a.client_token).toBe(s.childToken);
      expect(a.lease_duration).toBeGreaterThan(0);
      expect(a.lease_duration).toBeLessThanOrEqual(3600);
    });

    it("token.renew_self", async () => {
      const a = (await s.child!.tokenRenewSelf({ increment: "1h" })).auth;
      expect(a.lease_duration).toBeGreaterThan(0);
      expect(a.lease_duration).toBeLessThanOrEqual(3600);
    });

    it("token.revoke", async () => {
      await root().tokenRevoke({ token: s.childToken });
      expect(await status(nv(s.childToken).tokenLookupSelf())).toBe(403);
    });
  });

  describe("KV version 2", () => {
    const kv = root;
    it("kv.mount", async () => {
      await kv().mount({ mount_point: KV, type: "kv", options: { version: "2" } });
      const m = (await kv().mounts()).data[`${KV}/`];
      expect(m).toMatchObject({ type: "kv", options: { version: "2" } });
    });

    it("kv.write", async () => {
      const v1 = await kv().write(`${KV}/data/app/db`, { data: { user: "app", pass: "p1" } });
      const v2 = await kv().write(`${KV}/data/app/db`, { data: { user: "app", pass: "p2" } });
      expect([v1.data.version, v2.data.version]).toEqual([1, 2]);
    });

    it("kv.read", async () => {
      const r = (await kv().read(`${KV}/data/app/db`)).data;
      expect(r.data).toEqual({ user: "app", pass: "p2" });
      expect(r.metadata.version).toBe(2);
      expect((await kv().read(`${KV}/data/app/db?version=1`)).data.data.pass).toBe("p1");
    });

    it("kv.patch", async () => {
      // node-vault's update() is a JSON merge patch (Content-Type application/merge-patch+json).
      const r = await kv().update(`${KV}/data/app/db`, { data: { pass: "p3" } });
      expect(r.data.version).toBe(3);
      expect((await kv().read(`${KV}/data/app/db`)).data.data).toEqual({ user: "app", pass: "p3" });
    });

    it("kv.list", async () => {
      await kv().write(`${KV}/data/app/api`, { data: { key: "k" } });
      expect((await kv().list(`${KV}/metadata/`)).data.keys).toEqual(["app/"]);
      expect((await kv().list(`${KV}/metadata/app/`)).data.keys.sort()).toEqual(["api", "db"]);
    });

    it("kv.delete", async () => {
      await kv().delete(`${KV}/data/app/db`);
      expect(await status(kv().read(`${KV}/data/app/db`))).toBe(404);
      expect((await kv().read(`${KV}/metadata/app/db`)).data.versions["3"].deletion_time).not.toBe("");
    });

    it("kv.undelete", async () => {
      await kv().write(`${KV}/undelete/app/db`, { versions: [3] });
      expect((await kv().read(`${KV}/data/app/db`)).data.data.pass).toBe("p3");
    });

    it("kv.destroy", async () => {
      await kv().destroySecretVersions({ mount_point: KV, path: "app/db", versions: [1] });
      expect(await status(kv().read(`${KV}/data/app/db?version=1`))).toBe(404);
    });

    it("kv.metadata", async () => {
      await kv().write(`${KV}/metadata/app/db`, { max_versions: 5, custom_metadata: { team: "node-vault" } });
      const m = (await kv().read(`${KV}/metadata/app/db`)).data;
      expect(m).toMatchObject({ current_version: 3, max_versions: 5, custom_metadata: { team: "node-vault" } });
      expect(m.versions["1"].destroyed).toBe(true);
      expect(m.versions["3"].deletion_time).toBe("");
      await kv().delete(`${KV}/metadata/app/api`);
      expect((await kv().list(`${KV}/metadata/app/`)).data.keys).toEqual(["db"]);
    });
  });

  describe("PKI (Vault's PKI tutorial)", () => {
    const v = root;
    it("pki.mount", async () => {
      await v().mount({ mount_point: PKI, type: "pki" });
      expect((await v().mounts()).data[`${PKI}/`].type).toBe("pki");
    });

    it("pki.tune", async () => {
      await v().write(`sys/mounts/${PKI}/tune`, { max_lease_ttl: "87600h" });
      expect((await v().read(`sys/mounts/${PKI}/tune`)).data.max_lease_ttl).toBe(87600 * 3600);
    });

    it("pki.root_generate", async () => {
      const d = (await v().write(`${PKI}/root/generate/internal`, { common_name: "example.com", ttl: "87600h", issuer_name: "root-2024" })).data;
      expect(d.certificate).toMatch(/^-----BEGIN CERTIFICATE-----/);
      // The spec's certificate response gives expiration as Unix seconds in a decimal string.
      expect(d.expiration).toMatch(/^\d+$/);
      expect((Number(d.expiration) * 1000 - Date.now()) / (365.25 * 86_400_000)).toBeGreaterThan(9.9);
      s.root = d.certificate;
      expect(String(await v().read(`${PKI}/ca/pem`)).trim()).toBe(d.certificate.trim());
    });

    it("pki.config_urls", async () => {
      const base = inject("baseUrl");
      const urls = { issuing_certificates: `${base}/v1/${PKI}/ca`, crl_distribution_points: `${base}/v1/${PKI}/crl` };
      await v().write(`${PKI}/config/urls`, urls);
      expect((await v().read(`${PKI}/config/urls`)).data).toMatchObject({ issuing_certificates: [urls.issuing_certificates], crl_distribution_points: [urls.crl_distribution_points] });
    });

    it("pki.role", async () => {
      await v().write(`${PKI}/roles/example-dot-com`, { allowed_domains: "example.com", allow_subdomains: true, max_ttl: "72h" });
      expect((await v().read(`${PKI}/roles/example-dot-com`)).data).toMatchObject({ allowed_domains: ["example.com"], allow_subdomains: true, max_ttl: 72 * 3600 });
      expect((await v().list(`${PKI}/roles`)).data.keys).toEqual(["example-dot-com"]);
    });

    it("pki.issue", async () => {
      const d = (await v().write(`${PKI}/issue/example-dot-com`, { common_name: "test.example.com", ttl: "24h" })).data;
      expect(d.private_key).toMatch(/PRIVATE KEY/);
      const r = await verify(d.certificate, s.root!);
      expect(r.ok, r.output).toBe(true);
      expect(await x509Field(d.certificate, "-subject")).toContain("test.example.com");
      s.issued = d.serial_number;
    });

    it("pki.sign", async () => {
      // The role's key_type is Vault's default, rsa (2048 bits): the CSR must match it.
      const { key, csr } = await opensslCsr("/CN=signed.example.com", "rsa");
      const d = (await v().write(`${PKI}/sign/example-dot-com`, { csr, common_name: "signed.example.com", ttl: "24h" })).data;
      expect(d.private_key).toBeUndefined();
      const same = await withFiles({ "k.pem": key, "c.pem": d.certificate }, async (p) => {
        const a = await openssl(["pkey", "-in", p("k.pem"), "-pubout"]);
        const b = await openssl(["x509", "-in", p("c.pem"), "-noout", "-pubkey"]);
        return a.code === 0 && a.stdout.trim() === b.stdout.trim();
      });
      expect(same, "the signed certificate carries the CSR's key").toBe(true);
      s.signed = d.serial_number;
    });

    it("pki.revoke", async () => {
      const d = (await v().write(`${PKI}/revoke`, { serial_number: s.issued })).data;
      expect(d.revocation_time).toBeGreaterThan(0);
    });

    it("pki.crl", async () => {
      const crl = String(await v().read(`${PKI}/crl/pem`));
      expect(crl).toMatch(/^-----BEGIN X509 CRL-----/);
      const text = await withFiles({ "crl.pem": crl, "root.pem": s.root! }, async (p) => {
        const r = await openssl(["crl", "-in", p("crl.pem"), "-CAfile", p("root.pem"), "-noout", "-text"]);
        expect(r.code, r.stderr).toBe(0);
        return r.stdout;
      });
      const serials = [...text.matchAll(/Serial Number: ([0-9A-Fa-f]+)/g)].map((m) => serialHex(m[1]!));
      expect(serials).toContain(serialHex(s.issued!));
      expect(serials).not.toContain(serialHex(s.signed!));
    });

    it("pki.lease", async () => {
      // A generate_lease role: each issue answer carries a lease; node-vault's revoke uses
      // sys/leases/revoke, its revokePrefix Vault's legacy sys/revoke-prefix/:prefix.
      await v().write(`${PKI}/roles/leased`, { allowed_domains: "example.com", allow_subdomains: true, generate_lease: true });
      const issue = () => v().write(`${PKI}/issue/leased`, { common_name: "lease.example.com", ttl: "1h" });
      const [a, b] = [await issue(), await issue()];
      expect(a.lease_id).toMatch(new RegExp(`^${PKI}/issue/leased/[0-9A-Za-z]{24}$`));
      expect(a.lease_duration).toBeGreaterThan(0);
      expect(a.renewable).toBe(false);
      const d = (await v().write("sys/leases/lookup", { lease_id: a.lease_id })).data;
      expect(d).toMatchObject({ id: a.lease_id, renewable: false, last_renewal: null });
      expect(await status(v().renew({ lease_id: a.lease_id }))).toBe(400);
      await v().revoke({ lease_id: a.lease_id });
      await v().revokePrefix({ path_prefix: `${PKI}/issue/leased` });
      for (const r of [a, b]) expect((await v().read(`${PKI}/cert/${r.data.serial_number}`)).data.revocation_time).toBeGreaterThan(0);
      expect(await status(v().write("sys/leases/lookup", { lease_id: b.lease_id }))).toBe(400);
    });
  });

  describe("policies, both path families", () => {
    const v = root;
    it("policy.acl_write", async () => {
      await v().write(`sys/policies/acl/${POLICY_ACL}`, { policy: RULES });
    });

    it("policy.acl_read", async () => {
      expect((await v().read(`sys/policies/acl/${POLICY_ACL}`)).data).toMatchObject({ name: POLICY_ACL, policy: RULES });
    });

    it("policy.acl_list", async () => {
      expect((await v().list("sys/policies/acl")).data.keys).toEqual(expect.arrayContaining([POLICY_ACL, "default"]));
    });

    it("policy.legacy_write", async () => {
      // node-vault sends {"name", "rules"} to PUT sys/policy/:name.
      await v().addPolicy({ name: POLICY_LEGACY, rules: RULES });
    });

    it("policy.legacy_read", async () => {
      expect((await v().getPolicy({ name: POLICY_LEGACY })).data.rules).toBe(RULES);
      // One store for both families.
      expect((await v().getPolicy({ name: POLICY_ACL })).data.rules).toBe(RULES);
      expect((await v().read(`sys/policies/acl/${POLICY_LEGACY}`)).data.policy).toBe(RULES);
    });

    it("policy.legacy_list", async () => {
      const d = (await v().policies()).data;
      expect(d.policies).toEqual(expect.arrayContaining([POLICY_LEGACY, POLICY_ACL, "root", "default"]));
      expect([...d.keys].sort()).toEqual([...d.policies].sort());
    });

    it("policy.enforced", async () => {
      await v().write(`${KV}/data/app/db`, { data: { user: "app", pass: "p4" } });
      const limited = nv();
      await limited.tokenCreate({ policies: [POLICY_LEGACY], ttl: "10m" });
      expect((await limited.read(`${KV}/data/app/db`)).data.data.pass).toBe("p4");
      expect(await status(limited.write(`${KV}/data/app/db`, { data: { x: "y" } }))).toBe(403);
      await v().tokenRevoke({ token: limited.token });
    });

    it("policy.delete", async () => {
      await v().removePolicy({ name: POLICY_LEGACY });
      await v().delete(`sys/policies/acl/${POLICY_ACL}`);
      expect(await status(v().getPolicy({ name: POLICY_LEGACY }))).toBe(404);
      expect((await v().policies()).data.policies).not.toContain(POLICY_ACL);
    });
  });

  describe("namespaces through the client's namespace option", () => {
    const v = root;
    const ns = () => nv(E2E_ROOT_TOKEN, NS);
    it("ns.create", async () => {
      await v().write(`sys/namespaces/${NS}`, {});
      expect((await v().list("sys/namespaces")).data.keys).toContain(`${NS}/`);
    });

    it("ns.mount", async () => {
      await ns().mount({ mount_point: "secret", type: "kv", options: { version: "2" } });
      expect(Object.keys((await ns().mounts()).data)).toContain("secret/");
    });

    it("ns.kv_write_read", async () => {
      await ns().write("secret/data/team", { data: { owner: NS } });
      expect((await ns().read("secret/data/team")).data.data).toEqual({ owner: NS });
    });

    it("ns.not_in_root", async () => {
      // The root namespace sees it only under the namespace's path prefix.
      expect((await v().read(`${NS}/secret/data/team`)).data.data).toEqual({ owner: NS });
      const rootMounts = (await v().mounts()).data;
      if (rootMounts["secret/"]) expect(await status(v().read("secret/data/team"))).toBe(404);
      expect(rootMounts[`${NS}/secret/`]).toBeUndefined();
    });

    it("ns.delete", async () => {
      await ns().unmount({ mount_point: "secret" });
      await v().delete(`sys/namespaces/${NS}`);
      const listed = await v()
        .list("sys/namespaces")
        .then((r) => r.data.keys as string[])
        .catch(() => []);
      expect(listed).not.toContain(`${NS}/`);
    });
  });

  describe("secrets sync against the fake secrets manager (Vault's aws-sm type)", () => {
    const v = root;
    it("sync.activate", async () => {
      await v().write("sys/activation-flags/secrets-sync/activate", {});
      await v().write("sys/activation-flags/secrets-sync/activate", {});
      expect((await v().read("sys/activation-flags")).data.activated).toContain("secrets-sync");
    });

    it("sync.config", async () => {
      expect((await v().update("sys/sync/config", { disabled: false })).data.disabled).toBe(false);
      const d = (await v().read("sys/sync/config")).data;
      expect(d.disabled).toBe(false);
      expect(d.queue_capacity).toBeGreaterThan(0);
    });

    it("sync.destination_create", async () => {
      await v().write(`sys/sync/destinations/aws-sm/${DEST}`, BODIES["cloudone-sm"]);
      const d = (await v().read(`sys/sync/destinations/aws-sm/${DEST}`)).data;
      expect(d.name).toBe(DEST);
      expect(["aws-sm", "cloudone-sm"]).toContain(d.type);
      expect(JSON.stringify(d)).not.toContain(BODIES["cloudone-sm"].secret_access_key);
      expect((await v().list("sys/sync/destinations/aws-sm")).data.keys).toContain(DEST);
    });

    it("sync.association_set", async () => {
      await v().write(`${KV}/data/syncapp`, { data: { api_key: VALUE } });
      await v().write(`sys/sync/destinations/aws-sm/${DEST}/associations/set`, { mount: KV, secret_name: "syncapp" });
      let statuses: string[] = [];
      await until("the association is SYNCED", async () => {
        const d = (await v().read(`sys/sync/destinations/aws-sm/${DEST}/associations`)).data;
        statuses = Object.values(d.associated_secrets as Record<string, { sync_status: string }>).map((e) => e.sync_status);
        return statuses.length > 0 && statuses.every((x) => x === "SYNCED");
      });
      expect(await fakeState("CLOUDONE_ENDPOINT")).toContain(VALUE);
    });

    it("sync.association_remove", async () => {
      await v().write(`sys/sync/destinations/aws-sm/${DEST}/associations/remove`, { mount: KV, secret_name: "syncapp" });
      await until("the fake no longer holds the value", async () => !(await fakeState("CLOUDONE_ENDPOINT")).includes(VALUE));
    });

    it("sync.destination_delete", async () => {
      await v().delete(`sys/sync/destinations/aws-sm/${DEST}`);
      expect(await status(v().read(`sys/sync/destinations/aws-sm/${DEST}`))).toBe(404);
    });
  });
});
