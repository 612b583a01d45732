/**
 * What every ACME endpoint goes through before its own logic (RFC 8555 §6; Vault's
 * acme_wrappers.go), and how its answers are rendered:
 *
 *   1. one D1 batch: the issuance state (role of the path, issuers, config, keys), config/acme,
 *      the presented nonce consumed (DELETE … RETURNING: single use under concurrency), the
 *      `kid` account, and a fresh nonce stored for the response (only if ACME is enabled);
 *   2. ACME disabled → 404; the directory resolved (role, issuer, allowed lists);
 *   3. the JWS: protected `url` must be `<cluster path>/<request path>` (Vault's rule), the
 *      nonce must have been live (`badNonce`, answered with a fresh Replay-Nonce), `jwk` or
 *      `kid` as the endpoint demands, the account valid and of this directory, the signature.
 *
 * Successful answers carry `Replay-Nonce`, `Link: <directory>;rel="index"` and
 * `Cache-Control: no-store`; every refusal is a problem document (problem.ts), with a fresh
 * `Replay-Nonce` whenever one could be issued (RFC 8555 §6.5 SHOULD; Vault omits it).
 */
import type { Req } from "../../../core/route";
import { bytesToBase64Url } from "../../../core/encoding";
import type { IssueContext } from "../issuance/pipeline";
import { mountOf } from "../routes/common";
import { acmeConfigQuery, accountByIdQuery, consumeNonceStmt, deleteExpiredNonces, insertNonceIfEnabledStmt, insertNonceStmt, type AcmeAccountRow } from "../storage/acme-store";
import { issuanceStateOf, issuanceStateQueries, type IssuanceState } from "../storage/store";
import { decodeAcmeConfig, resolveDirectory, type AcmeConfig, type Directory } from "./config";
import { parseJwsBody, payloadObject, publicJwk, thumbprint, verifyAccountJws, type ParsedJws } from "./jws";
import { AcmeError, acmeError, problemResponse, toAcmeError, type ProblemType } from "./problem";

/** How long a nonce stays usable. */
const NONCE_TTL_MS = 30 * 60 * 1000;

export interface AcmeRequest {
  req: Req;
  ctx: IssueContext;
  cfg: AcmeConfig;
  dir: Directory;
  state: IssuanceState;
  now: number;
  /** Absolute URL of a resource of this directory ("account/x" → `<base>/account/x`). */
  url(rel: string): string;
}

export interface SignedRequest extends AcmeRequest {
  jws: ParsedJws;
  /** The signing key (public members): the `jwk`, or the account's key. */
  jwk: Record<string, unknown>;
  /** The `kid` account; null on `jwk` requests. */
  account: AcmeAccountRow | null;
  /** The payload object; null for POST-as-GET. */
  payload: Record<string, unknown> | null;
}

export interface AcmeReply {
  status?: number;
  /** A JSON body (application/json), or raw text with its content type. */
  json?: unknown;
  text?: { body: string; contentType: string };
  headers?: Record<string, string>;
}

/** How an endpoint authenticates: the account key in `jwk` (new-account), its `kid`, or either (revoke-cert). */
export type AuthMode = "jwk" | "kid" | "either";

const newNonce = (): string => bytesToBase64Url(crypto.getRandomValues(new Uint8Array(16)));

function linkIndex(dir: Directory | null): Record<string, string> {
  return linkIndexOf(dir ? dir.base : null);
}

/** RFC 8555 §7.1: `Link: <directory>;rel="index"` for a directory base URL (none without one). */
export function linkIndexOf(base: string | null): Record<string, string> {
  return base ? { link: `<${base}/directory>;rel="index"` } : {};
}

export function render(reply: AcmeReply, dir: Directory, nonce: string | null): Response {
  const headers: Record<string, string> = { "cache-control": "no-store", ...linkIndex(dir), ...reply.headers };
  if (nonce) headers["replay-nonce"] = nonce;
  if (reply.text) return new Response(reply.text.body, { status: reply.status ?? 200, headers: { ...headers, "content-type": reply.text.contentType } });
  if (reply.json === undefined) return new Response(null, { status: reply.status ?? 204, headers });
  return new Response(JSON.stringify(reply.json), { status: reply.status ?? 200, headers: { ...headers, "content-type": "application/json" } });
}

/** The `kid` of a request as the account id it names (the last segment of `<base>/account/<id>`). */
function kidAccountId(kid: string | null): string {
  if (kid === null) return "";
  const m = /\/account\/([^/]+)$/.exec(kid);
  return m?.[1] ?? "";
}

interface Loaded {
  cfg: AcmeConfig;
  state: IssuanceState;
  consumed: boolean;
  account: AcmeAccountRow | null;
}

async function load(req: Req, now: number, opts: { fresh: string | null; nonce: string; accountId: string }): Promise<Loaded> {
  const { db } = req;
  const mountId = mountOf(req).id;
  const [roles, issuers, config, keys] = issuanceStateQueries(db, mountId, req.params.role ?? null);
  const results = await db.batch([
    roles,
    issuers,
    config,
    keys,
    acmeConfigQuery(db, mountId),
    consumeNonceStmt(db, mountId, opts.nonce, now),
    accountByIdQuery(db, mountId, opts.accountId),
    ...(opts.fresh ? [insertNonceIfEnabledStmt(db, mountId, opts.fresh, now + NONCE_TTL_MS)] : []),
  ]);
  const [r, i, c, k, acme, consumed, account] = results;
  return {
    state: issuanceStateOf(req.params.role ?? null, r, i, c, k),
    cfg: decodeAcmeConfig(acme[0]?.value),
    consumed: opts.nonce !== "" && consumed.length === 1,
    account: account[0] ?? null,
  };
}

