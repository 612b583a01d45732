/**
 * The PKI defaults module and the stored-row decoders: the role request fields and
 * ROLE_DEFAULTS cannot drift apart, and a decoder fills what an old row lacks, drops what is no
 * longer known and refuses what has the wrong type.
 */
import { describe, expect, it } from "vitest";
import { ALL_USAGES, ROLE_DEFAULTS, type Role } from "../../src/engines/pki/defaults";
import { buildRole, defaultRole, roleFields, type RoleFieldValues } from "../../src/engines/pki/policy/roles";
import { StoredShapeError, decodeIssuer, decodeRole } from "../../src/engines/pki/storage/decode";
import type { IssuerRow } from "../../src/engines/pki/storage/store";

describe("ROLE_DEFAULTS", () => {
  it("is what buildRole stores for a request that sends no field", () => {
    const values: Record<string, unknown> = {};
    for (const [k, def] of Object.entries(roleFields)) if ("default" in def) values[k] = structuredClone(def.default);
    expect(buildRole(values as Omit<RoleFieldValues, "name">).role).toEqual(ROLE_DEFAULTS);
  });

  it("defaultRole is a copy, so a caller's change does not reach the defaults", () => {
    const r = defaultRole();
    r.allowed_domains.push("example.com");
    expect(ROLE_DEFAULTS.allowed_domains).toEqual([]);
    expect(roleFields.allowed_domains.default).toEqual([]);
  });
});

describe("decodeRole", () => {
  it("fills fields the stored role lacks, keeps the ones it has, drops unknown keys", () => {
    const role = decodeRole({ allowed_domains: ["example.com"], allow_subdomains: true, key_type: "rsa", key_bits: 4096, signature_bits: 384, gone: 1 });
    expect(role).toEqual({ ...ROLE_DEFAULTS, allowed_domains: ["example.com"], allow_subdomains: true, key_bits: 4096, signature_bits: 384 });
    expect(role).not.toHaveProperty("gone");
  });

  it("resolves missing key sizes for the stored key type, as buildRole does", () => {
    expect(decodeRole({ key_type: "ec" })).toMatchObject({ key_type: "ec", key_bits: 256, signature_bits: 0 });
    expect(decodeRole({ key_type: "ec", key_bits: 384 })).toMatchObject({ key_bits: 384, signature_bits: 0 });
    expect(decodeRole({ key_type: "ed25519", key_bits: 0 })).toMatchObject({ key_bits: 0, signature_bits: 0 });
  });

  it("does not share arrays with ROLE_DEFAULTS", () => {
    const role: Role = decodeRole({});
    role.key_usage.push("CertSign");
    expect(ROLE_DEFAULTS.key_usage).toEqual(["DigitalSignature", "KeyAgreement", "KeyEncipherment"]);
  });

  it("accepts policy identifiers as OIDs or {oid, notice, cps}", () => {
    const policies = ["1.2.3", { oid: "1.2.4", notice: "n", cps: "https://cps.example.com" }];
    expect(decodeRole({ policy_identifiers: policies }).policy_identifiers).toEqual(policies);
  });

  it("refuses a stored value of the wrong type rather than replacing it by a default", () => {
    expect(() => decodeRole({ allow_any_name: "true" })).toThrow(StoredShapeError);
    expect(() => decodeRole({ allowed_domains: "example.com" })).toThrow(/allowed_domains/);
    expect(() => decodeRole({ ttl: "1h" })).toThrow(/ttl/);
    expect(() => decodeRole({ policy_identifiers: [{ notice: "no oid" }] })).toThrow(/policy_identifiers/);
    expect(() => decodeRole(null)).toThrow(StoredShapeError);
    expect(() => decodeRole({ key_type: "dsa" })).toThrow(StoredShapeError);
  });
});

describe("decodeIssuer", () => {
  const row: IssuerRow = {
    id: "7d6b7a43-5f5e-4d3c-9b2a-1a0f0e0d0c0b",
    mountId: "m",
    name: "root",
    keyId: "k",
    certificate: "PEM\n",
    serial: "01",
    subjectDer: "AA==",
    issuerDer: "AA==",
    publicKey: "AA==",
    notAfter: 0,
    caChain: ["7d6b7a43-5f5e-4d3c-9b2a-1a0f0e0d0c0b"],
    manualChain: null,
    leafNotAfterBehavior: "truncate",
    usage: ["issuing-certificates"],
    revocationSignatureAlgorithm: "ECDSAWithSHA256",
    aia: null,
    revoked: false,
    revocationTime: null,
    lastModified: 0,
    createdAt: 0,
  };

  it("leaves a current row as it is", () => {
    expect(decodeIssuer(row)).toEqual(row);
  });

  it("fills an AIA entry written before enable_aia_url_templating existed", () => {
    const aia = { issuing_certificates: ["http://ca.example.com"], crl_distribution_points: [], delta_crl_distribution_points: [], ocsp_servers: [] };
    const decoded = decodeIssuer({ ...row, aia: aia as unknown as IssuerRow["aia"] });
    expect(decoded.aia).toEqual({ ...aia, enable_aia_url_templating: false });
  });

  it("reads the nulls a column added later leaves in old rows as the defaults", () => {
    // What `ALTER TABLE … ADD` leaves in rows written before the column existed.
    const old = { ...row, usage: null, leafNotAfterBehavior: null, revocationSignatureAlgorithm: null, caChain: null } as unknown as IssuerRow;
    expect(decodeIssuer(old)).toEqual({ ...row, usage: [...ALL_USAGES], leafNotAfterBehavior: "err", revocationSignatureAlgorithm: "", caChain: [row.id] });
  });

  it("refuses a JSON column of the wrong shape", () => {
    expect(() => decodeIssuer({ ...row, usage: "crl-signing" } as unknown as IssuerRow)).toThrow(StoredShapeError);
    expect(() => decodeIssuer({ ...row, aia: { ocsp_servers: "http://x" } } as unknown as IssuerRow)).toThrow(/ocsp_servers/);
  });
});
