/** Validity computation (ttl, max_ttl, not_after of Vault API /pki/issue/:name). */
import { describe, expect, it } from "vitest";
import { computeValidity, type ValidityInput } from "../../src/engines/pki/issuance/ttl";

const now = Date.UTC(2026, 0, 1, 0, 0, 0, 500);
const base: ValidityInput = {
  now,
  requestTtl: 0,
  requestNotAfter: "",
  roleTtl: 0,
  roleMaxTtl: 0,
  roleNotAfter: "",
  notAfterBound: "permit",
  mountDefaultTtl: 768 * 3600,
  mountMaxTtl: 768 * 3600,
  notBeforeDuration: 30,
  notBefore: "",
  issuer: null,
  refuseOverMax: true,
};

describe("computeValidity", () => {
  it("falls back from request ttl to role ttl to the mount default, in whole seconds", () => {
    const v = computeValidity(base);
    expect(v.notAfter.getTime()).toBe(Date.UTC(2026, 0, 1) + 768 * 3600 * 1000);
    expect(v.notBefore.getTime()).toBe(Date.UTC(2026, 0, 1) - 30_000);
    expect(computeValidity({ ...base, roleTtl: 60 }).notAfter.getTime()).toBe(Date.UTC(2026, 0, 1, 0, 1));
    expect(computeValidity({ ...base, roleTtl: 60, requestTtl: 120 }).notAfter.getTime()).toBe(Date.UTC(2026, 0, 1, 0, 2));
  });

  it("refuses a request ttl above max (docs/http-conventions.md) but caps a role/default ttl with upstream's warning", () => {
    expect(() => computeValidity({ ...base, requestTtl: 7200, roleMaxTtl: 3600 })).toThrow('ttl: the requested ttl "2h0m0s" is longer than the maximum allowed ttl "1h0m0s"');
    const capped = computeValidity({ ...base, roleMaxTtl: 3600 });
    expect(capped.warnings).toEqual(['TTL "768h0m0s" is longer than permitted maxTTL "1h0m0s", so maxTTL is being used']);
    expect(computeValidity({ ...base, requestTtl: 7200, roleMaxTtl: 3600, refuseOverMax: false }).notAfter.getTime()).toBe(Date.UTC(2026, 0, 1, 1));
  });

  it("not_after: absolute, not capped by max_ttl, exclusive with ttl; role not_after wins", () => {
    const v = computeValidity({ ...base, requestNotAfter: "9999-12-31T23:59:59Z", roleMaxTtl: 60 });
    expect(v.notAfter.toISOString()).toBe("9999-12-31T23:59:59.000Z");
    expect(() => computeValidity({ ...base, requestNotAfter: "2027-01-01T00:00:00Z", requestTtl: 5 })).toThrow("Either ttl or not_after");
    expect(computeValidity({ ...base, requestNotAfter: "2027-01-01T00:00:00Z", roleNotAfter: "2026-06-01T00:00:00Z" }).notAfter.toISOString()).toBe(
      "2026-06-01T00:00:00.000Z",
    );
    expect(() => computeValidity({ ...base, requestNotAfter: "2027-01-01" })).toThrow("not_after");
    expect(() => computeValidity({ ...base, requestNotAfter: "2027-01-01T00:00:00Z", notAfterBound: "forbid" })).toThrow("not_after_bound is set to forbid");
    expect(() => computeValidity({ ...base, roleTtl: 60, requestNotAfter: "2027-01-01T00:00:00Z", notAfterBound: "ttl-limited" })).toThrow("ttl-limited");
    expect(() => computeValidity({ ...base, notAfterBound: "2026-01-02T00:00:00Z" })).toThrow("not_after_bound");
  });

  it("applies the issuer's leaf_not_after_behavior", () => {
    const issuerEnd = Date.UTC(2026, 0, 2);
    expect(() => computeValidity({ ...base, issuer: { notAfter: issuerEnd, behavior: "err" } })).toThrow(
      "cannot satisfy request, as TTL would result in notAfter of 2026-02-02T00:00:00Z that is beyond the expiration of the CA certificate at 2026-01-02T00:00:00Z",
    );
    expect(computeValidity({ ...base, issuer: { notAfter: issuerEnd, behavior: "truncate" } }).notAfter.getTime()).toBe(issuerEnd);
    expect(computeValidity({ ...base, issuer: { notAfter: issuerEnd, behavior: "permit" } }).notAfter.getTime()).toBe(Date.UTC(2026, 1, 2));
    expect(() => computeValidity({ ...base, issuer: { notAfter: now - 1000, behavior: "truncate" } })).toThrow("is in the past");
  });

  it("notBefore: fixed, or backdated; never after notAfter", () => {
    expect(computeValidity({ ...base, notBefore: "2025-12-01T00:00:00Z" }).notBefore.toISOString()).toBe("2025-12-01T00:00:00.000Z");
    expect(() => computeValidity({ ...base, notBefore: "2030-01-01T00:00:00Z" })).toThrow("is later than");
  });
});
