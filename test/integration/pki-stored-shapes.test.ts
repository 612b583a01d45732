/**
 * Rows written before a field existed (stored roles and issuers are read through a
 * decoder that fills defaults). The rows are written straight to D1, as an older Lanyard would
 * have left them, and then read, patched and issued from through the API.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { api, list, patch, read, write } from "../helpers/api";
import { expectSignedBy, parseCert, pkiWithRoot, sans } from "../helpers/pki";

let path = "";
let root = "";
let issuerId = "";
let mountId = "";

/**
 * A role as stored before cn_validations, allowed_user_ids, no_store_metadata, policy_identifiers,
 * not_before/not_after(_bound), use_pss, signature_bits and the identity-template flags were
 * added, with a key ("allow_base_domain", Vault's old name for allow_bare_domains) that is no
 * longer known.
 */
const OLD_ROLE = {
  allow_any_name: false,
  allow_bare_domains: false,
  allow_glob_domains: false,
  allow_ip_sans: true,
  allow_localhost: true,
  allow_subdomains: true,
  allow_wildcard_certificates: true,
  allowed_domains: ["example.com"],
  allowed_other_sans: [],
  allowed_uri_sans: [],
  client_flag: true,
  code_signing_flag: false,
  email_protection_flag: false,
  enforce_hostnames: true,
  ext_key_usage: [],
  generate_lease: false,
  issuer_ref: "default",
  key_bits: 256,
  key_type: "ec",
  key_usage: ["DigitalSignature", "KeyAgreement", "KeyEncipherment"],
  max_ttl: 0,
  no_store: false,
  require_cn: true,
  server_flag: true,
  ttl: 3600,
  use_csr_common_name: true,
  use_csr_sans: true,
  allow_base_domain: true,
};

async function putRawRole(name: string, data: unknown): Promise<void> {
  await env.DB.prepare("INSERT OR REPLACE INTO pki_roles (mount_id, name, data, updated_at) VALUES (?, ?, ?, ?)")
    .bind(mountId, name, JSON.stringify(data), Date.now())
    .run();
}

async function rawRole(name: string): Promise<Record<string, unknown>> {
  const row = await env.DB.prepare("SELECT data FROM pki_roles WHERE mount_id = ? AND name = ?").bind(mountId, name).first<{ data: string }>();
  return JSON.parse(row?.data ?? "null") as Record<string, unknown>;
}

beforeAll(async () => {
  ({ path, root, issuerId } = await pkiWithRoot());
  const mounts = await read("sys/mounts");
  mountId = mounts.body.data[`${path}/`].uuid as string;
  await putRawRole("old", OLD_ROLE);
});

describe("a role stored before later fields existed", () => {
  it("reads back with the defaults of the missing fields and without the unknown key", async () => {
    const r = await read(`${path}/roles/old`);
    const { allow_base_domain: _dropped, ...known } = OLD_ROLE;
    // The defaults of a role written with {} today (pki-roles.test.ts DEFAULT_ROLE), under the stored values.
    const defaults = (await write(`${path}/roles/fresh`, {})).body.data as Record<string, unknown>;
    // signature_bits as buildRole resolves it for an ec role: no hash size of its own.
    expect(r.body.data).toEqual({ ...defaults, ...known, signature_bits: 0 });
    expect(r.body.data).not.toHaveProperty("allow_base_domain");
    expect(r.body.data.cn_validations).toEqual(["email", "hostname"]);
    expect(r.body.data.not_after_bound).toBe("permit");
    expect(r.body.data.not_before_duration).toBe(30);
    expect(r.body.data.policy_identifiers).toEqual([]);
  });

  it("issues with it (the hot path decodes the role too)", async () => {
    const r = await write(`${path}/issue/old`, { common_name: "www.example.com", alt_names: "api.example.com" });
    const cert = parseCert(r.body.data.certificate as string);
    expect(cert.subject).toBe("CN=www.example.com");
    expect(sans(cert).sort()).toEqual(["dns:api.example.com", "dns:www.example.com"]);
    expect(r.body.data.private_key_type).toBe("ec");
    await expectSignedBy(r.body.data.certificate as string, root);
    // The stored ttl (1h) still applies.
    expect(cert.notAfter.getTime() - Date.now()).toBeLessThanOrEqual(3600_000);
    // The stored allowed_domains still limits names.
    const refused = await write(`${path}/issue/old`, { common_name: "www.other.org" }, {}, 400);
    expect(refused.body.errors.join(" ")).toContain("www.other.org");
  });

  it("is listed, and a PATCH writes it back in the current shape", async () => {
    const l = await list(`${path}/roles`);
    expect(l.body.data.keys).toContain("old");
    await patch(`${path}/roles/old`, { ttl: "2h" });
    const stored = await rawRole("old");
    expect(stored.ttl).toBe(7200);
    expect(stored.cn_validations).toEqual(["email", "hostname"]);
    expect(stored.allowed_domains).toEqual(["example.com"]);
    expect(stored).not.toHaveProperty("allow_base_domain");
  });

  it("a stored field of the wrong type is an error, not a silent default", async () => {
    await putRawRole("corrupt", { ...OLD_ROLE, allow_any_name: "yes" });
    const r = await api("GET", `${path}/roles/corrupt`);
    expect(r.status).toBe(500);
    const issued = await api("POST", `${path}/issue/corrupt`, { body: { common_name: "www.example.com" } });
    expect(issued.status).toBe(500);
  });
});

describe("an issuer stored before later fields existed", () => {
  it("an AIA entry without enable_aia_url_templating reads as false, and issuance uses its URLs", async () => {
    const aia = { issuing_certificates: ["http://ca.example.com/ca"], crl_distribution_points: [], delta_crl_distribution_points: [], ocsp_servers: [] };
    await env.DB.prepare("UPDATE pki_issuers SET aia = ? WHERE mount_id = ? AND id = ?").bind(JSON.stringify(aia), mountId, issuerId).run();
    const r = await read(`${path}/issuer/${issuerId}`);
    expect(r.body.data.enable_aia_url_templating).toBe(false);
    expect(r.body.data.issuing_certificates).toEqual(["http://ca.example.com/ca"]);
    const issued = await write(`${path}/issue/old`, { common_name: "aia.example.com" });
    expect(issued.body.data.certificate as string).toMatch(/^-----BEGIN CERTIFICATE-----/);
  });
});
