/**
 * Caching of the public PKI reads (docs/pki-ocsp.md and docs/pki-revocation-crl.md
 * "Caching"): OCSP answers, CRLs, CA certificates and chains. Layer 0 is in front of the
 * pipeline (src/core/public-answers.ts: a repeated GET answered by its request line, fed from
 * servePublic below); then three layers, tried in order:
 *
 * 1. **The isolate** (`ReadCache`, area "pki", src/core/read-cache.ts): rendered answers keyed by
 *    mount id and what was asked. No D1 round trip while an entry is younger than CACHE_TTL_MS.
 * 2. **The colo** (the Cache API, `caches.default`): the same answers, so that another isolate of
 *    the same data centre need not read D1 either. Keyed by a synthetic URL naming the mount id
 *    (unique for ever, so a namespace or a mount re-created at the same path never meets the old
 *    one's answers; the namespace header therefore does not enter the key) and the answer.
 * 3. **D1**, through the route's `load`.
 *
 * Invariants:
 * - **Staleness bound.** Every entry carries the time its D1 read started (`readAt`) and is used
 *   only while `now - readAt < CACHE_TTL_MS`, in both layers (a Cache API entry carries it in
 *   `x-lanyard-read-at` and is checked on match, whatever its max-age says). What clients are
 *   told (`Cache-Control: max-age`) is the *remaining* part of that bound, in whole seconds, so a
 *   shared cache downstream that honours it stays within it too.
 * - **The isolate that writes sees its write at once.** Writes to pki_revoked / pki_crls and to
 *   issuers, keys and config call `invalidate("pki")` (storage/revocation-store.ts, storage/store.ts),
 *   which empties layer 1. Layer 2 cannot be emptied from here, so a Cache API entry is refused
 *   when its read started before the last "pki" invalidation this isolate noticed.
 * - **A read that raced a write is not kept** (generation check of ReadCache.set) and not put
 *   into the Cache API either.
 * - **Only answers, never errors**: a `load` that answers a Response (400, 500, unauthorized…)
 *   passes through uncached.
 * - The Cache API is optional: absent (Durable Objects, some test contexts), failing, or with
 *   CACHE_TTL_MS < 1000 (its max-age has whole seconds) it is skipped, never an error.
 *
 * HTTP (RFC 9110 §8.8, §13; RFC 9111 §5.2; RFC 5019 §6.2): GET answers carry a strong ETag (the
 * body's SHA-256), Last-Modified and `Cache-Control: public, max-age=N, no-transform,
 * must-revalidate`; If-None-Match (weak comparison, §13.1.2) answers 304 and, when absent,
 * If-Modified-Since does (304 when last modified strictly before it; core/public-answers.ts renderAnswer,
 * shared with layer 0).
 * OCSP POST answers use layer 1 only and are sent `no-store` (RFC 5019 §5: POST is not cached).
 */
import type { Req } from "../../../core/route";
import { bytesToHex, sha256 } from "../../../core/encoding";
import { rememberAnswer, renderAnswer, type PublicAnswer } from "../../../core/public-answers";
import { cacheTtl, generationOf, ReadCache } from "../../../core/read-cache";
import { mountOf } from "./common";

export type { PublicAnswer };

/** A cached result: an answer, or `null` for "nothing to serve" (204, as upstream's raw paths answer). */
interface Entry {
  answer: PublicAnswer | null;
  readAt: number;
}

/**
 * The isolate's answers. Two caches so large CRLs cannot push out small hot answers: CRL bodies
 * up to MAX_CACHED_CRL_BYTES, at most CRL_ENTRIES of them (≤ 16 MB per isolate, of 128 MB; the
 * CRL routes keep as many DER copies under the same cap, routes/crl.ts).
 */
const SMALL_ENTRIES = 2048;
export const CRL_ENTRIES = 8;
export const MAX_CACHED_CRL_BYTES = 2 * 1024 * 1024;
const small = new ReadCache<Entry>("pki.answers", "pki", SMALL_ENTRIES);
const large = new ReadCache<Entry>("pki.crlAnswers", "pki", CRL_ENTRIES);

export type AnswerClass = "small" | "crl";

/** Builds an answer, computing its ETag once (cached with it). */
export async function publicAnswer(body: string | Uint8Array<ArrayBuffer>, contentType: string, lastModified: number): Promise<PublicAnswer | null> {
  const bytes = typeof body === "string" ? new Uint8Array(new TextEncoder().encode(body)) : body;
  if (bytes.length === 0) return null;
  return { body: bytes, contentType, lastModified, etag: `"${bytesToHex(await sha256(bytes))}"` };
}

// -- the Cache API (layer 2) ----------------------------------------------------------------------

const READ_AT = "x-lanyard-read-at";

/** caches.default when this context has a usable one, else null (Durable Objects have none). */
function colo(): Cache | null {
  try {
    const storage = (globalThis as { caches?: CacheStorage }).caches;
    return storage?.default ?? null;
  } catch {
    return null;
  }
}

/**
 * The time this isolate noticed its last "pki" invalidation (at or after it happened: the
 * generation is looked at on every public read): a Cache API entry whose read started before it
 * may predate this isolate's own write and is not used. Noticing late only refuses more.
 */
