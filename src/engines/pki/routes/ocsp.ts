/**
 * OCSP over HTTP (pki-engine.md §6.8, RFC 6960 Appendix A, RFC 5019 §5–6): `GET ocsp/<base64>`
 * and `POST ocsp` with `Content-Type: application/ocsp-request`. Both are public. Every answer,
 * errors included, is an OCSPResponse with `application/ocsp-response`, never a JSON error.
 */
import type { Req } from "../../../core/route";
import { route } from "../../../core/route";
import { bytesToHex } from "../../../core/encoding";
import type { SQL } from "drizzle-orm";
import type { Db } from "../../../core/db/client";
import { decodeGetRequest, OcspRequestError, parseOcspRequest } from "../x509/ocsp";
import { stateAndRevokedFromResults, stateAndRevokedQueries } from "../storage/revocation-store";
import { answerOcsp, INTERNAL_ERROR, type OcspOutcome } from "../revocation/ocsp-responder";
import { mountOf } from "./common";

const OCSP_RESPONSE = "application/ocsp-response";
const OCSP_REQUEST = "application/ocsp-request";

async function answer(req: Req, der: Uint8Array<ArrayBuffer> | null): Promise<OcspOutcome> {
  try {
    const preloaded = req.prefetched ? stateAndRevokedFromResults(req.prefetched) : null;
    return await answerOcsp({ db: req.db, env: req.env, mount: mountOf(req) }, der, new Date(), preloaded);
  } catch (e) {
    // Details stay in the log with the request id; the client gets internalError (§6.8).
    console.error(`request ${req.requestId}: OCSP responder failed:`, e);
    return INTERNAL_ERROR();
  }
}

/**
 * RFC 5019 §6.2: a GET answer may be cached until nextUpdate. Without a nextUpdate newer status
 * is always available, so caches must revalidate. Errors and POST answers are not cached.
 */
async function cacheHeaders(o: OcspOutcome, cacheable: boolean): Promise<Record<string, string>> {
  if (!cacheable || o.httpStatus !== 200 || !o.thisUpdate) return { "cache-control": "no-store" };
  const etag = `"${bytesToHex(new Uint8Array(await crypto.subtle.digest("SHA-1", o.body)))}"`;
  const headers: Record<string, string> = { "last-modified": o.thisUpdate.toUTCString(), etag };
  if (!o.nextUpdate) return { ...headers, "cache-control": "no-cache, no-transform" };
  const maxAge = Math.max(0, Math.floor((o.nextUpdate.getTime() - Date.now()) / 1000));
  return {
    ...headers,
    expires: o.nextUpdate.toUTCString(),
    "cache-control": `max-age=${maxAge}, public, no-transform, must-revalidate`,
  };
}

async function reply(o: OcspOutcome, cacheable: boolean): Promise<Response> {
  return new Response(o.body, { status: o.httpStatus, headers: { "content-type": OCSP_RESPONSE, ...(await cacheHeaders(o, cacheable)) } });
}

function decodePath(rest: string): Uint8Array<ArrayBuffer> | null {
  try {
    return decodeGetRequest(rest);
  } catch (e) {
    if (e instanceof OcspRequestError) return null;
    throw e;
  }
}

/**
 * A GET carries its request in the path, so its reads (issuers, keys, config and the revocation
 * entries of the serials asked about) join the request's first D1 batch: one round trip per
 * response (npm run bench -- ocsp). A path that does not decode prefetches nothing.
 */
function prefetch(db: Db, mountId: SQL, params: Record<string, string>) {
  const der = decodePath(params.rest ?? "");
  if (!der) return [];
  let serials: string[];
  try {
    serials = [...new Set(parseOcspRequest(der).certIds.map((c) => c.serial))];
  } catch {
    return [];
  }
  return [...stateAndRevokedQueries(db, mountId, serials)];
}

export const ocspRoutes = [
  route({
    pattern: "ocsp",
    public: ["read", "update"],
    rawBody: true,
    handlers: {
      // A GET without a request in the path has nothing to answer.
      async read(req) {
        return reply(await answer(req, null), false);
      },
      // The raw DER body; another content type would not be an OCSP request (§6.8).
      async update(req) {
        return reply(await answer(req, req.contentType === OCSP_REQUEST ? req.rawBody : null), false);
      },
    },
  }),
  route({
    pattern: "ocsp/*rest",
    public: ["read"],
    // The remainder is base64, where "//" and a trailing "/" occur (RFC 6960 Appendix A.1).
    opaqueRest: true,
    prefetch,
    handlers: {
      async read(req) {
        return reply(await answer(req, decodePath(req.params.rest ?? "")), true);
      },
    },
  }),
];
