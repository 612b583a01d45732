/**
 * ACME beyond RFC 8555's core, through the Worker with the WebCrypto client of
 * test/helpers/acme-client.ts: renewal information (RFC 9773: the certID computed here from the
 * certificate with @peculiar/asn1-x509, the window before and after a revocation and after an
 * operator marks the issuer, `replaces` accepted once then alreadyReplaced), profiles
 * (draft-aaron-acme-profiles: meta.profiles, two profiles → two roles and their validity,
 * invalidProfile, config/acme validation), patient validation (a TXT record published seconds
 * after the challenge POST still validates; the schedule is ACME_RETRY_DELAYS_S=1,1,1,1,1 here),
 * and RFC 8555 details: 415 for a body that is not application/jose+json, HEAD new-nonce 200,
 * Retry-After on a processing order.
 */
import { env } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AsnConvert } from "@peculiar/asn1-schema";
import { AuthorityKeyIdentifier, Certificate, id_ce_authorityKeyIdentifier } from "@peculiar/asn1-x509";
import { AcmeClient, b64url, fromB64url, pemBlocks, send, type AcmeResponse } from "../helpers/acme-client";
import { read, tokenWithPolicy, write } from "../helpers/api";
import { fakeDohResolver } from "../helpers/fake-doh";
import { installFakes } from "../helpers/fake-router";
import { makeCsr, pkiWithRoot, x509 } from "../helpers/pki";

const DOH = "https://doh.ari.test/dns-query";
const txt = new Map<string, string[]>();
const fakeDoh = fakeDohResolver(txt);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const digest = async (s: string) => b64url(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(s))));

function expectProblem(r: AcmeResponse, type: string, status: number): void {
  expect(r.status, r.text).toBe(status);
  expect(r.headers.get("content-type")).toBe("application/problem+json");
  expect(r.body.type).toBe(`urn:ietf:params:acme:error:${type}`);
}