function base(req: Req, now: number, loaded: Loaded, dir: Directory): AcmeRequest {
  return {
    req,
    ctx: { db: req.db, env: req.env, mount: mountOf(req) },
    cfg: loaded.cfg,
    dir,
    state: loaded.state,
    now,
    url: (rel) => `${dir.base}/${rel}`,
  };
}

/** The path of the request relative to its mount (what the JWS `url` must end with). */
function relativePath(req: Req): string {
  return req.path.slice(mountOf(req).path.length);
}

const disabled = (): AcmeError => acmeError("malformed", "ACME is not enabled on this mount (config/acme enabled)", 404);

/** An unauthenticated GET endpoint (directory, new-nonce). */
export function acmeGet(handler: (a: AcmeRequest, nonce: string | null) => Promise<AcmeReply>, opts: { nonce: boolean }) {
  return async (req: Req): Promise<Response> => {
    const now = Date.now();
    let dir: Directory | null = null;
    const fresh = opts.nonce ? newNonce() : null;
    try {
      const loaded = await load(req, now, { fresh: null, nonce: "", accountId: "" });
      if (!loaded.cfg.enabled) throw disabled();
      dir = await resolveDirectory(req.db, mountOf(req).id, loaded.cfg, loaded.state, req.params);
      if (fresh) {
        await insertNonceStmt(req.db, mountOf(req).id, fresh, now + NONCE_TTL_MS);
        // Expired nonces go now and then, off the request's path.
        if (Math.random() < 1 / 16) req.waitUntil(deleteExpiredNonces(req.db, mountOf(req).id, now).catch(() => undefined));
      }
      return render(await handler(base(req, now, loaded, dir), fresh), dir, fresh);
    } catch (e) {
      return problemResponse(toAcmeError(e, "malformed", req.requestId), linkIndex(dir));
    }
  };
}

/**
 * A JWS-authenticated POST endpoint. `fallback` is the problem type for ApiErrors raised by the
 * PKI code underneath (badCSR at finalize, malformed elsewhere).
 */
export function acmePost(handler: (s: SignedRequest) => Promise<AcmeReply>, auth: AuthMode, fallback: ProblemType = "malformed") {
  return async (req: Req): Promise<Response> => {
    const now = Date.now();
    const fresh = newNonce();
    let dir: Directory | null = null;
    let issued: string | null = null;
    try {
      // Parsed before the batch (it needs the nonce and kid); a malformed body is reported only
      // after the enabled check, so a disabled mount answers every ACME path alike.
      let jws: ParsedJws | null = null;
      let parseError: unknown = null;
      try {
        jws = parseJwsBody(req.rawBody);
      } catch (e) {
        parseError = e;
      }
      const loaded = await load(req, now, { fresh, nonce: jws?.header.nonce ?? "", accountId: kidAccountId(jws?.header.kid ?? null) });
      if (!loaded.cfg.enabled) throw disabled();
      issued = fresh;
      dir = await resolveDirectory(req.db, mountOf(req).id, loaded.cfg, loaded.state, req.params);
      // RFC 8555 §6.2: a POST body of another media type is refused with 415, as a problem.
      if (req.contentType !== "application/jose+json") {
        throw acmeError("malformed", `the request's Content-Type must be application/jose+json, not ${JSON.stringify(req.contentType.slice(0, 64))} (RFC 8555 §6.2)`, 415);
      }
      if (!jws) throw parseError;
      const a = base(req, now, loaded, dir);

      const expected = `${dir.base.slice(0, dir.base.length - dir.prefix.length)}${relativePath(req)}`;
      if (jws.header.url !== expected) throw acmeError("unauthorized", `invalid value for 'url' in 'protected': got '${jws.header.url}' expected '${expected}'`);
      if (jws.header.nonce === null) throw acmeError("badNonce", "'protected' lacks 'nonce'");
      if (!loaded.consumed) throw acmeError("badNonce", "invalid or reused nonce");

      const { jwk, kid } = jws.header;
      if (jwk !== null && kid !== null) throw acmeError("malformed", "'protected' must carry exactly one of 'jwk' and 'kid'");
      if (jwk === null && kid === null) throw acmeError("malformed", "'protected' lacks 'jwk' or 'kid'");
      if (auth === "jwk" && kid !== null) throw acmeError("malformed", "this resource must be requested with 'jwk', not 'kid' (RFC 8555 §6.2)");
      if (auth === "kid" && jwk !== null) throw acmeError("malformed", "this resource must be requested with 'kid', not 'jwk' (RFC 8555 §6.2)");

      let key: Record<string, unknown>;
      let account: AcmeAccountRow | null = null;
      if (kid !== null) {
        account = loaded.account;
        if (!account || kid !== a.url(`account/${account.id}`)) throw acmeError("accountDoesNotExist", "no account exists with the provided 'kid'");
        if (account.directory !== dir.prefix) throw acmeError("unauthorized", "the account belongs to another ACME directory of this mount");
        if (account.status !== "valid") throw acmeError("unauthorized", `the account is ${account.status}`);
        key = account.jwk;
      } else {
        key = publicJwk(jwk ?? {});
      }
      const payload = payloadObject(await verifyAccountJws(jws, key, account !== null));
      return render(await handler({ ...a, jws, jwk: key, account, payload }), dir, issued);
    } catch (e) {
      return problemResponse(toAcmeError(e, fallback, req.requestId), { ...linkIndex(dir), ...(issued ? { "replay-nonce": issued } : {}) });
    }
  };
}

/** The account key's thumbprint, for key authorizations (RFC 8555 §8.1). */
export const accountThumbprint = (s: SignedRequest): Promise<string> => thumbprint(s.jwk);
