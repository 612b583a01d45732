/**
 * Through the API: glob matching is linear (pathological patterns answer at once
 * instead of burning minutes of CPU), and name fields, SAN lists and role name lists have size
 * limits whose 400 names the field (src/engines/pki/policy/name-limits.ts). No timing asserts: before the fix
 * the repros below do not finish within the test timeout.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { api, patch, write } from "../helpers/api";
import { parseCert, pkiWithRoot, sans, x509 } from "../helpers/pki";

let path = "";
beforeAll(async () => {
  ({ path } = await pkiWithRoot({ ttl: "700h" }));
});

const issue = (role: string, body: Record<string, unknown>, status = 200) => write(`${path}/issue/${role}`, body, {}, status);
const errors = async (role: string, body: Record<string, unknown>) => (await issue(role, body, 400)).body.errors as string[];

/** An EC CSR with the given subject CN and SANs, made in the test. */
async function csrWith(cn: string, names: { type: "dns" | "url"; value: string }[]): Promise<string> {
  const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
  const keys = (await crypto.subtle.generateKey(alg, true, ["sign", "verify"])) as CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: cn === "" ? "" : `CN=${cn}`,
    keys,
    signingAlgorithm: alg,
    extensions: names.length ? [new x509.SubjectAlternativeNameExtension(names)] : [],
  });
  return csr.toString("pem");
}

describe("the issue's repros", () => {
  beforeAll(async () => {
    await write(`${path}/roles/spiffe`, {
      allowed_domains: "example.com",
      allow_subdomains: true,
      allowed_uri_sans: ["spiffe://*/ns/*/callback"],
      key_type: "ec",
      ttl: "1h",
    });
    await write(`${path}/roles/stars`, {
      allowed_domains: ["*a*a*a*a*a*a*a*a.example.com"],
      allow_glob_domains: true,
      key_type: "ec",
      ttl: "1h",
    });
  });

  it("a 750 KB uri_sans against a two-star URI glob: a 400 naming the field", async () => {
    const huge = `spiffe://${"a/ns/".repeat(150_000)}`;
    expect(await errors("spiffe", { common_name: "h.example.com", uri_sans: huge })).toEqual(["uri_sans: entry longer than 2048 bytes"]);
  });

  it("a hundred near-miss URIs at the length limit are refused, a matching one is issued", async () => {
    const nearMiss = `spiffe://${"a/ns/".repeat(405)}`.slice(0, 2048);
    const uris = Array.from({ length: 100 }, () => nearMiss);
    expect((await errors("spiffe", { common_name: "h.example.com", uri_sans: uris }))[0]).toContain("not valid for this role");
    const ok = `spiffe://${"a/ns/".repeat(400)}callback`;
    const cert = parseCert((await issue("spiffe", { common_name: "h.example.com", uri_sans: ok })).body.data.certificate);
    expect(sans(cert)).toContain(`url:${ok}`);
  });

  it("eight stars in allowed_domains: the issue's 40-character CN and a 190-character one", async () => {
    expect(await errors("stars", { common_name: `${"a".repeat(27)}.example.org` })).toEqual([
      `common name ${"a".repeat(27)}.example.org not allowed by this role`,
    ]);
    const long = `${"a".repeat(60)}.${"a".repeat(60)}.${"a".repeat(60)}.example.org`;
    expect(await errors("stars", { common_name: long })).toEqual([`common name ${long} not allowed by this role`]);
    const ok = `${"a".repeat(60)}.${"a".repeat(60)}.${"a".repeat(60)}.example.com`;
    expect(parseCert((await issue("stars", { common_name: ok })).body.data.certificate).subject).toBe(`CN=${ok}`);
  });
});

