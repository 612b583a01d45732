/** Roles (Vault API /pki/roles/:name): defaults, overwrite vs merge, validation and warnings. */
import { beforeAll, describe, expect, it } from "vitest";
import { api, del, list, mount, patch, read, write } from "../helpers/api";

let path = "";
beforeAll(async () => {
  path = await mount("pki");
});

const DEFAULT_ROLE = {
  allow_any_name: false,
  allow_bare_domains: false,
  allow_glob_domains: false,
  allow_globs_in_identity_templates: false,
  allow_ip_sans: true,
  allow_localhost: true,
  allow_subdomains: false,
  allow_token_displayname: false,
  allow_wildcard_certificates: true,
  allowed_domains: [],
  allowed_domains_template: false,
  allowed_ip_sans_cidr: [],
  allowed_other_sans: [],
  allowed_serial_numbers: [],
  allowed_uri_sans: [],
  allowed_uri_sans_template: false,
  allowed_user_ids: [],
  basic_constraints_valid_for_non_ca: false,
  client_flag: true,
  cn_validations: ["email", "hostname"],
  code_signing_flag: false,
  country: [],
  email_protection_flag: false,
  enforce_hostnames: true,
  ext_key_usage: [],
  ext_key_usage_oids: [],
  generate_lease: false,
  issuer_ref: "default",
  key_bits: 2048,
  key_type: "rsa",
  key_usage: ["DigitalSignature", "KeyAgreement", "KeyEncipherment"],
  locality: [],
  max_ttl: 0,
  no_store: false,
  no_store_metadata: false,
  not_after: "",
  not_after_bound: "permit",
  not_before: "",
  not_before_bound: "permit",
  not_before_duration: 30,
  organization: [],
  ou: [],
  policy_identifiers: [],
  postal_code: [],
  province: [],
  require_cn: true,
  server_flag: true,
  signature_bits: 256,
  street_address: [],
  ttl: 0,
  use_csr_common_name: true,
  use_csr_sans: true,
  use_pss: false,
};

