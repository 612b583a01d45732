/**
 * Caching of the public PKI reads (docs/pki-ocsp.md and docs/pki-revocation-crl.md
 * "Caching", src/engines/pki/routes/edge-cache.ts), with caching on (CACHE_TTL_MS 1000, the
 * default) unless a case says otherwise:
 * - headers: strong ETag, Last-Modified, `Cache-Control: public, max-age ≤ 1`, 304 on
 *   If-None-Match (also weak and "*") and If-Modified-Since; OCSP POST is no-store;
 * - the isolate that revokes sees it at once in OCSP GET, OCSP POST and the CRL;
 * - "another isolate" revoking is simulated by writing D1 directly (env.DB: nothing is
 *   invalidated): the old answer may still be served, the new one shows within CACHE_TTL_MS;
 * - the Cache API layer: a fresh entry is served, one read too long ago is not;
 * - CACHE_TTL_MS 0: every request sees a direct write at once.
 */
import { SELF, env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, read, write } from "../helpers/api";
import { parseResponse, requestFor, toBase64 } from "../helpers/ocsp";
import { pkiWithRoot, x509 } from "../helpers/pki";

const TTL_MS = 1000;
const CACHE_CONTROL = /^public, max-age=[01], no-transform, must-revalidate$/;

interface Got {
  status: number;
  headers: Headers;
  body: Uint8Array;
}

async function fetchRaw(path: string, init: RequestInit = {}): Promise<Got> {
  const res = await SELF.fetch(`http://lanyard.test/v1/${path}`, init);
  return { status: res.status, headers: res.headers, body: new Uint8Array(await res.arrayBuffer()) };
}

const ocspGet = (path: string, der: Uint8Array, headers: Record<string, string> = {}) => fetchRaw(`${path}/ocsp/${encodeURIComponent(toBase64(der))}`, { headers });
const ocspPost = (path: string, der: Uint8Array) => fetchRaw(`${path}/ocsp`, { method: "POST", headers: { "content-type": "application/ocsp-request" }, body: der });

/** good / revoked / unknown of the first SingleResponse. */
function certStatus(body: Uint8Array): string {
  const s = parseResponse(body).basic?.tbsResponseData.responses[0]?.certStatus;
  if (!s) throw new Error("no SingleResponse");
  return s.good !== undefined ? "good" : s.revoked ? "revoked" : "unknown";
}

function crlSerials(body: Uint8Array): string[] {
  return new x509.X509Crl(body).entries.map((e) => (e.serialNumber.toLowerCase().match(/../g) ?? []).join(":").replace(/^(00:)+/, ""));
}

async function hexSha256(body: Uint8Array): Promise<string> {
  return [...new Uint8Array(await crypto.subtle.digest("SHA-256", body))].map((b) => b.toString(16).padStart(2, "0")).join("");
}

const equal = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i]);

async function setup() {
  const ctx = await pkiWithRoot();
  await write(`${ctx.path}/roles/r`, { allow_any_name: true, key_type: "ec", max_ttl: "24h" });
  const leaf = await write(`${ctx.path}/issue/r`, { common_name: "leaf.example", ttl: "1h" });
  const mountId = (await read("sys/mounts")).body.data[`${ctx.path}/`].uuid as string;
  const pem = leaf.body.data.certificate as string;
  return { ...ctx, mountId, leafPem: pem, serial: leaf.body.data.serial_number as string, req: await requestFor(ctx.root, pem) };
}

