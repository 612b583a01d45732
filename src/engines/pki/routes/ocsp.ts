/**
 * OCSP over HTTP (docs/pki-ocsp.md, RFC 6960 Appendix A, RFC 5019 §5–6): `GET ocsp/<base64>`
 * and `POST ocsp` with `Content-Type: application/ocsp-request`. Both are public. Every answer,
 * errors included, is an OCSPResponse with `application/ocsp-response`, never a JSON error.
 *
 * Caching (docs/pki-ocsp.md "Caching", routes/edge-cache.ts): a signed answer is kept per mount
 * and request DER, for GET and POST alike, for at most CACHE_TTL_MS after the
 * reads it was built from, and dropped at once in the isolate that revokes (or changes an issuer,
 * key or config/crl). RFC 5019 §6.2 would allow reuse until nextUpdate; our bound is shorter on
 * purpose (a revocation shows within CACHE_TTL_MS). Only signed (successful) answers
 * are cached; malformedRequest, unauthorized and internalError are built each time, and so is
 * the answer to a request with a nonce (RFC 8954: a client never sends the same nonce twice, so
 * keeping it would only push useful answers out; the revocation state it is built from is still
 * cached). The Cache API holds GET answers only (RFC 5019 §5: POST is for what is not cached).
 */
import type { Req } from "../../../core/route";
import { bytesToBase64Url } from "../../../core/encoding";
import { decodeGetRequest, OcspRequestError } from "../x509/ocsp";
import { answerOcsp, INTERNAL_ERROR, type OcspOutcome } from "../revocation/ocsp-responder";
import { route } from "../../../core/route";
import { mountOf } from "./common";
import { publicAnswer, servePublic } from "./edge-cache";

const OCSP_RESPONSE = "application/ocsp-response";
const OCSP_REQUEST = "application/ocsp-request";

async function answer(req: Req, der: Uint8Array<ArrayBuffer> | null): Promise<OcspOutcome> {
  try {
    return await answerOcsp({ db: req.db, env: req.env, mount: mountOf(req) }, der, new Date());
  } catch (e) {
    // Details stay in the log with the request id; the client gets internalError (RFC 6960 §4.2.1).
    console.error(`request ${req.requestId}: OCSP responder failed:`, e);
    return INTERNAL_ERROR();
  }
}

/** An answer that is not cached (errors, undecodable requests): never stored by anyone. */
function uncached(o: OcspOutcome): Response {
  return new Response(o.body, { status: o.httpStatus, headers: { "content-type": OCSP_RESPONSE, "cache-control": "no-store" } });
}

/**
 * A request answered through the caches under `key`; `der` decodes it only on a miss (null:
 * undecodable, answered malformedRequest uncached). GET answers carry ETag, Last-Modified
 * (thisUpdate) and Cache-Control (edge-cache.ts); POST answers are sent no-store.
 */
async function cachedAnswer(req: Req, key: string, der: () => Uint8Array<ArrayBuffer> | null, http: boolean): Promise<Response> {
  return servePublic(req, {
    key,
    http,
    async load() {
      const request = der();
      if (!request) return uncached(await answer(req, null));
      const o = await answer(req, request);
      if (o.httpStatus !== 200 || !o.thisUpdate || o.nonce) return uncached(o);
      return (await publicAnswer(o.body, OCSP_RESPONSE, o.thisUpdate.getTime())) ?? uncached(INTERNAL_ERROR());
    },
  });
}

function decodePath(rest: string): Uint8Array<ArrayBuffer> | null {
  try {
    return decodeGetRequest(rest);
  } catch (e) {
    if (e instanceof OcspRequestError) return null;
    throw e;
  }
}

export const ocspRoutes = [
  route({
    pattern: "ocsp",
    public: ["read", "update"],
    rawBody: true,
    handlers: {
      // A GET without a request in the path has nothing to answer.
      async read(req) {
        return uncached(await answer(req, null));
      },
      // The raw DER body; another content type would not be an OCSP request (RFC 6960 Appendix A.1).
      async update(req) {
        if (req.contentType !== OCSP_REQUEST || req.rawBody.length === 0) return uncached(await answer(req, null));
        // The request itself (base64url, < 2,732 characters: requests are < 2048 bytes), not a
        // digest of it: no hashing on the hot path.
        return cachedAnswer(req, `ocsp/${bytesToBase64Url(req.rawBody)}`, () => req.rawBody, false);
      },
    },
  }),
  route({
    pattern: "ocsp/*rest",
    public: ["read"],
    // The remainder is base64, where "//" and a trailing "/" occur (RFC 6960 Appendix A.1).
    opaqueRest: true,
    handlers: {
      async read(req) {
        // Keyed by the path as sent: a hit needs no base64 or DER decoding. Only answers are kept,
        // so a kept key decoded, hence is < MAX_OCSP_REQUEST_BYTES (decodeGetRequest); an
        // undecodable path is answered malformedRequest, uncached (load answers a Response).
        // Another spelling of the same request is another entry.
        const rest = req.params.rest ?? "";
        return cachedAnswer(req, `ocsp-get/${rest}`, () => decodePath(rest), true);
      },
    },
  }),
];
