/** The name policy (OpenBao cert_util.go validateNames), including upstream's issuance-regression matrix
 * (OpenBao backend_test.go TestBackend_Roles_IssuanceRegression). */
import { describe, expect, it } from "vitest";
import {
  checkCommonName,
  globMatch,
  nameAllowed,
  parseOtherSan,
  punycode,
  toAscii,
  type NamePolicy,
} from "../../src/engines/pki/policy/names";

const base: NamePolicy = {
  allow_localhost: false,
  allowed_domains: [],
  allow_bare_domains: false,
  allow_subdomains: false,
  allow_glob_domains: false,
  allow_wildcard_certificates: false,
  allow_any_name: false,
  enforce_hostnames: false,
};

type Flag = boolean | "*";
/** [domain, bare, glob, subdomains, localhost, wildcard, cn, issued] — `*` rows run both ways. */
const MATRIX: [string, Flag, Flag, Flag, Flag, Flag, string, boolean][] = [
  ["*.*.foo", "*", false, "*", "*", "*", "baz.fud.bar.foo", false],
  ["*.*.foo", "*", "*", "*", false, "*", "localhost", false],
  ["*.*.foo", "*", "*", "*", true, "*", "localhost", true],
  ["localhost", true, "*", "*", false, "*", "localhost", true],
  ["localhost", false, "*", "*", false, "*", "localhost", false],
  ["*.foo", true, "*", "*", "*", true, "*.foo", true],
  ["*.*.foo", true, "*", "*", "*", "*", "*.*.foo", false],
  ["*.*.foo", "*", true, false, "*", "*", "baz.fud.bar.foo", true],
  ["*.*.foo", "*", true, false, "*", true, "*.bar.foo", true],
  ["*.*.foo", "*", true, "*", "*", "*", "bar.foo", false],
  ["*.foo", "*", true, false, "*", "*", "bar.foo", true],
  ["*.foo", "*", true, "*", "*", "*", "foo", false],
  ["foo", false, "*", false, "*", "*", "foo", false],
  ["foo", true, "*", false, "*", "*", "foo", true],
  ["foo", "*", "*", true, "*", "*", "baz.fud.bar.foo", true],
  ["foo", "*", "*", true, "*", true, "*.foo", true],
  ["foo", "*", "*", true, "*", true, "x*x.foo", true],
  ["foo", "*", "*", true, "*", true, "*x.foo", true],
  ["foo", "*", "*", true, "*", true, "x*.foo", true],
  ["foo", "*", "*", true, "*", false, "*.foo", false],
  ["foo", "*", "*", true, "*", false, "x*.foo", false],
  ["x*x.foo", "*", true, "*", "*", "*", "xylophone.files.pyrex.foo", true],
  ["x*x.foo", "*", true, "*", "*", "*", "*.xyx.foo", false],
  ["x*x.foo", false, true, "*", "*", true, "x*x.foo", true],
  ["x*x.foo", true, "*", "*", "*", false, "x*x.foo", false],
  ["x.*.x.foo", "*", true, "*", "*", "*", "x.ero.x.foo", true],
  ["x.*.x.foo", "*", "*", "*", "*", "*", "x.*.x.foo", false],
];

function expand(f: Flag): boolean[] {
  return f === "*" ? [false, true] : [f];
}

