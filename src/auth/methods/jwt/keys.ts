/**
 * Where a JWT login's verification keys come from (Vault API: /auth/jwt/config): a JWKS document at
 * `jwks_url`, the `jwks_uri` of an OIDC discovery document at `oidc_discovery_url`, or the PEM
 * public keys of `jwt_validation_pubkeys`. This module fetches, caches and imports them; the JWS
 * check itself is ./verify.ts.
 *
 * Fetching: every URL, including the `jwks_uri` a discovery document
 * names and every redirect target, passes `checkOutboundUrl(…, "AUTH_ALLOW_HTTP")` (https, or
 * plain http only to loopback in development or with AUTH_ALLOW_HTTP=true). One fetch, redirects
 * included, has FETCH_TIMEOUT_MS (10 s) in all, and a document is at most MAX_DOCUMENT_BYTES.
 * A failure is a KeySourceError whose message names the URL's field and what went wrong, never
 * the token; callers turn it into Vault's 400 (`error validating token: …` at login,
 * `error checking jwks URL …` at a config write), never a 500.
 *
 * Custom CAs (`jwks_ca_pem`, `oidc_discovery_ca_pem`): a Worker's fetch cannot be given a CA of
 * its own; the platform's trust store decides. The config accepts and validates the PEM and
 * stores it (so Vault clients that send it keep working), but it does not narrow or extend what
 * is trusted. An issuer whose certificate only a private CA signs cannot be reached.
 *
 * Caching, in isolate memory (go-oidc's RemoteKeySet strategy, with limits):
 * - A key set is kept per JWKS URL and reused for MAX_AGE_MS; after that the next login fetches
 *   it again, so a key the issuer removed stops working within the hour in every isolate.
 * - A token whose `kid` is not in the set (or, without a `kid`, that no key verifies) triggers an
 *   immediate refetch, so a rotated-in key works at once; but a key-set URL is refetched this way
 *   at most once per UNKNOWN_KID_INTERVAL_MS, whatever the `kid`. The `kid` is the caller's to
 *   choose: a limit per `kid` let every forged token with a fresh one cause a fetch, turning
 *   anonymous logins into load on the identity provider. OpenID Connect Core 1.0 §10.1.1 has a
 *   verifier go back to the `jwks_uri` on an unfamiliar `kid`, which this still does; the price
 *   of the limit is that a key rotated in within a minute of another refetch is accepted up to a
 *   minute later. Concurrent fetches of one URL share one request.
 * - The discovery document's `jwks_uri` is cached like a key set.
 * - Imported CryptoKeys are cached per key and algorithm. Every cache is a BoundedCache
 *   (src/core/bounded-cache.ts): values only, the oldest entries evicted past its bound.
 */
import { readCapped } from "../../../core/body";
import { BoundedCache } from "../../../core/bounded-cache";
import { importJWK, importSPKI, importX509, type CryptoKey, type JWK } from "jose";
import { ApiError } from "../../../core/errors";
import { parseJsonLimited } from "../../../core/json";
import { checkOutboundUrl } from "../../../core/outbound-url";
import { trimEndChar } from "../../../core/text";

export const FETCH_TIMEOUT_MS = 10_000;
export const MAX_AGE_MS = 60 * 60 * 1000;
export const UNKNOWN_KID_INTERVAL_MS = 60 * 1000;
export const MAX_DOCUMENT_BYTES = 512 * 1024;
const MAX_REDIRECTS = 3;
const MAX_CACHED_SETS = 256;
const MAX_IMPORTED = 1024;

/** A key source failed (unreachable, slow, bad document, refused URL). The message is safe to show. */
export class KeySourceError extends Error {}

export type RemoteSource = { kind: "jwks"; url: string } | { kind: "discovery"; url: string };

/** The public members of a JWK this service uses, plus the selection hints. */
export interface PublicJwk {
  kty: string;
  kid?: string;
  alg?: string;
  use?: string;
  key_ops?: string[];
  crv?: string;
  n?: string;
  e?: string;
  x?: string;
  y?: string;
}

export interface FetchDeps {
  fetch: (url: string, init: RequestInit) => Promise<Response>;
  now: () => number;
  timeoutMs: number;
}

const defaultDeps = (): FetchDeps => ({
  // Looked up at call time, so a test's stubbed global fetch is the one used.
  fetch: (url, init) => fetch(url, init),
  now: () => Date.now(),
  timeoutMs: FETCH_TIMEOUT_MS,
});

