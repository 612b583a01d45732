/**
 * The ACME server of a PKI mount (RFC 8555), driven through the Worker with the
 * WebCrypto client of test/helpers/acme-client.ts: config/acme, directories, nonces (reuse and
 * concurrent reuse refused), accounts, orders allowed and rejected by the role, dns-01
 * validation against a fake DNS-over-HTTPS resolver (test/helpers/fake-router.ts), finalize,
 * the certificate checked against the mount's CA with @peculiar/asn1-x509, revoke-cert then
 * OCSP and the CRL, EAB-required mode, key-change, and problem documents for every refusal.
 */
import { SELF, env } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AcmeClient, b64url, eabJws, keyFromPair, newKey, pemBlocks, send, signJws, signedByEcCa, type AcmeResponse } from "../helpers/acme-client";
import { del, list, read, write } from "../helpers/api";
import { fakeDohResolver } from "../helpers/fake-doh";
import { installFakes } from "../helpers/fake-router";
import { parseResponse, requestFor } from "../helpers/ocsp";
import { makeCsr, parseCert, pkiWithRoot, sans, x509 } from "../helpers/pki";

const DOH = "https://doh.acme.test/dns-query";
/** TXT records the fake resolver answers, by name. */
const txt = new Map<string, string[]>();

const fakeDoh = fakeDohResolver(txt);

async function dnsDigest(keyAuthorization: string): Promise<string> {
  return b64url(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(keyAuthorization))));
}

function expectProblem(r: AcmeResponse, type: string, status: number): void {
  expect(r.status, r.text).toBe(status);
  expect(r.headers.get("content-type")).toBe("application/problem+json");
  expect(r.body.type).toBe(`urn:ietf:params:acme:error:${type}`);
  expect(typeof r.body.detail).toBe("string");
}

let path = "";
let root = "";
let base = "";
let uninstall: () => void = () => undefined;

beforeAll(async () => {
  ({ path, root } = await pkiWithRoot());
  base = `http://lanyard.test/v1/${path}`;
  await write(`${path}/roles/web`, { allowed_domains: ["example.com"], allow_subdomains: true, allow_wildcard_certificates: true, allow_ip_sans: false, key_type: "any", ttl: "72h", client_flag: true });
  uninstall = installFakes([{ hosts: ["doh.acme.test"], fake: fakeDoh }]);
});
afterAll(() => uninstall());

/** Publishes the dns-01 answer of an authorization's challenge and asks for validation. */
async function passDns01(c: AcmeClient, authzUrl: string, publish = true): Promise<AcmeResponse> {
  const authz = await c.post(authzUrl, "");
  const ch = authz.body.challenges.find((x: { type: string }) => x.type === "dns-01");
  if (publish) txt.set(`_acme-challenge.${authz.body.identifier.value}`, [await dnsDigest(await c.keyAuthorization(ch.token))]);
  return c.post(ch.url, {});
}

/** An order for `names` through client `c`, validated and finalized; returns the order and the chain. */
async function issue(c: AcmeClient, names: string[]): Promise<{ order: AcmeResponse; chain: string; keys: CryptoKeyPair }> {
  const order = await c.post(c.dir.newOrder ?? "", { identifiers: names.map((value) => ({ type: "dns", value })) });
  expect(order.status, order.text).toBe(201);
  for (const z of order.body.authorizations) expect((await passDns01(c, z)).body.status).toBe("valid");
  const csr = await makeCsr(names[0] ?? "", names);
  const der = x509.PemConverter.decodeFirst(csr.pem);
  const fin = await c.post(order.body.finalize, { csr: b64url(new Uint8Array(der)) });
  expect(fin.status, fin.text).toBe(200);
  expect(fin.body.status).toBe("valid");
  const cert = await c.post(fin.body.certificate, "");
  expect(cert.status).toBe(200);
  expect(cert.headers.get("content-type")).toBe("application/pem-certificate-chain");
  return { order: fin, chain: cert.text, keys: csr.keys };
}