/** RFC 9773 §4.1 from the certificate itself: base64url(AKI keyIdentifier) "." base64url(serial octets). */
function certIdFromPem(pem: string): string {
  const cert = AsnConvert.parse(fromB64url(pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "").replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")), Certificate);
  const ext = cert.tbsCertificate.extensions?.find((e) => e.extnID === id_ce_authorityKeyIdentifier);
  const aki = AsnConvert.parse(ext?.extnValue.buffer ?? new ArrayBuffer(0), AuthorityKeyIdentifier);
  return `${b64url(new Uint8Array(aki.keyIdentifier?.buffer ?? new ArrayBuffer(0)))}.${b64url(new Uint8Array(cert.tbsCertificate.serialNumber))}`;
}

let path = "";
let base = "";
let uninstall: () => void = () => undefined;

beforeAll(async () => {
  ({ path } = await pkiWithRoot());
  base = `http://lanyard.test/v1/${path}`;
  const names = { allowed_domains: ["example.com"], allow_subdomains: true, key_type: "any" };
  await write(`${path}/roles/web`, { ...names, ttl: "240h" });
  await write(`${path}/roles/short`, { ...names, ttl: "160h" });
  await write(`${path}/roles/long`, { ...names, ttl: "720h", max_ttl: "720h" });
  await write(`${path}/config/cluster`, { path: base });
  await write(`${path}/config/acme`, { enabled: true, dns_resolver: DOH, default_directory_policy: "role:web" });
  uninstall = installFakes([{ hosts: ["doh.ari.test"], fake: fakeDoh }]);
});
afterAll(() => uninstall());

/** Validates every authorization of an order with dns-01 (record published at once). */
async function validate(c: AcmeClient, order: AcmeResponse): Promise<void> {
  for (const z of order.body.authorizations) {
    const authz = await c.post(z, "");
    const ch = authz.body.challenges.find((x: { type: string }) => x.type === "dns-01");
    txt.set(`_acme-challenge.${authz.body.identifier.value}`, [await digest(await c.keyAuthorization(ch.token))]);
    expect((await c.post(ch.url, {})).body.status).toBe("valid");
  }
}

/** new-order (with extra payload members), validated and finalized; the leaf PEM. */
async function issue(c: AcmeClient, name: string, extra: Record<string, unknown> = {}): Promise<{ order: AcmeResponse; leaf: string }> {
  const order = await c.post(c.dir.newOrder ?? "", { identifiers: [{ type: "dns", value: name }], ...extra });
  expect(order.status, order.text).toBe(201);
  await validate(c, order);
  const csr = await makeCsr(name, [name]);
  const fin = await c.post(order.body.finalize, { csr: b64url(new Uint8Array(x509.PemConverter.decodeFirst(csr.pem))) });
  expect(fin.status, fin.text).toBe(200);
  const chain = await c.post(fin.body.certificate, "");
  return { order: fin, leaf: pemBlocks(chain.text)[0] ?? "" };
}

const validity = (pem: string): { nb: number; na: number } => {
  const c = new x509.X509Certificate(pem);
  return { nb: c.notBefore.getTime(), na: c.notAfter.getTime() };
};

describe("RFC 8555 details", () => {
  it("415 for a body that is not application/jose+json, HEAD new-nonce 200, Retry-After on a processing order", async () => {
    const c = await AcmeClient.open(`${base}/acme/directory`);
    expect((await c.newAccount()).status).toBe(201);
    const res = await fetchJson(c.dir.newOrder ?? "", "application/json");
    expect(res.status).toBe(415);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    expect((await res.json<{ type: string; detail: string }>()).detail).toContain("application/jose+json");
    expect(res.headers.get("replay-nonce")).toMatch(/^[A-Za-z0-9_-]+$/);

    const head = await send("HEAD", c.dir.newNonce ?? "");
    expect(head.status).toBe(200);
    expect(head.headers.get("replay-nonce")).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(head.headers.get("cache-control")).toBe("no-store");
    expect((await send("GET", c.dir.newNonce ?? "")).status).toBe(204);

    // An order caught while its certificate is being issued (status processing, RFC 8555 §7.1.6).
    const order = await c.post(c.dir.newOrder ?? "", { identifiers: [{ type: "dns", value: "busy.example.com" }] });
    const id = (order.headers.get("location") ?? "").split("/").pop() ?? "";
    await env.DB.prepare("UPDATE pki_acme_orders SET status = 'processing' WHERE id = ?").bind(id).run();
    const busy = await c.post(order.headers.get("location") ?? "", "");
    expect(busy.body.status).toBe("processing");
    expect(busy.headers.get("retry-after")).toBe("2");
  });
});

async function fetchJson(url: string, contentType: string): Promise<Response> {
  const { SELF } = await import("cloudflare:test");
  return SELF.fetch(url, { method: "POST", headers: { "content-type": contentType }, body: "{}" });
}

describe("renewal information (RFC 9773)", () => {
  let c: AcmeClient;
  beforeAll(async () => {
    c = await AcmeClient.open(`${base}/acme/directory`);
    await c.newAccount();
  });

  it("a certID whose parts start or end with - or _ reaches the resource (unknown: 404 problem); a malformed one is a 400 problem", async () => {
    for (const id of ["-abc.def", "abc-.def", "abc.-def", "abc.def-", "_abc._def", "-_.-_"]) {
      const r = await send("GET", `${c.dir.renewalInfo}/${id}`);
      expect([r.status, r.headers.get("content-type")], id).toEqual([404, "application/problem+json"]);
    }
    // Not base64url "." base64url (a part of 1 mod 4 characters holds no whole octet; a slash): malformed, never a 500.
    for (const id of ["_abc._def_", "abc/def.ghi"]) {
      const r = await send("GET", `${c.dir.renewalInfo}/${id}`);
      expect([r.status, r.headers.get("content-type")], id).toEqual([400, "application/problem+json"]);
    }
  });

  it("a window around two thirds of the validity; after revocation a window in the past", async () => {
    const { leaf } = await issue(c, "ari.example.com");
    const id = certIdFromPem(leaf);
    const r = await send("GET", `${c.dir.renewalInfo}/${id}`);
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get("retry-after")).toBe("21600");
    const { nb, na } = validity(leaf);
    const ideal = na - (na + 1000 - nb) / 3;
    const start = Date.parse(r.body.suggestedWindow.start);
    const end = Date.parse(r.body.suggestedWindow.end);
    expect(start).toBeLessThan(end);
    expect(Math.abs(start - (ideal - (na - nb) / 100))).toBeLessThan(2000);
    expect(Math.abs(end - (ideal + (na - nb) / 100))).toBeLessThan(2000);
    expect(r.body.explanationURL).toBeUndefined();

    await write(`${path}/revoke`, { serial_number: new x509.X509Certificate(leaf).serialNumber.replace(/(..)(?!$)/g, "$1:") });
    const after = await send("GET", `${c.dir.renewalInfo}/${id}`);
    expect(Date.parse(after.body.suggestedWindow.end)).toBeLessThan(Date.now());
    expect(Date.parse(after.body.suggestedWindow.start)).toBeLessThan(Date.parse(after.body.suggestedWindow.end));

    // A certID whose key identifier is not the issuer's, an unknown serial, and garbage.
    expectProblem(await send("GET", `${c.dir.renewalInfo}/${b64url(new Uint8Array(20))}.${id.split(".")[1]}`), "malformed", 404);
    expectProblem(await send("GET", `${c.dir.renewalInfo}/${id.split(".")[0]}.AQID`), "malformed", 404);
    expectProblem(await send("GET", `${c.dir.renewalInfo}/not-a-cert-id`), "malformed", 400);
  });

  it("an operator marks the issuer (sudo): earlier certificates get a past window with the explanationURL, later ones not; then a role", async () => {
    const { leaf } = await issue(c, "mark.example.com");
    const noSudo = await tokenWithPolicy(`path "${path}/acme/renewal-marks" { capabilities = ["create", "update", "read"] }`);
    await write(`${path}/acme/renewal-marks`, { issuer_ref: "root-ca" }, { token: noSudo }, 403);
    expect((await write(`${path}/acme/renewal-marks`, { issuer_ref: "nope" }, {}, 400)).body.errors[0]).toContain("issuer_ref");
    expect((await write(`${path}/acme/renewal-marks`, { issuer_ref: "root-ca", role: "web" }, {}, 400)).body.errors[0]).toContain("issuer_ref");
    const marked = await write(`${path}/acme/renewal-marks`, { issuer_ref: "root-ca", explanation_url: "https://status.example.com/incident-1" });
    expect(marked.body.data).toMatchObject({ kind: "issuer", explanation_url: "https://status.example.com/incident-1" });
    const r = await send("GET", `${c.dir.renewalInfo}/${certIdFromPem(leaf)}`);
    expect(Date.parse(r.body.suggestedWindow.end)).toBeLessThan(Date.now());
    expect(r.body.explanationURL).toBe("https://status.example.com/incident-1");
    expect((await read(`${path}/acme/renewal-marks`)).body.data.marks[0]).toMatchObject({ kind: "issuer", ref: marked.body.data.ref });

    // The replacement, issued after the mark, is not asked to renew again.
    const renewed = await issue(c, "mark.example.com", { replaces: certIdFromPem(leaf) });
    const again = await send("GET", `${c.dir.renewalInfo}/${certIdFromPem(renewed.leaf)}`);
    expect(Date.parse(again.body.suggestedWindow.start)).toBeGreaterThan(Date.now());

    // A role's mark reaches the certificates ordered with that role (acme/ issues as role:web).
    expect((await write(`${path}/acme/renewal-marks`, { role: "web" })).body.data).toMatchObject({ kind: "role", ref: "web", explanation_url: "" });
    const byRole = await send("GET", `${c.dir.renewalInfo}/${certIdFromPem(renewed.leaf)}`);
    expect(Date.parse(byRole.body.suggestedWindow.end)).toBeLessThan(Date.now());
    expect(byRole.body.explanationURL).toBeUndefined();
  });

  it("replaces: echoed once, alreadyReplaced the second time, refused for another account's certificate, free again once the order failed", async () => {
    const { leaf } = await issue(c, "renew.example.com");
    const id = certIdFromPem(leaf);
    const first = await c.post(c.dir.newOrder ?? "", { identifiers: [{ type: "dns", value: "renew.example.com" }], replaces: id });
    expect(first.status, first.text).toBe(201);
    expect(first.body.replaces).toBe(id);
    expect((await c.post(first.headers.get("location") ?? "", "")).body.replaces).toBe(id);
    expectProblem(await c.post(c.dir.newOrder ?? "", { identifiers: [{ type: "dns", value: "renew.example.com" }], replaces: id }), "alreadyReplaced", 409);
    // The same certificate under another key identifier is not another certID.
    expectProblem(await c.post(c.dir.newOrder ?? "", { identifiers: [{ type: "dns", value: "renew.example.com" }], replaces: `${b64url(new Uint8Array(20))}.${id.split(".")[1]}` }), "malformed", 400);
    const other = await AcmeClient.open(`${base}/acme/directory`);
    await other.newAccount();
    expectProblem(await other.post(other.dir.newOrder ?? "", { identifiers: [{ type: "dns", value: "renew.example.com" }], replaces: id }), "unauthorized", 403);
    expectProblem(await c.post(c.dir.newOrder ?? "", { identifiers: [{ type: "dns", value: "renew.example.com" }], replaces: "x" }), "malformed", 400);
    // An order that failed gives the certificate up (RFC 9773 §5): here its authorization is deactivated.
    expect((await c.post(first.body.authorizations[0], { status: "deactivated" })).body.status).toBe("deactivated");
    const retry = await c.post(c.dir.newOrder ?? "", { identifiers: [{ type: "dns", value: "renew.example.com" }], replaces: id });
    expect(retry.status, retry.text).toBe(201);
    expect(retry.body.replaces).toBe(id);
  });
});