describe("roles", () => {
  it("a role written with {} reads back with every default", async () => {
    const w = await write(`${path}/roles/defaults`, {});
    expect(w.body.data).toEqual(DEFAULT_ROLE);
    // No issuer yet: the default issuer_ref is accepted with a warning.
    expect(w.body.warnings).toContain(
      "Issuing Certificate was set to default, but no default issuing certificate (configurable at /config/issuers) is currently set",
    );
    const r = await read(`${path}/roles/defaults`);
    expect(r.body.data).toEqual(DEFAULT_ROLE);
  });

  it("POST overwrites (omitted fields take defaults); PATCH merges", async () => {
    await write(`${path}/roles/ow`, { allowed_domains: "a.com,b.com", ttl: "1h", max_ttl: "2h", key_type: "ec" });
    let r = await read(`${path}/roles/ow`);
    expect(r.body.data).toMatchObject({ allowed_domains: ["a.com", "b.com"], ttl: 3600, max_ttl: 7200, key_type: "ec", key_bits: 256, signature_bits: 0 });
    await patch(`${path}/roles/ow`, { allow_subdomains: true });
    r = await read(`${path}/roles/ow`);
    expect(r.body.data).toMatchObject({ allowed_domains: ["a.com", "b.com"], allow_subdomains: true, ttl: 3600, key_type: "ec" });
    await write(`${path}/roles/ow`, { allow_subdomains: true });
    r = await read(`${path}/roles/ow`);
    expect(r.body.data).toMatchObject({ allowed_domains: [], ttl: 0, key_type: "rsa", allow_subdomains: true });
  });

  it("PATCH of a missing role is 400; GET is 404; DELETE is 204 either way", async () => {
    const p = await patch(`${path}/roles/nope`, { ttl: 1 }, {}, 400);
    expect(p.body.errors[0]).toBe("Unable to fetch role entry to patch");
    await read(`${path}/roles/nope`, {}, 404);
    await del(`${path}/roles/nope`);
    await write(`${path}/roles/gone`, {});
    await del(`${path}/roles/gone`);
    await read(`${path}/roles/gone`, {}, 404);
  });

  it("lists role names sorted, with after/limit, and 404 when none", async () => {
    const other = await mount("pki");
    await list(`${other}/roles`, {}, 404);
    for (const n of ["c", "a", "b"]) await write(`${other}/roles/${n}`, {});
    expect((await list(`${other}/roles`)).body.data.keys).toEqual(["a", "b", "c"]);
    expect((await list(`${other}/roles?after=a&limit=1`)).body.data.keys).toEqual(["b"]);
  });

  it("validates in upstream's order with messages naming the problem", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ allowed_other_sans: "1.2.3" }, "error parsing allowed_other_sans: expected a semicolon"],
      [{ allowed_other_sans: "1.2.3;UTF8" }, "expected a colon"],
      [{ allowed_other_sans: "1.2.3;IA5:x" }, "only utf8 other SANs are supported"],
      [{ allowed_ip_sans_cidr: "10.0.0.0/33" }, "error parsing allowed_ip_sans_cidr"],
      [{ not_after_bound: "sometimes" }, "Unknown value for field `not_after_bound`"],
      [{ not_before_bound: "x" }, "Unknown value for field `not_before_bound`"],
      [{ ttl: "2h", max_ttl: "1h" }, '"ttl" value must be less than "max_ttl" value'],
      [{ key_type: "rsa", key_bits: 1024 }, "RSA keys < 2048 bits are unsafe and not supported: got 1024"],
      [{ key_type: "rsa", key_bits: 2049 }, "unsupported bit length for RSA key: 2049"],
      [{ key_type: "ec", key_bits: 512 }, "unsupported bit length for EC key: 512"],
      [{ key_type: "dsa" }, "unknown key type dsa"],
      [{ key_type: "rsa", signature_bits: 128 }, "unsupported hash signature algorithm: 128"],
      [{ ext_key_usage_oids: "1.2.x" }, '"1.2.x" could not be parsed as a valid oid for an extended key usage'],
      [{ cn_validations: "disabled,email" }, "cannot specify `disabled` along with `email` or `hostname`"],
      [{ cn_validations: "email,email" }, "`email` specified multiple times"],
      [{ cn_validations: "phone" }, "unknown type: `phone`"],
      [{ policy_identifiers: "not-an-oid" }, "policy_identifiers"],
      [{ ttl: "soon" }, 'field "ttl"'],
    ];
    for (const [body, msg] of cases) {
      const r = await write(`${path}/roles/bad`, body, {}, 400);
      expect(r.body.errors[0], JSON.stringify(body)).toContain(msg);
    }
    await read(`${path}/roles/bad`, {}, 404);
  });

  it("normalises values and warns about leases", async () => {
    const w = await write(`${path}/roles/norm`, {
      key_type: "ed25519",
      key_bits: 4096,
      allowed_ip_sans_cidr: ["10.1.2.3/8", "2001:db8::1/32"],
      cn_validations: ["Email"],
      policy_identifiers: '[{"oid":"1.2.3.4","cps":"https://cps.example"}]',
      no_store: true,
      generate_lease: true,
      bogus: 1,
    });
    expect(w.body.data).toMatchObject({
      key_type: "ed25519",
      key_bits: 0,
      signature_bits: 0,
      allowed_ip_sans_cidr: ["10.0.0.0/8", "2001:db8::/32"],
      cn_validations: ["email"],
      policy_identifiers: [{ oid: "1.2.3.4", cps: "https://cps.example" }],
      no_store: true,
      generate_lease: false,
    });
    expect(w.body.warnings).toContain(
      "mutually exclusive values no_store=true and generate_lease=true were both specified; no_store=true takes priority",
    );
    expect(w.body.warnings).toContain("Endpoint ignored these unrecognized parameters: [bogus]");
    const lease = await write(`${path}/roles/lease`, { generate_lease: true });
    expect(lease.body.warnings.some((x: string) => x.startsWith("it is encouraged to disable generate_lease"))).toBe(true);
  });

  it("an unresolvable issuer_ref is accepted with a warning", async () => {
    const w = await write(`${path}/roles/ref`, { issuer_ref: "missing" });
    expect(w.body.warnings).toContain("Issuing Certificate was set to missing but no issuing certificate currently has that name");
  });

  it("names outside the generic-name pattern do not route (404)", async () => {
    expect((await api("GET", `${path}/roles/bad!`)).status).toBe(404);
  });
});