describe("config/acme", () => {
  it("defaults, 404 while disabled, validation naming the field, and the cluster path requirement", async () => {
    const d = await read(`${path}/config/acme`);
    expect(d.body.data).toMatchObject({ enabled: false, allowed_issuers: ["*"], allowed_roles: ["*"], default_directory_policy: "sign-verbatim", eab_policy: "not-required", max_ttl: 7776000 });
    expectProblem(await send("GET", `${base}/acme/directory`), "malformed", 404);
    const post = await send("POST", `${base}/acme/new-account`, "{}");
    expectProblem(post, "malformed", 404);
    // No nonce is handed out, nor stored, for a mount without ACME.
    expect(post.headers.get("replay-nonce")).toBeNull();
    const nonces = await env.DB.prepare("SELECT count(*) AS n FROM pki_acme_nonces n JOIN mounts m ON m.id = n.mount_id WHERE m.path = ?").bind(`${path}/`).first<{ n: number }>();
    expect(nonces?.n).toBe(0);

    const noPath = await write(`${path}/config/acme`, { enabled: true }, {}, 400);
    expect(noPath.body.errors[0]).toContain("cluster 'path'");
    await write(`${path}/config/cluster`, { path: base });
    expect((await write(`${path}/config/acme`, { eab_policy: "sometimes" }, {}, 400)).body.errors[0]).toContain("eab_policy");
    expect((await write(`${path}/config/acme`, { default_directory_policy: "role:nope" }, {}, 400)).body.errors[0]).toContain("default_directory_policy");
    expect((await write(`${path}/config/acme`, { allowed_roles: ["*", "web"] }, {}, 400)).body.errors[0]).toContain("allowed_roles");
    expect((await write(`${path}/config/acme`, { dns_resolver: "ftp://x" }, {}, 400)).body.errors[0]).toContain("dns_resolver");
    const on = await write(`${path}/config/acme`, { enabled: true, dns_resolver: DOH });
    expect(on.body.data).toMatchObject({ enabled: true, dns_resolver: DOH, eab_policy: "not-required" });
    // A merge: keys not sent keep their values.
    expect((await write(`${path}/config/acme`, { max_ttl: "240h" })).body.data).toMatchObject({ enabled: true, max_ttl: 864000 });
  });
});

describe("directory and nonces", () => {
  it("serves the four directories with absolute URLs under config/cluster path, and fresh nonces", async () => {
    for (const prefix of ["acme", "roles/web/acme", "issuer/root-ca/acme", "issuer/root-ca/roles/web/acme"]) {
      const r = await send("GET", `${base}/${prefix}/directory`);
      expect(r.status, r.text).toBe(200);
      expect(r.body).toEqual({
        newNonce: `${base}/${prefix}/new-nonce`,
        newAccount: `${base}/${prefix}/new-account`,
        newOrder: `${base}/${prefix}/new-order`,
        revokeCert: `${base}/${prefix}/revoke-cert`,
        keyChange: `${base}/${prefix}/key-change`,
        renewalInfo: `${base}/${prefix}/renewal-info`,
        meta: { externalAccountRequired: false },
      });
    }
    const n = await send("GET", `${base}/acme/new-nonce`);
    expect(n.status).toBe(204);
    expect(n.headers.get("replay-nonce")).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(n.headers.get("cache-control")).toBe("no-store");
    expect(n.headers.get("link")).toBe(`<${base}/acme/directory>;rel="index"`);
    expect((await send("GET", `${base}/acme/new-nonce`)).headers.get("replay-nonce")).not.toBe(n.headers.get("replay-nonce"));
    // The wrong method, an unknown role: problem documents, not Vault error bodies.
    expectProblem(await send("GET", `${base}/acme/new-account`), "malformed", 405);
    expectProblem(await send("GET", `${base}/roles/nope/acme/directory`), "unauthorized", 403);
    // Refusals the dispatcher makes before the ACME handler runs are problem documents too.
    // (DELETE and PATCH are no public operations: without a token they are refused as Vault does, 403.)
    expectProblem(await send("DELETE", `${base}/acme/new-order`), "unauthorized", 403);
    expectProblem(await send("POST", `${base}/acme/new-order`, "x".repeat(1_100_000)), "malformed", 413);
  });
});