describe("profiles", () => {
  it("config/acme profiles: roles must exist; meta.profiles on directories without a role", async () => {
    expect((await write(`${path}/config/acme`, { profiles: { shortlived: "missing" } }, {}, 400)).body.errors[0]).toContain("profiles");
    expect((await write(`${path}/config/acme`, { profiles: { "bad name": "short" } }, {}, 400)).body.errors[0]).toContain("profiles");
    const cfg = await write(`${path}/config/acme`, { profiles: { shortlived: "short", classic: "long" } });
    expect(cfg.body.data.profiles).toEqual({ shortlived: "short", classic: "long" });
    const dir = await send("GET", `${base}/acme/directory`);
    expect(Object.keys(dir.body.meta.profiles).sort()).toEqual(["classic", "shortlived"]);
    expect(dir.body.meta.profiles.shortlived).toContain("short");
    expect((await send("GET", `${base}/roles/web/acme/directory`)).body.meta.profiles).toBeUndefined();
  });

  it("two profiles, two roles: the order echoes its profile and the certificate has its role's validity", async () => {
    const c = await AcmeClient.open(`${base}/acme/directory`);
    await c.newAccount();
    const short = await issue(c, "s.example.com", { profile: "shortlived" });
    expect(short.order.body.profile).toBe("shortlived");
    const long = await issue(c, "l.example.com", { profile: "classic" });
    expect(long.order.body.profile).toBe("classic");
    const plain = await issue(c, "p.example.com");
    expect(plain.order.body.profile).toBeUndefined();
    const hours = (pem: string) => Math.round((validity(pem).na - validity(pem).nb) / 3600_000);
    expect(hours(short.leaf)).toBe(160);
    expect(hours(long.leaf)).toBe(720);
    expect(hours(plain.leaf)).toBe(240);
    expectProblem(await c.post(c.dir.newOrder ?? "", { identifiers: [{ type: "dns", value: "u.example.com" }], profile: "tlsclient" }), "invalidProfile", 400);
    const viaRole = await AcmeClient.open(`${base}/roles/web/acme/directory`);
    await viaRole.newAccount();
    expectProblem(await viaRole.post(viaRole.dir.newOrder ?? "", { identifiers: [{ type: "dns", value: "u.example.com" }], profile: "classic" }), "invalidProfile", 400);
  });
});

