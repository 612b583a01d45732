/**
 * Edge values found by a black-box probe of the privileged signing paths and two
 * earlier leftovers: each test pins a request that used to be accepted wrongly or answered
 * without the warning upstream gives (Vault API /pki/root/sign-intermediate,
 * /pki/config/urls).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { read, write } from "../helpers/api";
import { makeCsr, parseCert, pkiWithRoot, x509 } from "../helpers/pki";

describe("request field edges", () => {
  let path = "";
  let csr = "";
  beforeAll(async () => {
    ({ path } = await pkiWithRoot());
    csr = (await makeCsr("edge.example")).pem;
  });

  it("an int beyond 2^53 is a field error, not a silently rounded number", async () => {
    const big = await write(`${path}/root/sign-intermediate`, { csr, common_name: "Int", max_path_length: 99999999999999999999 }, {}, 400);
    expect(big.body.errors[0]).toBe(`Field validation failed: error converting input for field "max_path_length": cannot parse '100000000000000000000' as int`);
    const str = await write(`${path}/root/sign-intermediate`, { csr, common_name: "Int", max_path_length: "99999999999999999999" }, {}, 400);
    expect(str.body.errors[0]).toContain(`cannot parse '99999999999999999999' as int`);
    // Large but exact values still work (RFC 5280 pathLenConstraint is INTEGER (0..MAX)).
    const ok = await write(`${path}/root/sign-intermediate`, { csr, common_name: "Int", max_path_length: 2147483648, ttl: "1h" });
    expect(Number(parseCert(ok.body.data.certificate).getExtension(x509.BasicConstraintsExtension)?.pathLength)).toBe(2147483648);
  });

  it("a body key that collides with a path capture: the path wins and a warning says so", async () => {
    const r = await write(`${path}/roles/from-path`, { name: "from-body", allow_any_name: true });
    expect(r.body.warnings).toContain(
      "Endpoint replaced the value of these parameters with the values captured from the endpoint's path: [name]",
    );
    await read(`${path}/roles/from-path`);
    await read(`${path}/roles/from-body`, {}, 404);
    const plain = await write(`${path}/roles/no-collision`, { allow_any_name: true });
    expect(plain.body.warnings ?? []).not.toContainEqual(expect.stringContaining("replaced the value"));
    const sv = await write(`${path}/issuer/default/sign-verbatim/from-path`, { csr, issuer_ref: "root-ca", role: "x", ttl: "1h" });
    expect(sv.body.warnings).toContain(
      "Endpoint replaced the value of these parameters with the values captured from the endpoint's path: [issuer_ref role]",
    );
    // sign-verbatim's body `name` is another spelling of the path's role: the path wins, with a word.
    const named = await write(`${path}/sign-verbatim/from-path`, { csr, name: "other", ttl: "1h" });
    expect(named.body.warnings).toContain('name: the role "from-path" in the path was used; the body\'s name "other" was ignored');
  });

  it("not_after with a day that does not exist is refused, not rolled over (§1.8; RFC 3339 §5.7)", async () => {
    for (const bad of ["2030-02-30T00:00:00Z", "2030-13-01T00:00:00Z", "2030-04-31T00:00:00Z", "2030-01-01T24:00:00Z"]) {
      const r = await write(`${path}/sign-verbatim`, { csr, not_after: bad }, {}, 400);
      expect(r.body.errors[0]).toMatch(/^not_after: parsing time/);
    }
    const leap = await write(`${path}/sign-verbatim`, { csr, not_after: "2032-02-29T00:00:00Z" });
    expect(parseCert(leap.body.data.certificate).notAfter.toISOString()).toBe("2032-02-29T00:00:00.000Z");
  });
});

describe("sign-intermediate / root generation: CA constraints", () => {
  let path = "";
  let csr = "";
  beforeAll(async () => {
    ({ path } = await pkiWithRoot());
    csr = (await makeCsr("int.example")).pem;
  });

  it("max_path_length below -1 is refused on both CA paths", async () => {
    for (const v of [-2, -100]) {
      const s = await write(`${path}/root/sign-intermediate`, { csr, common_name: "Int", max_path_length: v }, {}, 400);
      expect(s.body.errors[0]).toContain("max_path_length");
      const g = await write(`${path}/issuers/generate/root/internal`, { common_name: "R", key_type: "ec", max_path_length: v }, {}, 400);
      expect(g.body.errors[0]).toContain("max_path_length");
    }
  });

  it("a signed CA whose path length ends up zero carries upstream's warning", async () => {
    const zero = await write(`${path}/root/sign-intermediate`, { csr, common_name: "Int", max_path_length: 0, ttl: "1h" });
    expect(zero.body.warnings).toContain("Max path length of the signed certificate is zero. This certificate cannot be used to issue intermediate CA certificates.");
    expect(parseCert(zero.body.data.certificate).getExtension(x509.BasicConstraintsExtension)?.pathLength).toBe(0);
    const none = await write(`${path}/root/sign-intermediate`, { csr, common_name: "Int", ttl: "1h" });
    expect(none.body.warnings ?? []).not.toContainEqual(expect.stringContaining("Max path length"));
  });

  it("permitted_dns_domains must be ASCII DNS names (IA5String, RFC 5280 §4.2.1.10); a leading dot is fine", async () => {
    for (const bad of ["..example.com", "ex ample.com", "*.foo.com", "ünicode.com", ".", "a..b", "-bad-.com"]) {
      const r = await write(`${path}/root/sign-intermediate`, { csr, common_name: "Int", permitted_dns_domains: bad }, {}, 400);
      expect(r.body.errors[0], bad).toContain("permitted_dns_domains");
    }
    const g = await write(`${path}/issuers/generate/root/internal`, { common_name: "R", key_type: "ec", permitted_dns_domains: "ünicode.com" }, {}, 400);
    expect(g.body.errors[0]).toContain("permitted_dns_domains");
    const ok = await write(`${path}/root/sign-intermediate`, { csr, common_name: "Int", ttl: "1h", permitted_dns_domains: [".example.com", "xn--bcher-kva.example", "host_1.test"] });
    const nc = parseCert(ok.body.data.certificate).getExtension("2.5.29.30");
    expect(nc?.critical).toBe(true);
  });
});

describe("config/urls with enable_templating", () => {
  it("warns at write time when config/cluster cannot fill the templates, and not once it can", async () => {
    const { path } = await pkiWithRoot();
    const urls = { enable_templating: true, crl_distribution_points: "{{cluster_aia_path}}/issuer/{{issuer_id}}/crl/der" };
    const bad = await write(`${path}/config/urls`, urls);
    expect(bad.body.warnings).toHaveLength(1);
    expect(bad.body.warnings[0]).toMatch(/^issuance may fail: .*cluster_aia_path/s);
    expect(bad.body.data.enable_templating).toBe(true);
    await write(`${path}/config/cluster`, { path: "https://pki.example/v1/x", aia_path: "https://aia.example/v1/x" });
    const good = await write(`${path}/config/urls`, urls);
    expect(good.body.warnings).toBeNull();
    const plain = await write(`${path}/config/urls`, { enable_templating: false, crl_distribution_points: "https://crl.example/crl" });
    expect(plain.body.warnings).toBeNull();
  });
});