describe("accounts, JWS and nonces", () => {
  let c: AcmeClient;
  beforeAll(async () => {
    c = await AcmeClient.open(`${base}/roles/web/acme/directory`);
  });

  it("new-account answers 201 with Location, the same key 200 with the same Location", async () => {
    const r = await c.newAccount({ termsOfServiceAgreed: true, contact: ["mailto:ops@example.com"] });
    expect(r.status, r.text).toBe(201);
    expect(r.headers.get("location")).toMatch(new RegExp(`^${base}/roles/web/acme/account/[0-9a-f]{32}$`));
    expect(r.headers.get("replay-nonce")).toBeTruthy();
    expect(r.headers.get("link")).toBe(`<${base}/roles/web/acme/directory>;rel="index"`);
    expect(r.body).toMatchObject({ status: "valid", contact: ["mailto:ops@example.com"] });
    const again = await c.newAccount({ onlyReturnExisting: true });
    expect(again.status).toBe(200);
    expect(again.headers.get("location")).toBe(r.headers.get("location"));
    const read = await c.post(c.kid ?? "", "");
    expect(read.body.status).toBe("valid");
    const upd = await c.post(c.kid ?? "", { contact: ["mailto:sec@example.com"] });
    expect(upd.body.contact).toEqual(["mailto:sec@example.com"]);
    expectProblem(await c.post(c.kid ?? "", { contact: ["tel:+1555"] }), "unsupportedContact", 400);
  });

  it("refuses unknown accounts, onlyReturnExisting for a new key, and accounts of another directory", async () => {
    const stranger = await AcmeClient.open(`${base}/roles/web/acme/directory`, "EdDSA");
    expectProblem(await stranger.newAccount({ onlyReturnExisting: true }), "accountDoesNotExist", 400);
    stranger.kid = `${base}/roles/web/acme/account/${"0".repeat(32)}`;
    expectProblem(await stranger.post(stranger.dir.newOrder ?? "", { identifiers: [{ type: "dns", value: "a.example.com" }] }), "accountDoesNotExist", 400);
    const other = await AcmeClient.open(`${base}/acme/directory`);
    other.key = c.key;
    other.kid = (c.kid ?? "").replace("/roles/web/acme/", "/acme/");
    expectProblem(await other.post(other.dir.newOrder ?? "", { identifiers: [{ type: "dns", value: "a.example.com" }] }), "unauthorized", 401);
  });

  it("refuses bad JWS: wrong url, bad signature, jwk where kid is due, no nonce, an unsupported alg", async () => {
    const url = c.dir.newOrder ?? "";
    const payload = { identifiers: [{ type: "dns", value: "a.example.com" }] };
    expectProblem(await c.post(url, payload, { header: { url: `${url}x` } }), "unauthorized", 401);
    const jws = await signJws(c.key, { nonce: await c.nonce(), url, kid: c.kid ?? "" }, payload);
    const tampered = { ...jws, payload: b64url(JSON.stringify({ identifiers: [{ type: "dns", value: "b.example.com" }] })) };
    expectProblem(await send("POST", url, JSON.stringify(tampered)), "malformed", 400);
    expectProblem(await c.post(url, payload, { useJwk: true }), "malformed", 400);
    expectProblem(await send("POST", url, JSON.stringify(await signJws(c.key, { url, kid: c.kid ?? "" }, payload))), "badNonce", 400);
    const hs = { ...jws, protected: b64url(JSON.stringify({ alg: "none", nonce: await c.nonce(), url, kid: c.kid })) };
    expectProblem(await send("POST", url, JSON.stringify(hs)), "badSignatureAlgorithm", 400);
    expectProblem(await send("POST", url, "not json"), "malformed", 400);
    expectProblem(await send("POST", url, JSON.stringify({ protected: "x" })), "malformed", 400);
  });

  it("a nonce is single-use, also under concurrent requests; badNonce carries a fresh nonce", async () => {
    const nonce = await c.nonce();
    const first = await c.post(c.kid ?? "", "", { nonce });
    expect(first.status).toBe(200);
    const reuse = await c.post(c.kid ?? "", "", { nonce });
    expectProblem(reuse, "badNonce", 400);
    const fresh = reuse.headers.get("replay-nonce");
    expect(fresh).toBeTruthy();
    expect((await c.post(c.kid ?? "", "", { nonce: fresh ?? "" })).status).toBe(200);

    const shared = await c.nonce();
    const jws = JSON.stringify(await signJws(c.key, { nonce: shared, url: c.kid ?? "", kid: c.kid ?? "" }, ""));
    const results = await Promise.all(Array.from({ length: 6 }, () => send("POST", c.kid ?? "", jws)));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 200)) expectProblem(r, "badNonce", 400);
  });
});

