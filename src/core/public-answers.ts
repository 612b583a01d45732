/**
 * Public answers served before the pipeline (OCSP GET, CRL, CA and chain reads at close to the
 * cost of `sys/health`). Layer 0 in front of the PKI's caches
 * (src/engines/pki/routes/edge-cache.ts): a GET that the pipeline answered from a public route
 * (no token needed, `public` without `publicSeesToken`) is remembered under the request line
 * itself — namespace header, path and query — and the next identical GET is answered from here
 * without resolving namespace, mount, token or route. docs/architecture.md "Every cache" lists it.
 *
 * Invariants:
 * - **Same bound as the answer.** An entry is served only while `now - readAt < CACHE_TTL_MS`,
 *   where `readAt` is when the D1 read behind the answer started (edge-cache.ts), so a revocation
 *   shows within CACHE_TTL_MS as before. What resolved the path (namespace, mount) was itself
 *   read at most CACHE_TTL_MS before the entry was made, so a mount disabled or moved by another
 *   isolate stops being served here within 2 × CACHE_TTL_MS.
 * - **The isolate that writes sees its write at once.** An entry records the generations of the
 *   areas that decided its answer ("namespaces", "mounts", "pki", "audit", "identity") from before the
 *   pipeline read anything; an invalidation of any of them since makes it unusable.
 * - **Only what the pipeline would answer the same way**: a GET with no body, no
 *   X-Vault-Wrap-TTL (a 400 in the pipeline) and no audit device that would record it (every
 *   audited request goes through the trail): the device list must be known, and either empty or
 *   every device's filter false for what the pipeline resolved when it kept the answer (`meta`,
 *   checked by the caller's `admit`; docs/audit.md "Filters"). Conditional headers are
 *   applied here exactly as edge-cache.ts applies them (`renderAnswer` is shared).
 * - **Bounded memory**: a `BoundedCache` (./bounded-cache.ts) of at most MAX_ENTRIES keys and
 *   MAX_BYTES of bodies counted per entry (a body shared by several keys is counted for each),
 *   the oldest entries evicted first when either would be exceeded; bodies over MAX_BODY_BYTES
 *   are not kept here (large CRLs stay in edge-cache.ts's own bound).
 * - Values only, never promises or Responses (workerd ties those to their request).
 */
import { BoundedCache } from "./bounded-cache";
import { cacheTtl, generationOf, type CacheArea } from "./read-cache";

/** One cacheable answer: a non-empty body, its type and its validators. */
export interface PublicAnswer {
  body: Uint8Array<ArrayBuffer>;
  contentType: string;
  /** Milliseconds; 0 when the object has no modification time. */
  lastModified: number;
  /** Strong entity tag, quoted. */
  etag: string;
}

/** Where a pipeline answer may be remembered: the request line and the generations before it. */
export interface AnswerSlot {
  key: string;
  generations: number[];
  /**
   * What the pipeline resolved for the request (the audit filter's fields: path relative to the
   * namespace, namespace, mount), kept with the answer so that `servedAnswer`'s caller can decide
   * whether serving it unaudited is allowed (src/app/dispatch.ts).
   */
  meta?: Readonly<Record<string, string>>;
}

interface Entry {
  answer: PublicAnswer;
  readAt: number;
  generations: number[];
  meta: Readonly<Record<string, string>> | undefined;
}

const AREAS: readonly CacheArea[] = ["namespaces", "mounts", "pki", "audit", "identity"];
const MAX_ENTRIES = 2048;
const MAX_BYTES = 8 * 1024 * 1024;
export const MAX_BODY_BYTES = 64 * 1024;

const entries = new BoundedCache<Entry>("core.publicAnswers", MAX_ENTRIES, { max: MAX_BYTES, of: (e) => e.answer.body.length });

function generationsNow(): number[] {
  return AREAS.map(generationOf);
}

function sameGenerations(a: number[], b: number[]): boolean {
  return a.length === b.length && a.every((g, i) => g === b[i]);
}

