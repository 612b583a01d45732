/**
 * What Vault clients (the CLI, Terraform's provider, hvac, node-vault, cert-manager)
 * ask of sys/ first — headers, mount tune the way Vault does it, single-mount reads and the
 * unauthenticated status paths (Vault API: /sys/health, /sys/seal-status, /sys/leader, /sys/mounts).
 */
import { SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, mount, read, write } from "../helpers/api";

const uid = () => crypto.randomUUID().slice(0, 6);

describe("Vault request headers", () => {
  it("accepts and ignores X-Vault-Request, X-Vault-Index and X-Vault-Inconsistent", async () => {
    const r = await api("GET", "sys/mounts", {
      headers: { "X-Vault-Request": "true", "X-Vault-Index": "AAAA", "X-Vault-Inconsistent": "forward-active-node" },
    });
    expect(r.status).toBe(200);
  });

  it("answers 400 with a clear message when a wrapped response is asked for", async () => {
    const r = await api("GET", "sys/mounts", { headers: { "X-Vault-Wrap-TTL": "5m" } });
    expect(r.status).toBe(400);
    expect(r.body.errors[0]).toMatch(/does not wrap responses/);
    expect((await api("GET", "sys/mounts", { headers: { "X-Vault-Wrap-TTL": "300" } })).status).toBe(400);
    const bad = await api("GET", "sys/mounts", { headers: { "X-Vault-Wrap-TTL": "soon" } });
    expect(bad.status).toBe(400);
    expect(bad.body.errors[0]).toMatch(/^error parsing X-Vault-Wrap-TTL header/);
    expect((await api("GET", "sys/mounts", { headers: { "X-Vault-Wrap-TTL": "-5" } })).body.errors).toEqual(["requested wrap ttl cannot be negative"]);
    // Vault treats an empty or zero TTL as "no wrapping".
    expect((await api("GET", "sys/mounts", { headers: { "X-Vault-Wrap-TTL": "0" } })).status).toBe(200);
  });

  it("checks the token before the wrap header", async () => {
    expect((await api("GET", "sys/mounts", { token: null, headers: { "X-Vault-Wrap-TTL": "5m" } })).status).toBe(403);
  });
});

describe("mount tune, as Vault does it", () => {
  it("lets a mount's max lease TTL exceed the system default (Vault's PKI tutorial)", async () => {
    const pki = await mount("pki");
    await write(`sys/mounts/${pki}/tune`, { max_lease_ttl: "87600h" }, {}, 204);
    const tune = await read(`sys/mounts/${pki}/tune`);
    expect(tune.body.data.max_lease_ttl).toBe(87600 * 3600);
    const root = await write(`${pki}/root/generate/internal`, { common_name: "example.com", ttl: "87600h" });
    const notAfter = new Date(root.body.data.expiration * 1000).getTime();
    expect(notAfter - Date.now()).toBeGreaterThan(87000 * 3600 * 1000);
  });

  it("accepts the header lists Vault's ACME guide tunes on a PKI mount, without a warning", async () => {
    const pki = await mount("pki");
    // 204: no "unrecognized parameters" warning (that answer would be 200 with warnings).
    await write(
      `sys/mounts/${pki}/tune`,
      { allowed_response_headers: ["Last-Modified", "Location", "Replay-Nonce", "Link"], passthrough_request_headers: "If-Modified-Since" },
      {},
      204,
    );
  });

  it("compares default and max only when both are set, with Vault's message", async () => {
    const kv = await mount("kv");
    // A default above the system max with the max left at "system": Vault does not compare.
    await write(`sys/mounts/${kv}/tune`, { default_lease_ttl: "1000h" }, {}, 204);
    await write(`sys/mounts/${kv}/tune`, { default_lease_ttl: "system" }, {}, 204);
    await write(`sys/mounts/${kv}/tune`, { max_lease_ttl: "2h" }, {}, 204);
    const r = await write(`sys/mounts/${kv}/tune`, { default_lease_ttl: "3h" }, {}, 400);
    expect(r.body.errors).toEqual(["backend max lease TTL of 7200 would be less than backend default lease TTL of 10800"]);
    const both = await write(`sys/mounts/${kv}/tune`, { default_lease_ttl: "5h", max_lease_ttl: "4h" }, {}, 400);
    expect(both.body.errors[0]).toBe("backend max lease TTL of 14400 would be less than backend default lease TTL of 18000");
    expect((await write(`sys/mounts/${kv}/tune`, { max_lease_ttl: "soon" }, {}, 400)).body.errors[0]).toMatch(/^unable to parse max TTL of soon/);
  });

  it("enables a mount with a max above the system default, and uses Vault's enable messages", async () => {
    const p = `t${uid()}`;
    await write(`sys/mounts/${p}`, { type: "kv", config: { max_lease_ttl: "10000h" } }, {}, 204);
    expect((await read(`sys/mounts/${p}/tune`)).body.data.max_lease_ttl).toBe(36_000_000);
    const r = await write(`sys/mounts/x${uid()}`, { type: "kv", config: { default_lease_ttl: "2h", max_lease_ttl: "1h" } }, {}, 400);
    expect(r.body.errors).toEqual(["given default lease TTL greater than given max lease TTL"]);
    const s = await write(`sys/mounts/x${uid()}`, { type: "kv", config: { default_lease_ttl: "1000h" } }, {}, 400);
    expect(s.body.errors).toEqual(["given default lease TTL greater than system max lease TTL of 2764800"]);
  });
});

