/**
 * The OCSP responder over HTTP (docs/pki-ocsp.md, RFC 6960, RFC 5019): GET and POST forms,
 * good / revoked / unknown, nonce echo, the ResponderID and times, signatures checked with the
 * issuer's public key by an independent parser (@peculiar/asn1-ocsp), ocsp_disable and the
 * ocsp-signing usage, garbage requests answered with OCSP error statuses (never a JSON 500),
 * and the cache headers of RFC 5019 §6.2.
 */
import { SELF, env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { openDb } from "../../src/core/db/client";
import { insertRevoked } from "../../src/engines/pki/storage/revocation-store";
import { patch, read, write } from "../helpers/api";
import { buildRequest, certId, Extension, OctetString, parseResponse, requestFor, serialOf, toBase64, verifySignature } from "../helpers/ocsp";
import { parseCert, pkiWithRoot } from "../helpers/pki";

interface OcspHttp {
  status: number;
  headers: Headers;
  der: Uint8Array;
}

async function post(path: string, body: Uint8Array | string, contentType = "application/ocsp-request", token?: string): Promise<OcspHttp> {
  const headers: Record<string, string> = { "content-type": contentType };
  if (token) headers["x-service-token"] = token;
  const res = await SELF.fetch(`http://lanyard.test/v1/${path}/ocsp`, { method: "POST", headers, body });
  return { status: res.status, headers: res.headers, der: new Uint8Array(await res.arrayBuffer()) };
}

/** GET with the request in the path; `escape` URL-escapes it as RFC 6960 Appendix A.1 asks. */
async function get(path: string, der: Uint8Array | string, escape = true): Promise<OcspHttp> {
  const b64 = typeof der === "string" ? der : toBase64(der);
  const res = await SELF.fetch(`http://lanyard.test/v1/${path}/ocsp/${escape ? encodeURIComponent(b64) : b64}`);
  return { status: res.status, headers: res.headers, der: new Uint8Array(await res.arrayBuffer()) };
}

const UNAUTHORIZED = [0x30, 0x03, 0x0a, 0x01, 0x06];
const MALFORMED = [0x30, 0x03, 0x0a, 0x01, 0x01];

async function setup(keyType: "ec" | "rsa" = "ec") {
  const ctx = await pkiWithRoot({ keyType, keyBits: keyType === "rsa" ? 2048 : 256 });
  await write(`${ctx.path}/roles/r`, { allow_any_name: true, key_type: "ec", max_ttl: "24h" });
  const mounts = await read("sys/mounts");
  return { ...ctx, mountId: mounts.body.data[`${ctx.path}/`].uuid as string };
}

async function issue(path: string, cn = "leaf.example") {
  const r = await write(`${path}/issue/r`, { common_name: cn, ttl: "1h" });
  return { pem: r.body.data.certificate as string, serial: r.body.data.serial_number as string };
}

/** Revokes through the API; returns the recorded revocation time (Unix seconds). */
async function revoke(path: string, serial: string): Promise<number> {
  return (await write(`${path}/revoke`, { serial_number: serial })).body.data.revocation_time as number;
}

/**
 * Records a revocation directly (src/engines/pki/storage/revocation-store.ts), for entries the API cannot make:
 * one that names an issuer other than the certificate's.
 */
async function insertRevocation(mountId: string, serial: string, issuerId: string, revocationTime: number, leafPem: string) {
  const der = toBase64(new Uint8Array(parseCert(leafPem).rawData));
  await insertRevoked(openDb(env.DB), { mountId, serial, issuerId, revocationTime, notAfter: revocationTime + 3600, der, createdAt: Date.now() });
}

const setCrlConfig = (path: string, body: Record<string, unknown>) => write(`${path}/config/crl`, body);

function single(parsed: ReturnType<typeof parseResponse>, i = 0) {
  const r = parsed.basic?.tbsResponseData.responses[i];
  if (!r) throw new Error(`no SingleResponse ${i}`);
  return r;
}

describe("OCSP: good, revoked and unknown", () => {
  it("POST: a signed BasicOCSPResponse saying good, by name, with the request's CertID and 12h validity", async () => {
    const { path, root } = await setup();
    const leaf = await issue(path);
    const req = await requestFor(root, leaf.pem);
    const before = Math.floor(Date.now() / 1000) * 1000;
    const res = await post(path, req);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/ocsp-response");
    const parsed = parseResponse(res.der);
    expect(parsed.status).toBe(0);
    expect(await verifySignature(parsed, root)).toBe("1.2.840.10045.4.3.2");
    const tbs = parsed.basic?.tbsResponseData;
    // ResponderID byName is the issuer's subject (as upstream); no certificates are embedded.
    expect(tbs?.responderID.byName).toBeDefined();
    expect(tbs?.responderID.byKey).toBeUndefined();
    expect(parsed.basic?.certs).toBeUndefined();
    const s = single(parsed);
    expect(s.certStatus.good).toBeNull();
    expect(s.certStatus.revoked).toBeUndefined();
    expect(toBase64(new Uint8Array(s.certID.serialNumber))).toBe(toBase64(new Uint8Array(serialOf(leaf.pem))));
    const thisUpdate = s.thisUpdate.getTime();
    expect(thisUpdate).toBeGreaterThanOrEqual(before);
    expect(thisUpdate).toBeLessThanOrEqual(Date.now());
    expect(s.nextUpdate?.getTime()).toBe(thisUpdate + 12 * 3600 * 1000);
    expect(tbs?.producedAt.getTime()).toBe(thisUpdate);
    expect(tbs?.responseExtensions).toBeUndefined();
  });

  it("needs no token, and a token does not change the answer", async () => {
    const { path, root } = await setup();
    const leaf = await issue(path);
    const req = await requestFor(root, leaf.pem);
    expect((await post(path, req, "application/ocsp-request", "not-a-token")).status).toBe(200);
    expect((await get(path, req)).status).toBe(200);
  });

  it("revoked: revocationTime as recorded and reason unspecified; other serials stay good", async () => {
    const { path, root } = await setup();
    const leaf = await issue(path);
    const other = await issue(path, "other.example");
    const when = await revoke(path, leaf.serial);
    for (const res of [await post(path, await requestFor(root, leaf.pem)), await get(path, await requestFor(root, leaf.pem))]) {
      expect(res.status).toBe(200);
      const parsed = parseResponse(res.der);
      await verifySignature(parsed, root);
      const revoked = single(parsed).certStatus.revoked;
      expect(revoked?.revocationTime.getTime()).toBe(when * 1000);
      expect(revoked?.revocationReason?.reason).toBe(0);
    }
    expect(single(parseResponse((await post(path, await requestFor(root, other.pem))).der)).certStatus.good).toBeNull();
  });

  it("a revocation recorded for an issuer the CertID does not name is not reported under it", async () => {
    const { path, root, mountId } = await setup();
    const leaf = await issue(path);
    // The entry names an issuer that does not exist (any more): the CertID's issuer does not own it.
    await insertRevocation(mountId, leaf.serial, "00000000-0000-0000-0000-000000000000", Math.floor(Date.now() / 1000), leaf.pem);
    const parsed = parseResponse((await post(path, await requestFor(root, leaf.pem))).der);
    expect(parsed.status).toBe(0);
    expect(single(parsed).certStatus.unknown).toBeNull();
  });

  it("a serial never issued under our issuer is good (upstream behaviour)", async () => {
    const { path, root } = await setup();
    const parsed = parseResponse((await post(path, buildRequest([await certId(root, Uint8Array.of(0x12, 0x34).buffer)]))).der);
    expect(single(parsed).certStatus.good).toBeNull();
  });

  it("unknown: a CertID for another CA is answered unknown, signed by the default issuer", async () => {
    const { path, root } = await setup();
    const foreign = await pkiWithRoot({ cn: "Foreign Root" });
    const parsed = parseResponse((await post(path, await requestFor(foreign.root, foreign.root))).der);
    expect(parsed.status).toBe(0);
    await verifySignature(parsed, root);
    expect(single(parsed).certStatus.unknown).toBeNull();
  });

  it("SHA-256 CertIDs are matched and repeated with their algorithm", async () => {
    const { path, root } = await setup();
    const leaf = await issue(path);
    const parsed = parseResponse((await post(path, await requestFor(root, leaf.pem, { hash: "SHA-256" }))).der);
    const s = single(parsed);
    expect(s.certStatus.good).toBeNull();
    expect(s.certID.hashAlgorithm.algorithm).toBe("2.16.840.1.101.3.4.2.1");
  });

  it("every CertID of a request is answered: good, revoked and unknown together", async () => {
    const { path, root } = await setup();
    const a = await issue(path, "a.example");
    const b = await issue(path, "b.example");
    await revoke(path, b.serial);
    const foreign = await pkiWithRoot({ cn: "Elsewhere" });
    const req = buildRequest([await certId(root, serialOf(a.pem)), await certId(root, serialOf(b.pem), "SHA-256"), await certId(foreign.root, serialOf(foreign.root))]);
    const parsed = parseResponse((await post(path, req)).der);
    await verifySignature(parsed, root);
    expect(parsed.basic?.tbsResponseData.responses).toHaveLength(3);
    expect(single(parsed, 0).certStatus.good).toBeNull();
    expect(single(parsed, 1).certStatus.revoked).toBeDefined();
    expect(single(parsed, 2).certStatus.unknown).toBeNull();
  });

  it("RSA issuers sign with sha256WithRSAEncryption (its revocation_signature_algorithm's hash)", async () => {
    const { path, root } = await setup("rsa");
    const leaf = await issue(path);
    const parsed = parseResponse((await post(path, await requestFor(root, leaf.pem))).der);
    expect(await verifySignature(parsed, root)).toBe("1.2.840.113549.1.1.11");
    expect(single(parsed).certStatus.good).toBeNull();
  });

  it("RSA with revocation_signature_algorithm SHA384WithRSAPSS signs PKCS#1 v1.5 with SHA-384, as upstream", async () => {
    const { path, root, issuerId } = await setup("rsa");
    await patch(`${path}/issuer/${issuerId}`, { revocation_signature_algorithm: "SHA384WithRSAPSS" });
    const leaf = await issue(path);
    const parsed = parseResponse((await post(path, await requestFor(root, leaf.pem))).der);
    expect(await verifySignature(parsed, root)).toBe("1.2.840.113549.1.1.12");
  });

  it("Ed25519 issuers sign with Ed25519", async () => {
    const { path, root } = await setup();
    const ed = await pkiWithRoot({ keyType: "ed25519", keyBits: 0, cn: "Ed Root" });
    await write(`${ed.path}/roles/r`, { allow_any_name: true, key_type: "ec", max_ttl: "24h" });
    const leaf = await issue(ed.path);
    const parsed = parseResponse((await post(ed.path, await requestFor(ed.root, leaf.pem))).der);
    expect(await verifySignature(parsed, ed.root)).toBe("1.3.101.112");
    expect(single(parsed).certStatus.good).toBeNull();
    expect(root).not.toBe(ed.root);
  });
});

describe("OCSP: nonce", () => {
  const nonce = Uint8Array.from({ length: 16 }, (_, i) => i * 7 + 1);

  it("echoes the request's nonce extension (RFC 8954) in POST and GET answers", async () => {
    const { path, root } = await setup();
    const leaf = await issue(path);
    const req = await requestFor(root, leaf.pem, { nonce });
    for (const res of [await post(path, req), await get(path, req)]) {
      const parsed = parseResponse(res.der);
      await verifySignature(parsed, root);
      const exts = parsed.basic?.tbsResponseData.responseExtensions ?? [];
      expect(exts).toHaveLength(1);
      expect(exts[0]?.extnID).toBe("1.3.6.1.5.5.7.48.1.2");
      // extnValue holds the nonce OCTET STRING: 04 10 <16 bytes>.
      expect([...new Uint8Array(exts[0]?.extnValue.buffer ?? new ArrayBuffer(0))]).toEqual([0x04, 16, ...nonce]);
    }
  });

  it("refuses a nonce longer than 32 octets, and unknown critical extensions, as malformed", async () => {
    const { path, root } = await setup();
    const leaf = await issue(path);
    const id = await certId(root, serialOf(leaf.pem));
    expect([...(await post(path, buildRequest([id], { nonce: new Uint8Array(33) }))).der]).toEqual(MALFORMED);
    const critical = new Extension({ extnID: "1.2.3.4.5", critical: true, extnValue: new OctetString(new Uint8Array([5, 0])) });
    const res = await post(path, buildRequest([id], { extensions: [critical] }));
    expect(res.status).toBe(400);
    expect([...res.der]).toEqual(MALFORMED);
    // The same extension, not critical, is ignored (RFC 6960 §4.4).
    const plain = new Extension({ extnID: "1.2.3.4.5", critical: false, extnValue: new OctetString(new Uint8Array([5, 0])) });
    expect((await post(path, buildRequest([id], { extensions: [plain] }))).status).toBe(200);
  });
});

describe("OCSP: refusals", () => {
  it("ocsp_disable answers unauthorized (30 03 0a 01 06) with status 401, even for garbage", async () => {
    const { path, root } = await setup();
    const leaf = await issue(path);
    await setCrlConfig(path, { ocsp_disable: true });
    const req = await requestFor(root, leaf.pem);
    for (const res of [await post(path, req), await get(path, req), await post(path, new Uint8Array([1, 2, 3]))]) {
      expect(res.status).toBe(401);
      expect(res.headers.get("content-type")).toBe("application/ocsp-response");
      expect([...res.der]).toEqual(UNAUTHORIZED);
    }
    await setCrlConfig(path, { ocsp_disable: false });
    expect((await post(path, req)).status).toBe(200);
  });

  it("an issuer without the ocsp-signing usage makes its CertIDs unauthorized", async () => {
    const { path, root, issuerId } = await setup();
    const leaf = await issue(path);
    await patch(`${path}/issuer/${issuerId}`, { usage: "issuing-certificates,crl-signing" });
    const res = await post(path, await requestFor(root, leaf.pem));
    expect(res.status).toBe(401);
    expect([...res.der]).toEqual(UNAUTHORIZED);
    // Nothing can sign an "unknown" either: the default issuer is the same one.
    const foreign = await pkiWithRoot({ cn: "Other" });
    expect((await post(path, await requestFor(foreign.root, foreign.root))).status).toBe(401);
  });

  it("a mount without issuers answers unauthorized", async () => {
    const { root } = await setup();
    const empty = `pki-empty-${crypto.randomUUID().slice(0, 8)}`;
    await write(`sys/mounts/${empty}`, { type: "pki" }, {}, 204);
    const res = await post(empty, await requestFor(root, root));
    expect(res.status).toBe(401);
    expect([...res.der]).toEqual(UNAUTHORIZED);
  });

  it("garbage is malformedRequest (400, OCSP error body), never a JSON error", async () => {
    const { path, root } = await setup();
    const leaf = await issue(path);
    const good = await requestFor(root, leaf.pem);
    // The SHA-1 OID 1.3.14.3.2.26 (2b 0e 03 02 1a) turned into 1.3.14.3.2.27, not a hash we know.
    const unknownHash = buildRequest([await certId(root, serialOf(leaf.pem))]);
    const at = unknownHash.findIndex((_, i) => [0x2b, 0x0e, 0x03, 0x02, 0x1a].every((b, j) => unknownHash[i + j] === b));
    unknownHash[at + 4] = 0x1b;
    const cases: [string, Promise<OcspHttp>][] = [
      ["empty POST", post(path, new Uint8Array(0))],
      ["random bytes", post(path, new Uint8Array([0x30, 0x82, 0xff, 0xff, 1, 2]))],
      ["truncated request", post(path, good.subarray(0, good.length - 3))],
      ["trailing bytes", post(path, new Uint8Array([...good, 0]))],
      ["a JSON body", post(path, JSON.stringify({ request: toBase64(good) }), "application/json")],
      ["no content type", post(path, good, "application/octet-stream")],
      ["2048 bytes or more", post(path, new Uint8Array(4096).fill(0x30))],
      ["unsupported CertID hash", post(path, unknownHash)],
      ["GET without a request", SELF.fetch(`http://lanyard.test/v1/${path}/ocsp`).then(async (r) => ({ status: r.status, headers: r.headers, der: new Uint8Array(await r.arrayBuffer()) }))],
      ["GET of non-base64", get(path, "not*base64!", false)],
      ["GET of base64 garbage", get(path, toBase64(new Uint8Array([1, 2, 3, 4, 5, 6])))],
      ["GET of 2048 characters", get(path, "A".repeat(2048))],
      ["GET of a certificate, not a request", get(path, toBase64(new Uint8Array(parseCert(leaf.pem).rawData)))],
    ];
    for (const [name, p] of cases) {
      const res = await p;
      expect(res.status, name).toBe(400);
      expect(res.headers.get("content-type"), name).toBe("application/ocsp-response");
      expect([...res.der], name).toEqual(MALFORMED);
    }
  });
});

describe("OCSP: GET form and caching", () => {
  it("GET answers carry RFC 5019 §6.2 cache headers bounded by CACHE_TTL_MS, not nextUpdate; POST answers are not cacheable", async () => {
    const { path, root } = await setup();
    const leaf = await issue(path);
    const req = await requestFor(root, leaf.pem);
    const res = await get(path, req);
    const s = single(parseResponse(res.der));
    const cc = res.headers.get("cache-control") ?? "";
    // The answer may be at most CACHE_TTL_MS (1000 in tests) old anywhere: max-age is what is left of it.
    expect(cc).toMatch(/^public, max-age=[01], no-transform, must-revalidate$/);
    expect(res.headers.get("expires")).toBeNull();
    expect(res.headers.get("last-modified")).toBe(s.thisUpdate.toUTCString());
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", res.der));
    expect(res.headers.get("etag")).toBe(`"${[...digest].map((b) => b.toString(16).padStart(2, "0")).join("")}"`);
    const p = await post(path, req);
    expect(p.headers.get("cache-control")).toBe("no-store");
    expect(p.headers.get("expires")).toBeNull();
  });

  it("ocsp_expiry 0 leaves nextUpdate out; the change shows at once", async () => {
    const { path, root } = await setup();
    const leaf = await issue(path);
    await setCrlConfig(path, { ocsp_expiry: "0" });
    const res = await get(path, await requestFor(root, leaf.pem));
    expect(single(parseResponse(res.der)).nextUpdate).toBeUndefined();
    expect(res.headers.get("cache-control")).toMatch(/^public, max-age=[01], no-transform, must-revalidate$/);
    expect(res.headers.get("expires")).toBeNull();
    await setCrlConfig(path, { ocsp_expiry: "1h" });
    const s = single(parseResponse((await get(path, await requestFor(root, leaf.pem))).der));
    expect((s.nextUpdate?.getTime() ?? 0) - s.thisUpdate.getTime()).toBe(3600 * 1000);
  });

  it("base64 with '/', '+', '//' and a trailing '/' works escaped and unescaped", async () => {
    const { path, root } = await setup();
    const leaf = await issue(path);
    const id = await certId(root, serialOf(leaf.pem));
    // Vary the nonce until the base64 shows the awkward shapes.
    const find = (pred: (b64: string) => boolean): Uint8Array => {
      for (let i = 0; i < 20000; i++) {
        // Nonce lengths 16 to 18 cover every length modulo 3, so some requests need no padding.
        const der = buildRequest([id], { nonce: crypto.getRandomValues(new Uint8Array(16 + (i % 3))) });
        if (pred(toBase64(der))) return der;
      }
      throw new Error("no such request found");
    };
    const doubleSlash = find((b) => b.includes("//") && b.includes("+"));
    const trailing = find((b) => b.endsWith("/"));
    for (const der of [doubleSlash, trailing]) {
      for (const escape of [true, false]) {
        const res = await get(path, der, escape);
        expect(res.status, `${toBase64(der)} escape=${escape}`).toBe(200);
        const parsed = parseResponse(res.der);
        expect(single(parsed).certStatus.good).toBeNull();
        expect(parsed.basic?.tbsResponseData.responseExtensions).toHaveLength(1);
      }
    }
  });

  it("empty path segments elsewhere are still refused with a JSON 400", async () => {
    const { path } = await setup();
    const res = await SELF.fetch(`http://lanyard.test/v1/${path}//ca/pem`);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { errors: string[] }).errors[0]).toContain("empty path segments");
  });
});