/**
 * The slot of a request that may be answered from here, or null: a GET without a body or
 * X-Vault-Wrap-TTL while caching is on. `auditOff` is whether the device list is known and no
 * device records every request (empty, or each has a filter: then `servedAnswer`'s `admit` decides).
 */
export function answerSlot(method: string, url: URL, namespace: string | null, headers: Headers, auditOff: boolean): AnswerSlot | null {
  if (method !== "GET" || !auditOff || cacheTtl() === 0) return null;
  if (headers.has("content-length") || headers.has("transfer-encoding") || headers.has("x-vault-wrap-ttl")) return null;
  return { key: `${namespace ?? ""}\u0000${url.pathname}${url.search}`, generations: generationsNow() };
}

/** Keeps the answer a public GET was given (edge-cache.ts, after the pipeline chose the route). */
export function rememberAnswer(slot: AnswerSlot, answer: PublicAnswer, readAt: number): void {
  if (answer.body.length > MAX_BODY_BYTES || !sameGenerations(slot.generations, generationsNow())) return;
  entries.set(slot.key, { answer, readAt, generations: slot.generations, meta: slot.meta });
}

/**
 * The remembered answer for this slot, rendered for its request; null when there is none usable,
 * or when `admit` (given when audit devices are enabled) refuses what the pipeline resolved.
 */
export function servedAnswer(slot: AnswerSlot, headers: Headers, now: number, admit?: (meta: Readonly<Record<string, string>>) => boolean): Response | null {
  const e = entries.get(slot.key);
  if (!e) return null;
  if (admit && (!e.meta || !admit(e.meta))) return null;
  if (now - e.readAt >= cacheTtl() || !sameGenerations(e.generations, slot.generations)) {
    entries.delete(slot.key);
    return null;
  }
  return renderAnswer(e.answer, e.readAt, headers, now);
}

/** Cache-Control of a GET answer: public, for what is left of its staleness bound. */
function cacheControl(readAt: number, now: number): string {
  const left = Math.max(0, Math.floor((readAt + cacheTtl() - now) / 1000));
  return `public, max-age=${left}, no-transform, must-revalidate`;
}

/** RFC 9110 §13.1.2: "*" or any listed tag equal to ours under weak comparison. */
function noneMatch(header: string, etag: string): boolean {
  if (header.trim() === "*") return true;
  const ours = etag.replace(/^W\//, "");
  return header.split(",").some((t) => t.trim().replace(/^W\//, "") === ours);
}

/**
 * Unchanged when the object has a modification time and it is strictly before If-Modified-Since
 * (RFC 9110 §13.1.3), the rule Vault's PKI applies to its CA and CRL reads (Vault API:
 * /v1/pki/ca, /v1/pki/crl; docs/pki-revocation-crl.md "Caching"). HTTP dates carry whole
 * seconds, so the comparison does too. Also the rule of the PKI's uncached conditional reads
 * (engines/pki/routes/common.ts notModified).
 */
export function notModifiedSince(headers: Headers, lastModifiedMs: number): boolean {
  const header = headers.get("if-modified-since");
  if (!header || !lastModifiedMs) return false;
  const since = Date.parse(header);
  return !Number.isNaN(since) && Math.floor(lastModifiedMs / 1000) * 1000 < since;
}

/**
 * A GET answer with its validators (RFC 9110 §8.8, §13; RFC 9111 §5.2; RFC 5019 §6.2): ETag,
 * Last-Modified and Cache-Control; 304 when the client's copy is current. If-None-Match, when
 * present, decides alone (RFC 9110 §13.1.3).
 */
export function renderAnswer(a: PublicAnswer, readAt: number, headers: Headers, now: number): Response {
  const out: Record<string, string> = { etag: a.etag, "cache-control": cacheControl(readAt, now) };
  if (a.lastModified) out["last-modified"] = new Date(Math.floor(a.lastModified / 1000) * 1000).toUTCString();
  const inm = headers.get("if-none-match");
  const unchanged = inm !== null ? noneMatch(inm, a.etag) : notModifiedSince(headers, a.lastModified);
  if (unchanged) return new Response(null, { status: 304, headers: out });
  out["content-type"] = a.contentType;
  return new Response(a.body, { status: 200, headers: out });
}