describe("request limits", () => {
  beforeAll(async () => {
    await write(`${path}/roles/any`, {
      allow_any_name: true,
      enforce_hostnames: false,
      allowed_uri_sans: "*",
      allowed_other_sans: "*",
      allowed_serial_numbers: "*",
      allowed_user_ids: "*",
      key_type: "ec",
      ttl: "1h",
    });
  });
  const base = { common_name: "h.example.com" };

  it("each field over its limit is a 400 that names it", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ common_name: "a".repeat(256) }, "common_name: longer than 255 bytes"],
      // Bytes, not characters: 128 × "é" is 256 bytes.
      [{ common_name: "é".repeat(128) }, "common_name: longer than 255 bytes"],
      [{ ...base, alt_names: Array.from({ length: 101 }, (_, i) => `n${i}.example.com`) }, "alt_names: more than 100 entries"],
      [{ ...base, alt_names: [`${"a".repeat(250)}.example.com`] }, "alt_names: entry longer than 255 bytes"],
      [{ ...base, ip_sans: [`10.0.0.${"0".repeat(60)}1`] }, "ip_sans: entry longer than 64 bytes"],
      [{ ...base, ip_sans: Array.from({ length: 101 }, (_, i) => `10.0.0.${i}`) }, "ip_sans: more than 100 entries"],
      [{ ...base, uri_sans: Array.from({ length: 101 }, (_, i) => `spiffe://td/${i}`) }, "uri_sans: more than 100 entries"],
      [{ ...base, uri_sans: `spiffe://td/${"x".repeat(2037)}` }, "uri_sans: entry longer than 2048 bytes"],
      [{ ...base, other_sans: `1.2.3.4;UTF8:${"x".repeat(2036)}` }, "other_sans: entry longer than 2048 bytes"],
      [{ ...base, serial_number: "s".repeat(256) }, "serial_number: longer than 255 bytes"],
      [{ ...base, user_ids: ["u".repeat(256)] }, "user_ids: entry longer than 255 bytes"],
    ];
    for (const [body, message] of cases) expect(await errors("any", body), message).toEqual([message]);
  });

  it("values at the limits are issued", async () => {
    const uri = `spiffe://td/${"x".repeat(2048 - "spiffe://td/".length)}`;
    const r = await issue("any", {
      common_name: `${"c".repeat(255)}`,
      exclude_cn_from_sans: true,
      alt_names: Array.from({ length: 100 }, (_, i) => `n${i}.example.com`),
      uri_sans: uri,
      serial_number: "s".repeat(255),
    });
    const cert = parseCert(r.body.data.certificate);
    expect(cert.subject).toContain(`CN=${"c".repeat(255)}`);
    expect(sans(cert).filter((s) => s.startsWith("dns:"))).toHaveLength(100);
    expect(sans(cert)).toContain(`url:${uri}`);
  });

  it("names taken from a CSR have the same limits, named as the CSR's", async () => {
    await write(`${path}/roles/csr`, { allow_any_name: true, enforce_hostnames: false, allowed_uri_sans: "*", key_type: "any", ttl: "1h" });
    const sign = async (csr: string) => (await write(`${path}/sign/csr`, { csr }, {}, 400)).body.errors as string[];
    expect(await sign(await csrWith("c".repeat(256), []))).toEqual(["csr: common name longer than 255 bytes"]);
    const longUri = `spiffe://td/${"x".repeat(2037)}`;
    expect(await sign(await csrWith("h.example.com", [{ type: "url", value: longUri }]))).toEqual(["csr: URI SAN longer than 2048 bytes"]);
    const many = Array.from({ length: 101 }, (_, i) => ({ type: "dns" as const, value: `n${i}.example.com` }));
    expect(await sign(await csrWith("h.example.com", many))).toEqual(["csr: more than 100 DNS SANs"]);
  });

  it("CA generation has the same request limits", async () => {
    const r = await api("POST", `${path}/intermediate/generate/internal`, { body: { common_name: "x".repeat(256), key_type: "ec" } });
    expect(r.status).toBe(400);
    expect(r.body.errors).toEqual(["common_name: longer than 255 bytes"]);
  });
});

describe("role list limits", () => {
  it("entries, entry length and the bytes of globs, on write and on PATCH", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ allowed_domains: Array.from({ length: 1001 }, (_, i) => `d${i}.example.com`) }, "allowed_domains: more than 1000 entries"],
      [{ allowed_domains: [`${"a".repeat(250)}.example`] }, "allowed_domains: entry longer than 255 bytes"],
      [{ allowed_uri_sans: [`spiffe://${"x".repeat(2040)}`] }, "allowed_uri_sans: entry longer than 2048 bytes"],
      [{ allowed_other_sans: [`1.2.3.4;UTF8:${"x".repeat(2036)}`] }, "allowed_other_sans: entry longer than 2048 bytes"],
      [{ allowed_serial_numbers: ["s".repeat(256)] }, "allowed_serial_numbers: entry longer than 255 bytes"],
      [{ allowed_user_ids: ["u".repeat(256)] }, "allowed_user_ids: entry longer than 255 bytes"],
      [{ allowed_ip_sans_cidr: [`10.0.0.${"0".repeat(60)}/8`] }, "allowed_ip_sans_cidr: entry longer than 64 bytes"],
      [
        { allowed_uri_sans: Array.from({ length: 5 }, (_, i) => `spiffe://${i}/*/${"x".repeat(2000)}`) },
        'allowed_uri_sans: entries containing "*" are longer than 8192 bytes together',
      ],
    ];
    for (const [body, message] of cases) {
      const r = await api("POST", `${path}/roles/limits`, { body: { key_type: "ec", ...body } });
      expect(r.body.errors, message).toEqual([message]);
      expect(r.status).toBe(400);
    }
    await write(`${path}/roles/limits`, { key_type: "ec", allowed_domains: Array.from({ length: 1000 }, (_, i) => `d${i}.example.com`) });
    const p = await api("PATCH", `${path}/roles/limits`, {
      body: { allowed_uri_sans: [`spiffe://${"x".repeat(2040)}`] },
    });
    expect(p.status).toBe(400);
    expect(p.body.errors).toEqual(["allowed_uri_sans: entry longer than 2048 bytes"]);
    // Plain entries do not count towards the glob budget.
    await patch(`${path}/roles/limits`, { allowed_uri_sans: Array.from({ length: 9 }, (_, i) => `spiffe://${i}/${"x".repeat(2000)}`) });
  });
});

describe("the same mistake elsewhere: regex trims of user input", () => {
  it("sync associations: a mount with a 200,000-slash inner run is answered at once", async () => {
    const mount = `a${"/".repeat(200_000)}b`;
    const r = await api("POST", "sys/sync/destinations/cloudone-sm/no-such-destination/associations/set", { body: { mount, secret_name: "s" } });
    expect(r.status).toBe(404);
  });
});