describe("orders, challenges, finalize, certificate, revocation", () => {
  let c: AcmeClient;
  beforeAll(async () => {
    c = await AcmeClient.open(`${base}/roles/web/acme/directory`, "RS256");
    expect((await c.newAccount()).status).toBe(201);
  });

  it("new-order refuses names the role does not allow (rejectedIdentifier) and bad identifiers", async () => {
    expectProblem(await c.post(c.dir.newOrder ?? "", { identifiers: [{ type: "dns", value: "www.example.org" }] }), "rejectedIdentifier", 400);
    expectProblem(await c.post(c.dir.newOrder ?? "", { identifiers: [{ type: "ip", value: "10.0.0.1" }] }), "rejectedIdentifier", 400);
    expectProblem(await c.post(c.dir.newOrder ?? "", { identifiers: [{ type: "email", value: "a@example.com" }] }), "unsupportedIdentifier", 400);
    expectProblem(await c.post(c.dir.newOrder ?? "", { identifiers: [] }), "malformed", 400);
  });

  it("a dns-01 validation that keeps failing invalidates the authorization and the order once the retries are spent", async () => {
    const order = await c.post(c.dir.newOrder ?? "", { identifiers: [{ type: "dns", value: "fail.example.com" }] });
    expect(order.status).toBe(201);
    txt.set("_acme-challenge.fail.example.com", ["wrong-digest"]);
    const ch = await passDns01(c, order.body.authorizations[0], false);
    // Patient validation: still processing after the first failure, which the error shows.
    expect(ch.body.status).toBe("processing");
    expect(ch.body.error.type).toBe("urn:ietf:params:acme:error:incorrectResponse");
    expect(ch.headers.get("retry-after")).toBe("1");
    let authz = await c.post(order.body.authorizations[0], "");
    for (let i = 0; i < 40 && authz.body.status === "pending"; i++) {
      await new Promise((r) => setTimeout(r, 500));
      authz = await c.post(order.body.authorizations[0], "");
    }
    expect(authz.body.status).toBe("invalid");
    const final = authz.body.challenges.find((x: { type: string }) => x.type === "dns-01");
    expect(final.status).toBe("invalid");
    expect(final.error.type).toBe("urn:ietf:params:acme:error:incorrectResponse");
    const attempts = await env.DB.prepare("SELECT attempts FROM pki_acme_challenges WHERE authz_id = ? AND type = 'dns-01'").bind(String(order.body.authorizations[0]).split("/").pop()).first<{ attempts: number }>();
    expect(attempts?.attempts).toBe(6);
    const o = await c.post(order.headers.get("location") ?? "", "");
    expect(o.body.status).toBe("invalid");
    expectProblem(await c.post(order.body.finalize, { csr: "AAAA" }), "orderNotReady", 403);
  });

  it("issues through the role: dns-01, finalize, chain verified against the CA, stored and listed", async () => {
    const order = await c.post(c.dir.newOrder ?? "", { identifiers: [{ type: "dns", value: "app.example.com" }, { type: "dns", value: "*.app.example.com" }] });
    expect(order.status, order.text).toBe(201);
    expect(order.headers.get("location")).toMatch(new RegExp(`^${base}/roles/web/acme/order/[0-9a-f]{32}$`));
    expect(order.body).toMatchObject({ status: "pending", identifiers: [{ type: "dns", value: "app.example.com" }, { type: "dns", value: "*.app.example.com" }] });
    const authzs = await Promise.all(order.body.authorizations.map((u: string) => c.post(u, "")));
    const wild = authzs.find((a) => a.body.wildcard === true);
    expect(wild?.body.identifier).toEqual({ type: "dns", value: "app.example.com" });
    expect(wild?.body.challenges.map((x: { type: string }) => x.type)).toEqual(["dns-01"]);
    // A CSR that does not name exactly the order's identifiers is refused before validation too.
    for (const u of order.body.authorizations) expect((await passDns01(c, u)).body.status).toBe("valid");
    expect((await c.post(order.headers.get("location") ?? "", "")).body.status).toBe("ready");
    const wrong = await makeCsr("app.example.com", ["app.example.com"]);
    expectProblem(await c.post(order.body.finalize, { csr: b64url(new Uint8Array(x509.PemConverter.decodeFirst(wrong.pem))) }), "badCSR", 400);

    const csr = await makeCsr("app.example.com", ["app.example.com", "*.app.example.com"]);
    const fin = await c.post(order.body.finalize, { csr: b64url(new Uint8Array(x509.PemConverter.decodeFirst(csr.pem))) });
    expect(fin.status, fin.text).toBe(200);
    expect(fin.body.status).toBe("valid");
    const certRes = await c.post(fin.body.certificate, "");
    const [leaf, ca] = pemBlocks(certRes.text);
    expect(await signedByEcCa(leaf ?? "", root)).toBe(true);
    expect(ca?.replace(/\s/g, "")).toBe(root.replace(/\s/g, ""));
    const cert = parseCert(leaf ?? "");
    expect(sans(cert).sort()).toEqual(["dns:*.app.example.com", "dns:app.example.com"]);
    // Only serverAuth unless allow_role_ext_key_usage (the role also sets client_flag).
    expect(cert.getExtension(x509.ExtendedKeyUsageExtension)?.usages).toEqual(["1.3.6.1.5.5.7.3.1"]);
    // The role's ttl (72h) applies, under config/acme max_ttl (240h).
    expect(Math.round((cert.notAfter.getTime() - cert.notBefore.getTime()) / 3600_000)).toBeLessThanOrEqual(73);
    const serial = (cert.serialNumber.toLowerCase().match(/../g) ?? []).join(":");
    expect((await list(`${path}/certs`)).body.data.keys).toContain(serial);
    expect((await c.post(`${base}/roles/web/acme/account/${(c.kid ?? "").split("/").pop()}/orders`, "")).body.orders).toContain(order.headers.get("location"));
    // Another account cannot read it.
    const other = await AcmeClient.open(`${base}/roles/web/acme/directory`);
    await other.newAccount();
    expectProblem(await other.post(fin.body.certificate, ""), "malformed", 404);
  });

  it("revoke-cert by the ordering account, then OCSP and the CRL show it revoked; again is alreadyRevoked", async () => {
    const { chain } = await issue(c, ["revoke.example.com"]);
    const leaf = pemBlocks(chain)[0] ?? "";
    const der = b64url(new Uint8Array(x509.PemConverter.decodeFirst(leaf)));
    const other = await AcmeClient.open(`${base}/roles/web/acme/directory`);
    await other.newAccount();
    expectProblem(await other.post(other.dir.revokeCert ?? "", { certificate: der }), "unauthorized", 401);
    expectProblem(await c.post(c.dir.revokeCert ?? "", { certificate: der, reason: 6 }), "badRevocationReason", 400);
    const r = await c.post(c.dir.revokeCert ?? "", { certificate: der, reason: 4 });
    expect(r.status, r.text).toBe(200);
    expectProblem(await c.post(c.dir.revokeCert ?? "", { certificate: der }), "alreadyRevoked", 400);

    const ocsp = await SELF.fetch(`${base}/ocsp`, { method: "POST", headers: { "content-type": "application/ocsp-request" }, body: await requestFor(root, leaf) });
    const parsed = parseResponse(new Uint8Array(await ocsp.arrayBuffer()));
    expect(parsed.basic?.tbsResponseData.responses[0]?.certStatus.revoked).toBeDefined();
    expect(parsed.basic?.tbsResponseData.responses[0]?.certStatus.revoked?.revocationReason?.reason).toBe(4);
    const crl = new x509.X509Crl((await read(`${path}/crl/pem`)).text);
    expect(crl.entries.map((e) => e.serialNumber.toLowerCase())).toContain(parseCert(leaf).serialNumber.toLowerCase());
    // The reason is recorded and written as the entry's reasonCode (RFC 5280 §5.3.1): 4, superseded.
    expect(crl.entries.find((e) => e.serialNumber.toLowerCase() === parseCert(leaf).serialNumber.toLowerCase())?.reason).toBe(4);
  });

  it("revoke-cert signed by the certificate's own key (jwk)", async () => {
    const { chain, keys } = await issue(c, ["own-key.example.com"]);
    const leaf = pemBlocks(chain)[0] ?? "";
    const der = b64url(new Uint8Array(x509.PemConverter.decodeFirst(leaf)));
    const certKey = await keyFromPair(keys, "ES256");
    const stranger = await newKey("ES256");
    expectProblem(await c.post(c.dir.revokeCert ?? "", { certificate: der }, { useJwk: true, key: stranger }), "unauthorized", 401);
    expect((await c.post(c.dir.revokeCert ?? "", { certificate: der }, { useJwk: true, key: certKey })).status).toBe(200);
    expect((await read(`${path}/cert/${(parseCert(leaf).serialNumber.toLowerCase().match(/../g) ?? []).join(":")}`)).body.data.revocation_time).toBeGreaterThan(0);
    // No reason given: unspecified, so the CRL entry carries no reasonCode.
    const crl = new x509.X509Crl((await read(`${path}/crl/pem`)).text);
    const entry = crl.entries.find((e) => e.serialNumber.toLowerCase() === parseCert(leaf).serialNumber.toLowerCase());
    expect(entry).toBeDefined();
    expect(entry?.reason).toBeUndefined();
  });
});

