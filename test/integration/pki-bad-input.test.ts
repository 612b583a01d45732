/** Bad input anywhere answers 4xx with a reason, never 500. */
import { beforeAll, describe, expect, it } from "vitest";
import { api, mount, write } from "../helpers/api";
import { pkiWithRoot } from "../helpers/pki";

let path = "";
let rootPem = "";
beforeAll(async () => {
  ({ path, root: rootPem } = await pkiWithRoot());
  await write(`${path}/roles/r`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
});

const b64 = (s: string) => btoa(s);
const pem = (label: string, body: string) => `-----BEGIN ${label}-----\n${body}\n-----END ${label}-----`;
const junk = b64("x".repeat(120));

const CASES: [string, string, unknown][] = [
  ["POST", "issue/r", { common_name: ["a", "b"] }],
  ["POST", "issue/r", { common_name: "a.example", alt_names: [1, { x: 1 }] }],
  ["POST", "issue/r", { common_name: "a.example", ip_sans: "1.2.3" }],
  ["POST", "issue/r", { common_name: "a.example", ip_sans: 12 }],
  ["POST", "issue/r", { common_name: "a.example", ttl: -5 }],
  ["POST", "issue/r", { common_name: "a.example", ttl: "1d12h" }],
  ["POST", "issue/r", { common_name: "a.example", not_after: "9999-99-99T99:99:99Z" }],
  ["POST", "issue/r", { common_name: "a.example", other_sans: ";;;" }],
  ["POST", "issue/r", { common_name: "a.example", uri_sans: "not a uri" }],
  ["POST", "issue/r", { common_name: "a..example" }],
  ["POST", "issue/r", { common_name: `${"a".repeat(70)}.example` }],
  ["POST", "issue/r", { common_name: "a.example", format: 7 }],
  ["POST", "issue/r", { common_name: "a.example", remove_roots_from_chain: "perhaps" }],
  ["POST", "sign/r", { csr: pem("CERTIFICATE REQUEST", junk) }],
  ["POST", "sign/r", { csr: "-----BEGIN CERTIFICATE REQUEST-----\n@@@@\n-----END CERTIFICATE REQUEST-----" }],
  ["POST", "sign/r", { csr: rootPem }],
  ["POST", "sign/r", { csr: 42 }],
  ["POST", "roles/x", { key_bits: "many" }],
  ["POST", "roles/x", { key_bits: 99999999999 }],
  ["POST", "roles/x", { allowed_domains: { a: 1 } }],
  ["POST", "roles/x", { policy_identifiers: [{ oid: 5 }] }],
  ["POST", "roles/x", { policy_identifiers: "[not json" }],
  ["POST", "roles/x", { not_after: "soon" }],
  ["POST", "roles/x", { ttl: "1h", max_ttl: "30m" }],
  ["POST", "root/generate/internal", { key_type: "rsa", key_bits: 1024 }],
  ["POST", "root/generate/internal", { key_type: "ec", signature_bits: "x" }],
  ["POST", "root/generate/internal", { ip_sans: "999.0.0.1" }],
  ["POST", "root/generate/internal", { max_path_length: "deep" }],
  ["POST", "intermediate/generate/bogus", {}],
  ["POST", "issuers/import/bundle", { pem_bundle: pem("PRIVATE KEY", junk) }],
  ["POST", "issuers/import/bundle", { pem_bundle: pem("EC PRIVATE KEY", junk) }],
  ["POST", "issuers/import/bundle", { pem_bundle: pem("RSA PRIVATE KEY", junk) }],
  ["POST", "issuers/import/bundle", { pem_bundle: pem("CERTIFICATE", junk) }],
  ["POST", "issuers/import/bundle", { pem_bundle: pem("CERTIFICATE REQUEST", junk) }],
  ["POST", "issuers/import/bundle", { pem_bundle: 123 }],
  ["POST", "issuers/import/bundle", { pem_bundle: "a", certificate: "b" }],
  ["POST", "keys/import", { pem_bundle: pem("PRIVATE KEY", junk) }],
  ["POST", "keys/import", { pem_bundle: `${pem("PRIVATE KEY", junk)}\n${pem("PRIVATE KEY", junk)}` }],
  ["POST", "keys/import", { pem_bundle: rootPem }],
  ["POST", "keys/generate/exported", { key_type: "ec", key_bits: 225 }],
  ["POST", "key/default", { key_name: "default" }],
  ["POST", "config/keys", {}],
  ["POST", "config/issuers", { default: "" }],
  ["POST", "config/urls", { issuing_certificates: "ftp//nohost" }],
  ["POST", "config/urls", { enable_templating: "sometimes" }],
  ["POST", "issuer/default", { usage: "everything" }],
  ["PATCH", "issuer/default", { manual_chain: "self,ghost" }],
  ["PATCH", "issuer/default", { manual_chain: "ghost" }],
  ["PATCH", "issuer/default", { issuer_name: "bad name!" }],
  ["POST", "root/sign-intermediate", { csr: pem("CERTIFICATE REQUEST", junk), common_name: "x" }],
  ["POST", "root/sign-intermediate", { csr: "", common_name: "x" }],
  ["POST", "root/sign-intermediate", { csr: "x", skid: "zz" }],
  ["GET", "cert/zz:yy", undefined],
  ["GET", "cert/ab/raw/der", undefined],
];

describe("bad input never answers 500", () => {
  it.each(CASES)("%s %s %j", async (method, p, body) => {
    const r = await api(method, `${path}/${p}`, { body });
    expect(r.status, r.text).toBeGreaterThanOrEqual(400);
    expect(r.status, r.text).toBeLessThan(500);
    expect(r.body.errors, r.text).toBeDefined();
  });

  it("sign-intermediate with a bad skid names the field", async () => {
    const other = await mount("pki");
    const csr = await write(`${other}/intermediate/generate/internal`, { common_name: "I", key_type: "ec" });
    const r = await write(`${path}/root/sign-intermediate`, { csr: csr.body.data.csr, common_name: "I", ttl: "1h", skid: "xyz" }, {}, 400);
    expect(r.body.errors[0]).toContain("skid");
  });
});