/** Reads a body up to `limit` bytes; more is an error (a hostile endpoint cannot exhaust memory). */
async function readLimited(res: Response, limit: number): Promise<string> {
  const declared = Number(res.headers.get("content-length") ?? "0");
  if (declared > limit) throw new KeySourceError(`document larger than ${limit} bytes`);
  const bytes = await readCapped(res.body, limit);
  if (bytes === null) throw new KeySourceError(`document larger than ${limit} bytes`);
  return new TextDecoder().decode(bytes);
}

/**
 * GETs a JSON document from a URL the operator configured, under the outbound-URL rule, with one
 * deadline for the whole exchange (redirects and body included).
 */
export async function fetchJson(env: Env, field: string, rawUrl: string, deps: FetchDeps): Promise<unknown> {
  const checked = (u: string): URL => {
    try {
      return checkOutboundUrl(env, field, u, "AUTH_ALLOW_HTTP");
    } catch (e) {
      if (e instanceof ApiError) throw new KeySourceError(e.messages.join("; "));
      throw e;
    }
  };
  let url = checked(rawUrl);
  const seconds = deps.timeoutMs / 1000;
  const signal = AbortSignal.timeout(deps.timeoutMs);
  // The race makes the deadline hold even for a fetch implementation that ignores the signal.
  const deadline = new Promise<never>((_, reject) => {
    signal.addEventListener("abort", () => reject(new KeySourceError(`${field}: no answer within ${seconds}s`)), { once: true });
  });
  deadline.catch(() => undefined);
  const exchange = async (): Promise<unknown> => {
    for (let hop = 0; ; hop++) {
      let res: Response;
      try {
        res = await deps.fetch(url.toString(), { method: "GET", headers: { accept: "application/json" }, redirect: "manual", signal });
      } catch {
        if (signal.aborted) throw new KeySourceError(`${field}: no answer within ${seconds}s`);
        throw new KeySourceError(`${field}: ${url.host} could not be reached`);
      }
      const location = res.headers.get("location");
      if (res.status >= 300 && res.status < 400 && location !== null) {
        await res.body?.cancel();
        if (hop >= MAX_REDIRECTS) throw new KeySourceError(`${field}: too many redirects`);
        let next: string;
        try {
          next = new URL(location, url).toString();
        } catch {
          throw new KeySourceError(`${field}: the redirect target is not a valid URL`);
        }
        url = checked(next);
        continue;
      }
      if (!res.ok) {
        await res.body?.cancel();
        throw new KeySourceError(`${field}: ${url.host} answered HTTP ${res.status}`);
      }
      const text = await readLimited(res, MAX_DOCUMENT_BYTES).catch((e: unknown) => {
        if (e instanceof KeySourceError) throw new KeySourceError(`${field}: ${e.message}`);
        throw new KeySourceError(`${field}: the answer could not be read`);
      });
      const parsed = parseJsonLimited(text, 16);
      if (!parsed.ok) throw new KeySourceError(`${field}: the answer is not a JSON document`);
      return parsed.value;
    }
  };
  return Promise.race([exchange(), deadline]);
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const optString = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/**
 * The usable keys of a JWKS document (RFC 7517 §5): `keys` must be a list; members that are not
 * objects or lack `kty` are skipped, as are private members (a set that leaks a private key
 * still only yields public keys here).
 */
export function parseJwks(doc: unknown, field: string): PublicJwk[] {
  if (!isObject(doc) || !Array.isArray(doc.keys)) throw new KeySourceError(`${field}: not a JSON Web Key Set (no "keys" list)`);
  const out: PublicJwk[] = [];
  for (const k of doc.keys) {
    if (!isObject(k) || typeof k.kty !== "string") continue;
    const jwk: PublicJwk = { kty: k.kty };
    for (const name of ["kid", "alg", "use", "crv", "n", "e", "x", "y"] as const) {
      const v = optString(k[name]);
      if (v !== undefined) jwk[name] = v;
    }
    if (Array.isArray(k.key_ops)) jwk.key_ops = k.key_ops.filter((o): o is string => typeof o === "string");
    out.push(jwk);
  }
  return out;
}

/** Whether a JWK may verify a signature made with `alg` (RFC 7517 §4.2–4.4, RFC 7518 §3, RFC 8037). */
export function jwkFits(jwk: PublicJwk, alg: string): boolean {
  if (jwk.use !== undefined && jwk.use !== "sig") return false;
  if (jwk.alg !== undefined && jwk.alg !== alg) return false;
  if (jwk.key_ops !== undefined && !jwk.key_ops.includes("verify")) return false;
  if (alg.startsWith("RS") || alg.startsWith("PS")) return jwk.kty === "RSA";
  const curve = EC_CURVES[alg];
  if (curve !== undefined) return jwk.kty === "EC" && jwk.crv === curve;
  if (alg === "EdDSA") return jwk.kty === "OKP" && jwk.crv === "Ed25519";
  return false;
}

const EC_CURVES: Record<string, string> = { ES256: "P-256", ES384: "P-384", ES512: "P-521" };

const imported = new BoundedCache<CryptoKey | null>("jwt.importedKeys", MAX_IMPORTED);

/** Imports a JWK's public members for `alg`; null when it cannot be (cached either way). */
export async function importPublicJwk(jwk: PublicJwk, alg: string): Promise<CryptoKey | null> {
  const pub: JWK = { kty: jwk.kty, crv: jwk.crv, n: jwk.n, e: jwk.e, x: jwk.x, y: jwk.y };
  const id = `${alg}|${JSON.stringify(pub)}`;
  const hit = imported.get(id);
  if (hit !== undefined) return hit;
  let key: CryptoKey | null = null;
  try {
    const k = await importJWK(pub, alg);
    key = k instanceof Uint8Array ? null : k;
  } catch {
    key = null;
  }
  imported.set(id, key);
  return key;
}

/** The algorithms a PEM key is tried with to see whether it is a usable public key at all. */
const PEM_PROBE_ALGS = ["RS256", "ES256", "ES384", "ES512", "EdDSA"];

/** Imports a PEM public key (SPKI "PUBLIC KEY" or an X.509 "CERTIFICATE") for `alg`; null when it cannot be. */
export async function importPem(pem: string, alg: string): Promise<CryptoKey | null> {
  const text = pem.trim();
  const id = `${alg}|${text}`;
  const hit = imported.get(id);
  if (hit !== undefined) return hit;
  let key: CryptoKey | null = null;
  try {
    key = text.startsWith("-----BEGIN CERTIFICATE-----") ? await importX509(text, alg) : await importSPKI(text, alg);
  } catch {
    key = null;
  }
  imported.set(id, key);
  return key;
}

/**
 * Config-write check of `jwt_validation_pubkeys` (Vault's certutil.ParsePublicKeyPEM): each entry
 * must be one PEM public key or certificate holding an RSA, ECDSA or Ed25519 key.
 */
export async function checkPemKey(pem: string): Promise<void> {
  const text = pem.trim();
  const blocks = text.match(/-----BEGIN [A-Z0-9 ]+-----/g) ?? [];
  if (blocks.length !== 1) throw new KeySourceError(blocks.length === 0 ? "data does not contain any valid public keys" : "unexpected trailing data after parsed PEM block");
  for (const alg of PEM_PROBE_ALGS) if ((await importPem(text, alg)) !== null) return;
  throw new KeySourceError("data does not contain any valid public keys");
}

interface CachedSet {
  keys: PublicJwk[];
  fetchedAt: number;
}

export interface KeyCacheOptions extends Partial<FetchDeps> {
  maxAgeMs?: number;
  unknownKidIntervalMs?: number;
}

/** A resolved remote key set: the JWKS URL used and its keys. */
export interface KeySetView {
  jwksUrl: string;
  keys: PublicJwk[];
}

/**
 * The isolate's cache of remote key sets (see the module comment). One instance serves every
 * mount (a URL's document is the same for all); tests make their own with an injected fetch and
 * clock.
 */
export class RemoteKeyCache {
  private readonly deps: FetchDeps;
  private readonly maxAgeMs: number;
  private readonly kidIntervalMs: number;
  private readonly sets = new BoundedCache<CachedSet>("jwt.keySets", MAX_CACHED_SETS);
  private readonly discovered = new BoundedCache<{ jwksUrl: string; fetchedAt: number }>("jwt.discoveredJwksUris", MAX_CACHED_SETS);
  /** Fetches under way, so concurrent misses of one URL share one; each leaves when it settles. */
  private readonly inflight = new Map<string, Promise<PublicJwk[]>>();
  /** When each key-set URL was last refetched for an unknown `kid`. */
  private readonly refetchMarks = new BoundedCache<number>("jwt.unknownKidRefetches", MAX_CACHED_SETS);

  constructor(opts: KeyCacheOptions = {}) {
    const d = defaultDeps();
    this.deps = { fetch: opts.fetch ?? d.fetch, now: opts.now ?? d.now, timeoutMs: opts.timeoutMs ?? d.timeoutMs };
    this.maxAgeMs = opts.maxAgeMs ?? MAX_AGE_MS;
    this.kidIntervalMs = opts.unknownKidIntervalMs ?? UNKNOWN_KID_INTERVAL_MS;
  }

  /** The key set for a login: from the cache while fresh, else fetched. */
  async current(env: Env, source: RemoteSource): Promise<KeySetView> {
    const jwksUrl = await this.jwksUrlOf(env, source, false);
    const cached = this.sets.get(jwksUrl);
    if (cached && this.deps.now() - cached.fetchedAt < this.maxAgeMs) return { jwksUrl, keys: cached.keys };
    return { jwksUrl, keys: await this.fetchSet(env, jwksUrl, source.kind === "jwks" ? "jwks_url" : "jwks_uri") };
  }

  /**
   * After a token whose `kid` the set lacks (or, without a `kid`, that no key verified): refetch
   * now, unless this key-set URL was already refetched for an unknown `kid` within the interval,
   * in which case null (the caller fails the login without calling out). The `kid` plays no part.
   */
  async refetchForUnknownKid(env: Env, view: KeySetView, field: string): Promise<PublicJwk[] | null> {
    const now = this.deps.now();
    const last = this.refetchMarks.get(view.jwksUrl);
    if (last !== undefined && now - last < this.kidIntervalMs) return null;
    this.refetchMarks.set(view.jwksUrl, now);
    return this.fetchSet(env, view.jwksUrl, field);
  }

  /** A config write: fetch the discovery document (if any) and the key set now, replacing the cache. */
  async load(env: Env, source: RemoteSource): Promise<KeySetView> {
    const jwksUrl = await this.jwksUrlOf(env, source, true);
    return { jwksUrl, keys: await this.fetchSet(env, jwksUrl, source.kind === "jwks" ? "jwks_url" : "jwks_uri") };
  }

  private async jwksUrlOf(env: Env, source: RemoteSource, fresh: boolean): Promise<string> {
    if (source.kind === "jwks") {
      // The rule is checked on every use, not only at the write: revoking AUTH_ALLOW_HTTP takes effect at once.
      return this.checked(env, "jwks_url", source.url);
    }
    const hit = this.discovered.get(source.url);
    if (!fresh && hit && this.deps.now() - hit.fetchedAt < this.maxAgeMs) return this.checked(env, "jwks_uri", hit.jwksUrl);
    const jwksUrl = await discoverJwksUri(env, source.url, this.deps);
    this.discovered.set(source.url, { jwksUrl, fetchedAt: this.deps.now() });
    return jwksUrl;
  }

  private checked(env: Env, field: string, url: string): string {
    try {
      return checkOutboundUrl(env, field, url, "AUTH_ALLOW_HTTP").toString();
    } catch (e) {
      if (e instanceof ApiError) throw new KeySourceError(e.messages.join("; "));
      throw e;
    }
  }

  private fetchSet(env: Env, jwksUrl: string, field: string): Promise<PublicJwk[]> {
    const running = this.inflight.get(jwksUrl);
    if (running) return running;
    const p = (async () => {
      const keys = parseJwks(await fetchJson(env, field, jwksUrl, this.deps), field);
      this.sets.set(jwksUrl, { keys, fetchedAt: this.deps.now() });
      return keys;
    })().finally(() => this.inflight.delete(jwksUrl));
    this.inflight.set(jwksUrl, p);
    return p;
  }
}

/**
 * OpenID Connect Discovery 1.0 §4: GET <issuer>/.well-known/openid-configuration; its `issuer`
 * must be the configured URL exactly (go-oidc's check), and it must name a `jwks_uri`, which is
 * then subject to the same outbound rule.
 */
export async function discoverJwksUri(env: Env, discoveryUrl: string, deps: FetchDeps): Promise<string> {
  const wellKnown = `${trimEndChar(discoveryUrl, "/")}/.well-known/openid-configuration`;
  const doc = await fetchJson(env, "oidc_discovery_url", wellKnown, deps);
  if (!isObject(doc)) throw new KeySourceError("oidc_discovery_url: the discovery document is not a JSON object");
  if (doc.issuer !== discoveryUrl) {
    throw new KeySourceError(`oidc_discovery_url: issuer did not match the issuer returned by provider, expected "${discoveryUrl}" got "${String(doc.issuer)}"`);
  }
  const jwksUri = doc.jwks_uri;
  if (typeof jwksUri !== "string" || jwksUri === "") throw new KeySourceError("oidc_discovery_url: the discovery document has no jwks_uri");
  try {
    return checkOutboundUrl(env, "jwks_uri", jwksUri, "AUTH_ALLOW_HTTP").toString();
  } catch (e) {
    if (e instanceof ApiError) throw new KeySourceError(e.messages.join("; "));
    throw e;
  }
}

/** The isolate's key cache used by the routes. */
export const keyCache = new RemoteKeyCache();