describe("upstream's issuance-regression matrix (enforce_hostnames=false)", () => {
  for (const [domain, b, g, s, l, w, cn, issued] of MATRIX) {
    it(`${domain} B=${b} G=${g} S=${s} L=${l} W=${w}: ${cn} → ${issued ? "issued" : "refused"}`, () => {
      for (const bare of expand(b))
        for (const glob of expand(g))
          for (const sub of expand(s))
            for (const lh of expand(l))
              for (const wild of expand(w)) {
                const p = {
                  ...base,
                  allowed_domains: [domain],
                  allow_bare_domains: bare,
                  allow_glob_domains: glob,
                  allow_subdomains: sub,
                  allow_localhost: lh,
                  allow_wildcard_certificates: wild,
                };
                expect(nameAllowed(p, cn), JSON.stringify(p)).toBe(issued);
              }
    });
  }

  const all: NamePolicy = {
    ...base,
    allowed_domains: ["foo"],
    allow_bare_domains: true,
    allow_glob_domains: true,
    allow_subdomains: true,
    allow_localhost: true,
    allow_wildcard_certificates: true,
  };

  it("cn_validations: email and hostname kinds", () => {
    expect(() => checkCommonName(all, ["email"], "bar@foo")).not.toThrow();
    expect(() => checkCommonName(all, ["email"], "bar@bar")).toThrow("common name bar@bar not allowed by this role");
    expect(() => checkCommonName(all, ["email"], "bar@bar@bar")).toThrow();
    expect(() => checkCommonName(all, ["hostname"], "bar@foo")).toThrow();
    expect(() => checkCommonName(all, ["hostname"], "bar.foo")).not.toThrow();
    expect(() => checkCommonName(all, ["email"], "bar.foo")).toThrow();
    expect(() => checkCommonName(all, ["disabled"], "*.fud.*.foo")).not.toThrow();
    expect(() => checkCommonName(all, ["disabled"], "foo@foo@foo")).not.toThrow();
  });

  it("enforce_hostnames checks the label syntax, also inside wildcards", () => {
    const p = { ...all, enforce_hostnames: true };
    expect(nameAllowed(p, "a-b.foo")).toBe(true);
    expect(nameAllowed(p, "-a.foo")).toBe(false);
    expect(nameAllowed(p, "a_b.foo")).toBe(false);
    expect(nameAllowed(p, "*.foo")).toBe(true);
    expect(nameAllowed(p, "a*b.foo")).toBe(true);
    expect(nameAllowed(p, "a.b..foo")).toBe(false);
    expect(nameAllowed(p, `${"a".repeat(64)}.foo`)).toBe(false);
  });

  it("allow_any_name skips domain matching but not the wildcard switch", () => {
    expect(nameAllowed({ ...base, allow_any_name: true }, "anything.example")).toBe(true);
    expect(nameAllowed({ ...base, allow_any_name: true, allow_wildcard_certificates: false }, "*.example")).toBe(false);
  });

  it("e-mail names use their domain", () => {
    const p = { ...base, allowed_domains: ["example.com"], allow_bare_domains: true };
    expect(nameAllowed(p, "a@example.com")).toBe(true);
    expect(nameAllowed(p, "a@sub.example.com")).toBe(false);
    expect(nameAllowed({ ...p, allow_subdomains: true }, "a@sub.example.com")).toBe(true);
    expect(nameAllowed({ ...p, allow_subdomains: true, allow_wildcard_certificates: true }, "a@*.example.com")).toBe(false);
  });
});

describe("IDNA", () => {
  it("punycodes non-ASCII labels (RFC 3492 samples)", () => {
    expect(punycode("bücher")).toBe("bcher-kva");
    expect(punycode("münchen")).toBe("mnchen-3ya");
    expect(toAscii("bücher.example")).toBe("xn--bcher-kva.example");
    expect(toAscii("daɪˈɛrɨsɨs")).toMatch(/^xn--/);
    expect(() => toAscii("a..b")).toThrow("idna");
  });
});

// IP SANs and allowed_ip_sans_cidr are read by src/core/ip.ts: test/unit/ip.test.ts and
// test/unit/ip-agreement.test.ts (which drives applyRole and buildRole over the shared table).

describe("other SANs and globs", () => {
  it("parses <oid>;UTF8:<value>", () => {
    expect(parseOtherSan("1.2.3;UTF-8:a;b:c")).toEqual({ oid: "1.2.3", value: "a;b:c" });
    expect(() => parseOtherSan("1.2.3")).toThrow("expected a semicolon");
    expect(() => parseOtherSan("1.2.3;UTF8")).toThrow("expected a colon");
    expect(() => parseOtherSan("1.2.3;IA5:x")).toThrow("only utf8");
  });

  it("globs match across dots, case-sensitively, as whole strings", () => {
    expect(globMatch("x*x.foo", "xylophone.files.pyrex.foo")).toBe(true);
    expect(globMatch("*.foo", "a.FOO")).toBe(false);
    expect(globMatch("a*", "ba")).toBe(false);
  });
});