describe("patient validation", () => {
  it("a TXT record that appears after the challenge POST still validates; the error shows the failure meanwhile", async () => {
    const c = await AcmeClient.open(`${base}/acme/directory`);
    await c.newAccount();
    const order = await c.post(c.dir.newOrder ?? "", { identifiers: [{ type: "dns", value: "late.example.com" }] });
    const authzUrl = order.body.authorizations[0];
    const authz = await c.post(authzUrl, "");
    const ch = authz.body.challenges.find((x: { type: string }) => x.type === "dns-01");
    txt.delete("_acme-challenge.late.example.com");
    const posted = await c.post(ch.url, {});
    expect(posted.body.status).toBe("processing");
    expect(posted.body.error.type).toBe("urn:ietf:params:acme:error:incorrectResponse");
    const during = await c.post(authzUrl, "");
    expect(during.body.status).toBe("pending");
    expect(during.headers.get("retry-after")).toBe("2");
    await sleep(2500);
    txt.set("_acme-challenge.late.example.com", [await digest(await c.keyAuthorization(ch.token))]);
    let now = during;
    for (let i = 0; i < 30 && now.body.status === "pending"; i++) {
      await sleep(300);
      now = await c.post(authzUrl, "");
    }
    expect(now.body.status).toBe("valid");
    const done = now.body.challenges.find((x: { type: string }) => x.type === "dns-01");
    expect(done.status).toBe("valid");
    expect(done.error).toBeUndefined();
    expect((await c.post(order.headers.get("location") ?? "", "")).body.status).toBe("ready");
  });
});