describe("GET sys/mounts/:path", () => {
  it("reads one mount by longest prefix, also at the top level", async () => {
    const kv = await mount("kv");
    const r = await read(`sys/mounts/${kv}/some/deeper/path`);
    expect(r.body.data).toMatchObject({ type: "kv", options: { version: "2" }, config: { default_lease_ttl: 2764800, max_lease_ttl: 2764800 } });
    expect(r.body.type).toBe("kv");
    expect(r.body.data.accessor).toMatch(/^kv_[0-9a-f]{8}$/);
  });

  it("answers 400 as Vault does when nothing is mounted there", async () => {
    const r = await read(`sys/mounts/none${uid()}`, {}, 400);
    expect(r.body.errors[0]).toMatch(/^No secret engine mount at none\w+\/$/);
  });
});

describe("sys/health", () => {
  it("has Vault's fields, without a token", async () => {
    const r = await api("GET", "sys/health", { token: null });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      initialized: true,
      sealed: false,
      standby: false,
      performance_standby: false,
      replication_performance_mode: "disabled",
      replication_dr_mode: "disabled",
      enterprise: false,
    });
    expect(r.body.version).toMatch(/^\d+\.\d+\.\d+\+lanyard$/);
    expect(typeof r.body.server_time_utc).toBe("number");
    expect(typeof r.body.cluster_name).toBe("string");
    expect(typeof r.body.cluster_id).toBe("string");
  });

  it("takes Vault's status-code parameters", async () => {
    expect((await api("GET", "sys/health?activecode=299&standbyok=true&perfstandbyok=true", { token: null })).status).toBe(299);
    // What Vault's Go client adds: every code 299, and the active node still answers activecode.
    const go = "uninitcode=299&sealedcode=299&standbycode=299&drsecondarycode=299&performancestandbycode=299&removedcode=299&haunhealthycode=299";
    expect((await api("GET", `sys/health?${go}`, { token: null })).status).toBe(200);
    const bad = await api("GET", "sys/health?activecode=abc", { token: null });
    expect(bad.status).toBe(400);
    // Vault answers {"errors":[]}; the contract wants the field named.
    expect(bad.body).toEqual({ errors: ["activecode: must be an integer status code"] });
    const badBool = await api("GET", "sys/health?standbyok=maybe", { token: null });
    expect(badBool.status).toBe(400);
    expect(badBool.body).toEqual({ errors: ["standbyok: must be a boolean"] });
  });

  it("answers HEAD with the status and no body", async () => {
    const r = await SELF.fetch("http://x/v1/sys/health?activecode=204", { method: "HEAD" });
    expect(r.status).toBe(204);
    expect(await r.text()).toBe("");
  });
});

describe("sys/seal-status and sys/leader", () => {
  it("seal-status is raw JSON with a semver version Terraform's provider can parse", async () => {
    const r = await api("GET", "sys/seal-status", { token: null });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ type: "shamir", initialized: true, sealed: false, t: 1, n: 1, progress: 0, migration: false, recovery_seal: false });
    // hashicorp/go-version's NewSemver: MAJOR.MINOR.PATCH with optional build metadata.
    expect(r.body.version).toMatch(/^\d+\.\d+\.\d+(\+[0-9A-Za-z.-]+)?$/);
    expect(typeof r.body.cluster_name).toBe("string");
    expect(r.body.request_id).toBeUndefined(); // no envelope
  });

  it("leader says HA is off", async () => {
    const r = await api("GET", "sys/leader", { token: null });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ ha_enabled: false, is_self: false, leader_address: "", active_time: "0001-01-01T00:00:00Z" });
  });

  it("other verbs are 405", async () => {
    expect((await api("POST", "sys/seal-status", { token: null, body: {} })).status).toBe(405);
    expect((await api("DELETE", "sys/leader", { token: null })).status).toBe(405);
  });
});
