/**
 * src/core/public-answers.ts (layer 0 of the public PKI reads): which requests it may answer,
 * the staleness bound of the answer behind an entry, invalidation by area generation, the 304
 * rules it shares with edge-cache.ts, and its memory bounds.
 */
import { afterEach, describe, expect, it } from "vitest";
import { answerSlot, MAX_BODY_BYTES, rememberAnswer, renderAnswer, servedAnswer, type PublicAnswer } from "../../src/core/public-answers";
import { configureCaches, invalidate } from "../../src/core/read-cache";

afterEach(() => configureCaches(undefined));

const url = (p: string) => new URL(`https://lanyard.test${p}`);
const answer = (body = "crl-bytes", lastModified = Date.UTC(2026, 0, 2, 3, 4, 5)): PublicAnswer => ({
  body: new Uint8Array(new TextEncoder().encode(body)),
  contentType: "application/pkix-crl",
  lastModified,
  etag: `"${body}-tag"`,
});
const slotFor = (p: string, ns: string | null = null, headers = new Headers()) => {
  const s = answerSlot("GET", url(p), ns, headers, true);
  if (!s) throw new Error("no slot");
  return s;
};

describe("layer 0: which requests it may answer", () => {
  it("only a GET without a body, X-Vault-Wrap-TTL or an audit device, while caching is on", () => {
    configureCaches("1000");
    expect(answerSlot("GET", url("/v1/pki/crl"), null, new Headers(), true)).not.toBeNull();
    expect(answerSlot("HEAD", url("/v1/pki/crl"), null, new Headers(), true)).toBeNull();
    expect(answerSlot("POST", url("/v1/pki/ocsp"), null, new Headers(), true)).toBeNull();
    expect(answerSlot("GET", url("/v1/pki/crl"), null, new Headers(), false)).toBeNull();
    for (const h of [["content-length", "3"], ["transfer-encoding", "chunked"], ["x-vault-wrap-ttl", "30s"]] as [string, string][]) {
      expect(answerSlot("GET", url("/v1/pki/crl"), null, new Headers([h]), true), h[0]).toBeNull();
    }
    configureCaches("0");
    expect(answerSlot("GET", url("/v1/pki/crl"), null, new Headers(), true)).toBeNull();
  });

  it("keys by namespace header, path and query: another namespace or query is another entry", () => {
    configureCaches("1000");
    const now = Date.now();
    rememberAnswer(slotFor("/v1/pki-k/crl", "team-a/"), answer(), now);
    expect(servedAnswer(slotFor("/v1/pki-k/crl", "team-a/"), new Headers(), now)?.status).toBe(200);
    expect(servedAnswer(slotFor("/v1/pki-k/crl", "team-b/"), new Headers(), now)).toBeNull();
    expect(servedAnswer(slotFor("/v1/pki-k/crl"), new Headers(), now)).toBeNull();
    expect(servedAnswer(slotFor("/v1/pki-k/crl?x=1", "team-a/"), new Headers(), now)).toBeNull();
  });
});

describe("layer 0: bounds and invalidation", () => {
  it("serves an answer for less than CACHE_TTL_MS after the read behind it started", async () => {
    configureCaches("1000");
    const readAt = Date.now() - 400;
    rememberAnswer(slotFor("/v1/pki-t/crl"), answer(), readAt);
    const res = servedAnswer(slotFor("/v1/pki-t/crl"), new Headers(), readAt + 999);
    expect(res?.status).toBe(200);
    expect(new TextDecoder().decode(await res?.arrayBuffer())).toBe("crl-bytes");
    expect(res?.headers.get("cache-control")).toBe("public, max-age=0, no-transform, must-revalidate");
    expect(servedAnswer(slotFor("/v1/pki-t/crl"), new Headers(), readAt + 1000)).toBeNull();
    // Expired entries are dropped, not revived by a later clock.
    expect(servedAnswer(slotFor("/v1/pki-t/crl"), new Headers(), readAt + 10)).toBeNull();
  });

  for (const area of ["pki", "mounts", "namespaces", "audit"] as const) {
    it(`an invalidation of "${area}" makes entries unusable, and a slot taken before it cannot store`, () => {
      configureCaches("1000");
      const now = Date.now();
      const before = slotFor(`/v1/pki-${area}/ca`);
      rememberAnswer(before, answer(), now);
      expect(servedAnswer(slotFor(`/v1/pki-${area}/ca`), new Headers(), now)).not.toBeNull();
      invalidate(area);
      expect(servedAnswer(slotFor(`/v1/pki-${area}/ca`), new Headers(), now)).toBeNull();
      // A pipeline run that started before the write answers from data read before it: not kept.
      rememberAnswer(before, answer(), now);
      expect(servedAnswer(slotFor(`/v1/pki-${area}/ca`), new Headers(), now)).toBeNull();
    });
  }

  it("does not keep bodies over MAX_BODY_BYTES, and stays under its byte budget", () => {
    configureCaches("1000");
    const now = Date.now();
    rememberAnswer(slotFor("/v1/pki-big/crl"), answer("x".repeat(MAX_BODY_BYTES + 1)), now);
    expect(servedAnswer(slotFor("/v1/pki-big/crl"), new Headers(), now)).toBeNull();
    // 200 bodies of 60 KB (12 MB) through an 8 MB budget: the first ones are gone, the last kept.
    for (let i = 0; i < 200; i++) rememberAnswer(slotFor(`/v1/pki-big/cert/${i}`), answer("y".repeat(60 * 1024) + i), now);
    expect(servedAnswer(slotFor("/v1/pki-big/cert/0"), new Headers(), now)).toBeNull();
    expect(servedAnswer(slotFor("/v1/pki-big/cert/199"), new Headers(), now)).not.toBeNull();
  });
});

describe("renderAnswer (shared with edge-cache.ts)", () => {
  const a = answer();
  it("answers 304 on a matching If-None-Match (weak or *), else 200; If-None-Match decides alone", () => {
    const now = Date.now();
    for (const inm of [a.etag, `W/${a.etag}`, "*", `"other", ${a.etag}`]) expect(renderAnswer(a, now, new Headers({ "if-none-match": inm }), now).status, inm).toBe(304);
    expect(renderAnswer(a, now, new Headers({ "if-none-match": '"other"', "if-modified-since": "Fri, 01 Jan 2100 00:00:00 GMT" }), now).status).toBe(200);
  });

  it("answers 304 when Last-Modified is strictly before If-Modified-Since (whole seconds)", () => {
    const now = Date.now();
    const last = new Date(a.lastModified).toUTCString();
    expect(renderAnswer(a, now, new Headers({ "if-modified-since": last }), now).status).toBe(200);
    expect(renderAnswer(a, now, new Headers({ "if-modified-since": new Date(a.lastModified + 1000).toUTCString() }), now).status).toBe(304);
    const ok = renderAnswer(a, now, new Headers(), now);
    expect(ok.headers.get("etag")).toBe(a.etag);
    expect(ok.headers.get("last-modified")).toBe(last);
    expect(ok.headers.get("content-type")).toBe("application/pkix-crl");
  });
});