/** Polls `check` every 50 ms until it holds; returns the milliseconds it took (throws past `limitMs`). */
async function within(limitMs: number, check: () => Promise<boolean>): Promise<number> {
  const start = Date.now();
  for (;;) {
    if (await check()) return Date.now() - start;
    if (Date.now() - start > limitMs) throw new Error(`not seen within ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("public PKI reads: HTTP caching headers", () => {
  it("CRL, CA and chain reads carry a strong ETag, Last-Modified and a bounded max-age, and answer 304", async () => {
    const { path } = await setup();
    for (const p of ["crl", "crl/pem", "crl/delta", "issuer/default/crl/der", "issuer/root-ca/crl/pem", "ca", "ca/pem", "ca_chain", "cert/ca/raw", "cert/ca/raw/pem", "issuer/default/der", "issuer/root-ca/pem"]) {
      const r = await fetchRaw(`${path}/${p}`);
      expect(r.status, p).toBe(200);
      const etag = r.headers.get("etag") ?? "";
      expect(etag, p).toBe(`"${await hexSha256(r.body)}"`);
      expect(r.headers.get("cache-control"), p).toMatch(CACHE_CONTROL);
      const lastModified = r.headers.get("last-modified") ?? "";
      expect(Date.parse(lastModified), p).toBeLessThanOrEqual(Date.now());

      const same = await fetchRaw(`${path}/${p}`, { headers: { "if-none-match": etag } });
      expect(same.status, p).toBe(304);
      expect(same.body.length, p).toBe(0);
      expect(same.headers.get("etag"), p).toBe(etag);
      expect(same.headers.get("cache-control"), p).toMatch(CACHE_CONTROL);
      expect((await fetchRaw(`${path}/${p}`, { headers: { "if-none-match": `"other", W/${etag}` } })).status, p).toBe(304);
      expect((await fetchRaw(`${path}/${p}`, { headers: { "if-none-match": "*" } })).status, p).toBe(304);
      const other = await fetchRaw(`${path}/${p}`, { headers: { "if-none-match": '"other"' } });
      expect(other.status, p).toBe(200);
      expect(equal(other.body, r.body), p).toBe(true);
      // If-None-Match decides alone (RFC 9110 §13.1.3): a matching date does not make a 304.
      expect((await fetchRaw(`${path}/${p}`, { headers: { "if-none-match": '"other"', "if-modified-since": new Date(Date.now() + 60_000).toUTCString() } })).status, p).toBe(200);
      expect((await fetchRaw(`${path}/${p}`, { headers: { "if-modified-since": new Date(Date.now() + 60_000).toUTCString() } })).status, p).toBe(304);
    }
  });

  it("OCSP GET answers are cacheable (ETag, thisUpdate as Last-Modified, 304); POST and nonce answers are no-store", async () => {
    const { path, req, root, leafPem } = await setup();
    const first = await ocspGet(path, req);
    expect(first.status).toBe(200);
    const etag = first.headers.get("etag") ?? "";
    expect(etag).toBe(`"${await hexSha256(first.body)}"`);
    expect(first.headers.get("cache-control")).toMatch(CACHE_CONTROL);
    expect(first.headers.get("last-modified")).toBe(parseResponse(first.body).basic?.tbsResponseData.responses[0]?.thisUpdate.toUTCString());
    // Within CACHE_TTL_MS the same signed bytes are served (ECDSA signatures are randomized, so a
    // second signing would differ), and the client's copy is current. One retry covers a slow
    // machine letting the entry expire between the two requests.
    let revalidated = false;
    for (let attempt = 0; attempt < 3 && !revalidated; attempt++) {
      const a = await ocspGet(path, req);
      const b = await ocspGet(path, req, { "if-none-match": a.headers.get("etag") ?? "" });
      if (b.status === 200) expect(b.headers.get("etag")).not.toBe(a.headers.get("etag"));
      revalidated = b.status === 304;
    }
    expect(revalidated).toBe(true);
    expect((await ocspGet(path, req, { "if-none-match": '"other"' })).status).toBe(200);

    const post = await ocspPost(path, req);
    expect(post.status).toBe(200);
    expect(post.headers.get("cache-control")).toBe("no-store");
    expect(post.headers.get("etag")).toBeNull();
    // A request with a nonce (RFC 8954) is answered afresh each time: a second signing, no-store.
    const withNonce = await requestFor(root, leafPem, { nonce: new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]) });
    const n1 = await ocspGet(path, withNonce);
    const n2 = await ocspGet(path, withNonce);
    expect(certStatus(n1.body)).toBe("good");
    expect(equal(n1.body, n2.body)).toBe(false);
    expect(n2.headers.get("cache-control")).toBe("no-store");
    // Errors are never cacheable.
    const bad = await ocspGet(path, new Uint8Array([1, 2, 3]));
    expect(bad.status).toBe(400);
    expect(bad.headers.get("cache-control")).toBe("no-store");
  });
});

describe("public PKI reads: invalidation", () => {
  it("the isolate that revokes sees it at once in OCSP GET, OCSP POST and the CRL", async () => {
    const { path, req, serial } = await setup();
    // Fill every cache first.
    expect(certStatus((await ocspGet(path, req)).body)).toBe("good");
    expect(certStatus((await ocspPost(path, req)).body)).toBe("good");
    const crlBefore = await fetchRaw(`${path}/crl`);
    expect(crlSerials(crlBefore.body)).not.toContain(serial);
    const pemBefore = await fetchRaw(`${path}/issuer/default/crl/pem`);

    await write(`${path}/revoke`, { serial_number: serial });
    expect(certStatus((await ocspGet(path, req)).body)).toBe("revoked");
    expect(certStatus((await ocspPost(path, req)).body)).toBe("revoked");
    const crlAfter = await fetchRaw(`${path}/crl`, { headers: { "if-none-match": crlBefore.headers.get("etag") ?? "" } });
    expect(crlAfter.status).toBe(200);
    expect(crlSerials(crlAfter.body)).toContain(serial);
    const pemAfter = await fetchRaw(`${path}/issuer/default/crl/pem`);
    expect(new TextDecoder().decode(pemAfter.body)).not.toBe(new TextDecoder().decode(pemBefore.body));
    expect((await api("GET", `${path}/cert/crl`, { token: null })).body.data.certificate).toBe(new TextDecoder().decode(await (await fetchRaw(`${path}/crl/pem`)).body));
  });

  it("a revocation written by another isolate shows in OCSP GET and POST within CACHE_TTL_MS", async () => {
    const { path, req, serial, mountId, issuerId, leafPem } = await setup();
    const a = await ocspGet(path, req);
    expect(certStatus(a.body)).toBe("good");
    // Served from the cache: the same (randomized) signature, no second signing.
    expect(equal((await ocspGet(path, req)).body, a.body)).toBe(true);
    expect(certStatus((await ocspPost(path, req)).body)).toBe("good");

    const der = toBase64(new Uint8Array(new x509.X509Certificate(leafPem).rawData));
    const now = Math.floor(Date.now() / 1000);
    // Straight into D1, as another isolate's revocation would be: this isolate invalidates nothing.
    await env.DB.prepare("INSERT INTO pki_revoked (mount_id, serial, issuer_id, revocation_time, not_after, der, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)")
      .bind(mountId, serial, issuerId, now, now + 3600, der, Date.now())
      .run();
    const written = Date.now();
    await within(1200, async () => certStatus((await ocspGet(path, req)).body) === "revoked");
    await within(1200 - (Date.now() - written), async () => certStatus((await ocspPost(path, req)).body) === "revoked");
    expect(Date.now() - written).toBeLessThanOrEqual(TTL_MS + 200);
  });

  it("a CRL written by another isolate is served within CACHE_TTL_MS, in every shape", async () => {
    const { path, mountId, issuerId } = await setup();
    const complete = await fetchRaw(`${path}/crl`);
    const delta = await fetchRaw(`${path}/crl/delta`);
    expect(equal(complete.body, delta.body)).toBe(false);
    await fetchRaw(`${path}/crl/pem`);
    const jsonBefore = (await api("GET", `${path}/issuer/default/crl`, { token: null })).body.data.crl as string;
    // Another isolate's rebuild, simulated: the complete CRL's row now holds other (valid) DER.
    await env.DB.prepare("UPDATE pki_crls SET der = ?, this_update = ? WHERE mount_id = ? AND issuer_id = ? AND kind = 'complete'")
      .bind(toBase64(delta.body), Date.now(), mountId, issuerId)
      .run();
    const written = Date.now();
    await within(1200, async () => equal((await fetchRaw(`${path}/crl`)).body, delta.body));
    await within(1200 - (Date.now() - written), async () => new x509.X509Crl(new TextDecoder().decode((await fetchRaw(`${path}/crl/pem`)).body)).rawData.byteLength === delta.body.length);
    await within(1200 - (Date.now() - written), async () => (await api("GET", `${path}/issuer/default/crl`, { token: null })).body.data.crl !== jsonBefore);
  });

  it("CACHE_TTL_MS 0: every request sees a direct D1 write at once", async () => {
    const { path, req, serial, mountId, issuerId } = await setup();
    const previous = env.CACHE_TTL_MS;
    env.CACHE_TTL_MS = "0";
    try {
      const a = await ocspGet(path, req);
      expect(certStatus(a.body)).toBe("good");
      // Nothing is kept: each answer is signed afresh (randomized ECDSA), and says no max-age.
      const b = await ocspGet(path, req);
      expect(equal(a.body, b.body)).toBe(false);
      expect(b.headers.get("cache-control")).toBe("public, max-age=0, no-transform, must-revalidate");
      const now = Math.floor(Date.now() / 1000);
      await env.DB.prepare("INSERT INTO pki_revoked (mount_id, serial, issuer_id, revocation_time, not_after, der, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)")
        .bind(mountId, serial, issuerId, now, now + 3600, "", Date.now())
        .run();
      expect(certStatus((await ocspGet(path, req)).body)).toBe("revoked");
      expect(certStatus((await ocspPost(path, req)).body)).toBe("revoked");
    } finally {
      env.CACHE_TTL_MS = previous;
      await read("sys/health", { token: null }, undefined);
    }
  });
});

describe("public PKI reads: the Cache API layer", () => {
  // The key's host is the request's Host header, absent under SELF.fetch (then "lanyard.invalid"): both are planted.
  const plant = async (mountId: string, key: string, body: string, readAt: number) => {
    for (const host of ["lanyard.test", "lanyard.invalid"]) {
      await caches.default.put(
        `https://${host}/.lanyard-cache/pki/${mountId}/${key}`,
        new Response(body, { headers: { "content-type": "application/pem-certificate-chain", etag: '"planted"', "cache-control": "public, max-age=60", "x-lanyard-read-at": String(readAt) } }),
      );
    }
  };
  const text = async (p: string) => new TextDecoder().decode((await fetchRaw(p)).body);

  it("serves another isolate's entry read less than CACHE_TTL_MS ago; refuses an older one and one older than this isolate's last write", async () => {
    const { path, mountId, root, serial } = await setup();
    // A public read notices setup's writes (routes/edge-cache.ts lastInvalidation); entries read after them count.
    await fetchRaw(`${path}/ca`);
    await plant(mountId, "ca/pem", "planted fresh", Date.now());
    await plant(mountId, "issuer/root-ca/pem", "planted stale", Date.now() - TTL_MS - 1);
    const fresh = await fetchRaw(`${path}/ca/pem`);
    expect(new TextDecoder().decode(fresh.body)).toBe("planted fresh");
    expect(fresh.headers.get("etag")).toBe('"planted"');
    expect((await text(`${path}/issuer/root-ca/pem`)).trim()).toBe(root.trim());

    // Fresh, but read before this isolate revoked: it may predate the revocation, so it is not used.
    await plant(mountId, "issuer/root-ca/der", "planted before the write", Date.now());
    await write(`${path}/revoke`, { serial_number: serial });
    const der = await fetchRaw(`${path}/issuer/root-ca/der`);
    expect(der.headers.get("content-type")).toBe("application/pkix-cert");
    expect(new x509.X509Certificate(der.body).subject).toBe(new x509.X509Certificate(root).subject);
  });
});