let seenGeneration = generationOf("pki");
let invalidatedAt = 0;
function lastInvalidation(now: number): number {
  const g = generationOf("pki");
  if (g !== seenGeneration) {
    seenGeneration = g;
    invalidatedAt = now;
  }
  return invalidatedAt;
}

function coloKey(req: Req, key: string): string {
  const host = req.headers.get("host") ?? "lanyard.invalid";
  return `https://${host}/.lanyard-cache/pki/${key}`;
}

async function fromColo(req: Req, key: string, now: number): Promise<Entry | null> {
  const cache = colo();
  if (!cache || cacheTtl() < 1000) return null;
  try {
    const res = await cache.match(coloKey(req, key));
    if (!res || res.status !== 200) return null;
    const readAt = Number(res.headers.get(READ_AT));
    if (!Number.isFinite(readAt) || now - readAt >= cacheTtl() || readAt < lastInvalidation(now)) {
      await res.body?.cancel();
      return null;
    }
    const body = new Uint8Array(await res.arrayBuffer());
    const etag = res.headers.get("etag") ?? "";
    const lastModified = Date.parse(res.headers.get("last-modified") ?? "");
    if (body.length === 0 || etag === "") return null;
    return { answer: { body, contentType: res.headers.get("content-type") ?? "", lastModified: Number.isNaN(lastModified) ? 0 : lastModified, etag }, readAt };
  } catch (e) {
    console.warn(`request ${req.requestId}: Cache API read skipped: ${e instanceof Error ? e.message : String(e)}`);
    return null;
  }
}

function toColo(req: Req, key: string, entry: Entry): void {
  const cache = colo();
  const a = entry.answer;
  if (!cache || !a || cacheTtl() < 1000) return;
  const headers: Record<string, string> = {
    "content-type": a.contentType,
    etag: a.etag,
    // The Cache API's own expiry; the read-at check above is the bound that counts.
    "cache-control": `public, max-age=${Math.floor(cacheTtl() / 1000)}`,
    [READ_AT]: String(entry.readAt),
  };
  if (a.lastModified) headers["last-modified"] = new Date(a.lastModified).toUTCString();
  req.waitUntil(
    cache.put(coloKey(req, key), new Response(a.body, { headers })).catch((e: unknown) => {
      console.warn(`request ${req.requestId}: Cache API write skipped: ${e instanceof Error ? e.message : String(e)}`);
    }),
  );
}

// -- serving --------------------------------------------------------------------------------------

export interface PublicRead {
  /** What is asked, unique within the mount (the mount id is prefixed here). */
  key: string;
  /** "crl" for CRL bodies (bounded separately, large ones not kept in the isolate). */
  size?: AnswerClass;
  /** GET answers: the Cache API, HTTP validators and 304s; false for OCSP POST (isolate only, sent no-store). */
  http: boolean;
  /** The D1 read and rendering: an answer, null (204), or a Response sent as is, uncached. */
  load(): Promise<PublicAnswer | null | Response>;
}

/** The cached value of `key`, read from the isolate, the colo or D1 (in that order). */
async function lookup(req: Req, r: PublicRead): Promise<Entry | Response> {
  const key = `${mountOf(req).id}/${r.key}`;
  const cache = r.size === "crl" ? large : small;
  const now = Date.now();
  // Noticed on every public read, so the recorded time stays close to the invalidation.
  lastInvalidation(now);
  const hit = cache.get(key, now);
  if (hit) return hit;
  const generation = generationOf("pki");
  const shared = r.http ? await fromColo(req, key, now) : null;
  if (shared) {
    cache.set(key, shared, shared.readAt, generation);
    return shared;
  }
  const readAt = Date.now();
  const loaded = await r.load();
  if (loaded instanceof Response) return loaded;
  const entry: Entry = { answer: loaded, readAt };
  const keep = !(r.size === "crl" && loaded && loaded.body.length > MAX_CACHED_CRL_BYTES);
  if (keep) cache.set(key, entry, readAt, generation);
  if (r.http && generation === generationOf("pki")) toColo(req, key, entry);
  return entry;
}

/**
 * Serves one public read through the caches; 304 when the client's copy is current. A GET answer
 * is also handed to layer 0 (src/core/public-answers.ts) under the request line the pipeline
 * gave it (Req.answerSlot), so the next identical GET skips the pipeline.
 */
export async function servePublic(req: Req, r: PublicRead): Promise<Response> {
  const got = await lookup(req, r);
  if (got instanceof Response) return got;
  const a = got.answer;
  if (!a) return new Response(null, { status: 204 });
  if (!r.http) return new Response(a.body, { status: 200, headers: { "content-type": a.contentType, "cache-control": "no-store" } });
  if (req.answerSlot) rememberAnswer(req.answerSlot, a, got.readAt);
  return renderAnswer(a, got.readAt, req.headers, Date.now());
}

/**
 * A value read for a public answer (JSON shapes, the data under several raw shapes), cached in
 * the isolate only with the same bound and invalidation; `keep` can refuse a value (too large).
 */
export async function cachedValue<V>(cache: ReadCache<V>, key: string, load: () => Promise<V>, keep: (v: V) => boolean = () => true): Promise<V> {
  const hit = cache.get(key);
  if (hit !== undefined) return hit;
  const readAt = Date.now();
  const generation = generationOf(cache.area);
  const value = await load();
  if (keep(value)) cache.set(key, value, readAt, generation);
  return value;
}