describe("EAB, key-change, deactivation, directory policy", () => {
  it("EAB-required: no account without a binding; a key is single-use and bound to its directory", async () => {
    await write(`${path}/config/acme`, { eab_policy: "new-account-required" });
    const c = await AcmeClient.open(`${base}/acme/directory`, "ES384");
    expect((await send("GET", `${base}/acme/directory`)).body.meta).toEqual({ externalAccountRequired: true });
    expectProblem(await c.newAccount(), "externalAccountRequired", 401);
    await write(`${path}/acme/new-eab`, {}, { token: null }, 403);
    const eab = (await write(`${path}/acme/new-eab`, {})).body.data;
    expect(eab).toMatchObject({ key_type: "hs", acme_directory: "acme/directory" });
    expect(eab.key).toMatch(/^vault-eab-0-/);
    const roleEab = (await write(`${path}/roles/web/acme/new-eab`, {})).body.data;
    expect((await list(`${path}/eab`)).body.data.keys).toEqual(expect.arrayContaining([eab.id, roleEab.id]));
    // A key of another directory, a wrong MAC key: unauthorized.
    expectProblem(await c.newAccount({ externalAccountBinding: await eabJws(roleEab.id, roleEab.key, c.dir.newAccount ?? "", c.key.jwk) }), "unauthorized", 401);
    expectProblem(await c.newAccount({ externalAccountBinding: await eabJws(eab.id, roleEab.key, c.dir.newAccount ?? "", c.key.jwk) }), "unauthorized", 401);
    const ok = await c.newAccount({ externalAccountBinding: await eabJws(eab.id, eab.key, c.dir.newAccount ?? "", c.key.jwk) });
    expect(ok.status, ok.text).toBe(201);
    const d = await AcmeClient.open(`${base}/acme/directory`);
    expectProblem(await d.newAccount({ externalAccountBinding: await eabJws(eab.id, eab.key, d.dir.newAccount ?? "", d.key.jwk) }), "unauthorized", 401);
    expect((await list(`${path}/eab`)).body.data.keys).not.toContain(eab.id);
    await del(`${path}/eab/${roleEab.id}`, {}, 200);
    expect((await del(`${path}/eab/${roleEab.id}`, {}, 200)).body.warnings[0]).toContain("No key id found");
    // The sign-verbatim directory issues names no role lists.
    await issue(c, ["anything.example.net"]);
    // always-required: an account made without a binding may no longer order.
    await write(`${path}/config/acme`, { eab_policy: "not-required" });
    const plain = await AcmeClient.open(`${base}/roles/web/acme/directory`);
    expect((await plain.newAccount()).status).toBe(201);
    await write(`${path}/config/acme`, { eab_policy: "always-required" });
    expectProblem(await plain.post(plain.dir.newOrder ?? "", { identifiers: [{ type: "dns", value: "x.example.com" }] }), "externalAccountRequired", 401);
    await write(`${path}/config/acme`, { eab_policy: "not-required" });
  });

  it("key-change rolls the account key over; the old key stops working; a taken key is 409", async () => {
    const c = await AcmeClient.open(`${base}/roles/web/acme/directory`);
    await c.newAccount();
    const oldKey = c.key;
    const next = await newKey("EdDSA");
    const url = c.dir.keyChange ?? "";
    const inner = await signJws(next, { url, jwk: next.jwk }, { account: c.kid, oldKey: oldKey.jwk });
    const r = await c.post(url, inner);
    expect(r.status, r.text).toBe(200);
    expectProblem(await c.post(c.kid ?? "", ""), "malformed", 400);
    c.key = next;
    expect((await c.post(c.kid ?? "", "")).body.status).toBe("valid");
    const byKey = await c.post(c.dir.newAccount ?? "", { onlyReturnExisting: true }, { useJwk: true });
    expect(byKey.headers.get("location")).toBe(c.kid);

    const d = await AcmeClient.open(`${base}/roles/web/acme/directory`);
    await d.newAccount();
    const taken = await signJws(next, { url, jwk: next.jwk }, { account: d.kid, oldKey: d.key.jwk });
    const conflict = await d.post(url, taken);
    expectProblem(conflict, "malformed", 409);
    expect(conflict.headers.get("location")).toBe(c.kid);
    const badInner = await signJws(next, { url, jwk: next.jwk }, { account: d.kid, oldKey: next.jwk });
    expectProblem(await d.post(url, badInner), "unauthorized", 401);
  });

  it("a deactivated account is refused; forbid closes acme/ but not roles/:role/acme/", async () => {
    const c = await AcmeClient.open(`${base}/roles/web/acme/directory`);
    await c.newAccount();
    expect((await c.post(c.kid ?? "", { status: "deactivated" })).body.status).toBe("deactivated");
    expectProblem(await c.post(c.kid ?? "", ""), "unauthorized", 401);
    expectProblem(await c.newAccount({ onlyReturnExisting: true }), "unauthorized", 401);
    await write(`${path}/config/acme`, { default_directory_policy: "forbid" });
    expectProblem(await send("GET", `${base}/acme/directory`), "unauthorized", 403);
    expect((await send("GET", `${base}/roles/web/acme/directory`)).status).toBe(200);
    await write(`${path}/config/acme`, { default_directory_policy: "role:web" });
    const viaDefault = await AcmeClient.open(`${base}/acme/directory`);
    await viaDefault.newAccount();
    expectProblem(await viaDefault.post(viaDefault.dir.newOrder ?? "", { identifiers: [{ type: "dns", value: "x.example.org" }] }), "rejectedIdentifier", 400);
  });

  it("disabling the mount removes its ACME rows", async () => {
    const count = async () => (await env.DB.prepare("SELECT (SELECT count(*) FROM pki_acme_accounts WHERE mount_id = m.id) + (SELECT count(*) FROM pki_acme_orders WHERE mount_id = m.id) + (SELECT count(*) FROM pki_acme_nonces WHERE mount_id = m.id) AS n FROM mounts m WHERE m.path = ?").bind(`${path}/`).first<{ n: number }>())?.n ?? -1;
    expect(await count()).toBeGreaterThan(0);
    const id = (await env.DB.prepare("SELECT id FROM mounts WHERE path = ?").bind(`${path}/`).first<{ id: string }>())?.id;
    await del(`sys/mounts/${path}`);
    const left = await env.DB.prepare("SELECT count(*) AS n FROM pki_acme_accounts WHERE mount_id = ?").bind(id ?? "").first<{ n: number }>();
    expect(left?.n).toBe(0);
  });
});
