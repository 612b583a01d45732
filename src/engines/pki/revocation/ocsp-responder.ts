/**
 * The OCSP responder of a mount (RFC 6960; docs/pki-ocsp.md): from a DER request to the DER
 * response and its HTTP status. It takes the mount's issuers, keys and config/crl from the PKI
 * read model (storage/store.ts loadIssuanceState) and the revocation status of the requested
 * serials from storage/revocation-store.ts (revocationStatuses), both cached per isolate for at
 * most CACHE_TTL_MS and invalidated by this isolate's writes; picks the signing issuer the way
 * upstream does, and signs with that issuer's key. Signed answers are cached by the route
 * (routes/ocsp.ts, routes/edge-cache.ts), not here.
 *
 * Differences from upstream, on purpose: the request's nonce is echoed (RFC 8954; the issue asks
 * for it), and every CertID of the request is answered, not only the first (the first one still
 * picks the signer; the others are answered relative to that signer).
 *
 * Per-isolate cache: imported signing keys (non-extractable CryptoKeys), keyed by key id and the
 * signature choice and checked against the sealed key they were unsealed from, so a changed or
 * deleted key is never used once the read model shows the change.
 */
import { BoundedCache } from "../../../core/bounded-cache";
import type { Db } from "../../../core/db/client";
import { parseDurationSeconds } from "../../../core/duration";
import type { MountRow } from "../../../core/mount-store";
import { base64ToBytes } from "../../../core/encoding";
import { unsealPrivateKey } from "../storage/keystore";
import {
  CrlReason,
  OcspRequestError,
  OcspStatus,
  certIdMatches,
  errorResponse,
  issuerHashes,
  parseOcspRequest,
  responseData,
  successfulResponse,
  type CertStatus,
  type OcspCertId,
  type OcspRequest,
  type SingleAnswer,
} from "../x509/ocsp";
import { revocationStatuses, type RevocationStatus } from "../storage/revocation-store";
import { loadIssuanceState, type IssuerRow, type KeyRow } from "../storage/store";
import { importSigner, signTbsCertificate, type Signer } from "../x509/x509";

export interface OcspContext {
  db: Db;
  env: Env;
  mount: MountRow;
}

/** What the route sends: the HTTP status (200, or 400/401/500 as upstream's path_ocsp.go), the DER body and, when signed, its times. */
export interface OcspOutcome {
  httpStatus: 200 | 400 | 401 | 500;
  body: Uint8Array<ArrayBuffer>;
  thisUpdate: Date | null;
  nextUpdate: Date | null;
  /** The request carried a nonce (RFC 8954): its answer is for that request only, never reused. */
  nonce: boolean;
}

const failure = (httpStatus: 400 | 401 | 500, status: 1 | 2 | 6): OcspOutcome => ({ httpStatus, body: errorResponse(status), thisUpdate: null, nextUpdate: null, nonce: false });
export const MALFORMED = (): OcspOutcome => failure(400, OcspStatus.malformedRequest);
export const UNAUTHORIZED = (): OcspOutcome => failure(401, OcspStatus.unauthorized);
export const INTERNAL_ERROR = (): OcspOutcome => failure(500, OcspStatus.internalError);

// -- signing keys ---------------------------------------------------------------------------------

/**
 * Opened signing keys, per isolate, by the rule of the issuance pipeline's (issuance/pipeline.ts
 * issuerSigner): values, never promises; checked against the sealed key text they were opened
 * from, so a changed or deleted key is never used; at most 64, the oldest evicted first.
 */
const signerCache = new BoundedCache<{ sealed: string; signer: Signer }>("pki.ocspSigners", 64);

/**
 * How the responder signs for an issuer: its revocation_signature_algorithm, with PSS downgraded
 * to PKCS#1 v1.5 as upstream does (OpenBao path_ocsp.go); a value that does not suit the key (or none) means the
 * key's default (SHA-256 for RSA, the curve's hash for ECDSA, pure Ed25519).
 */
function signatureChoice(issuer: IssuerRow, key: KeyRow): { bits: number; ecHash: string | null; label: string } {
  const alg = issuer.revocationSignatureAlgorithm;
  const rsa = /^SHA(256|384|512)WithRSA(?:PSS)?$/.exec(alg);
  if (key.keyType === "rsa" && rsa) return { bits: Number(rsa[1]), ecHash: null, label: `rsa${rsa[1]}` };
  const ec = /^ECDSAWithSHA(256|384|512)$/.exec(alg);
  if (key.keyType === "ec" && ec) return { bits: 0, ecHash: `SHA-${ec[1]}`, label: `ec${ec[1]}` };
  return { bits: 0, ecHash: null, label: "default" };
}

async function signerFor(env: Env, issuer: IssuerRow, key: KeyRow): Promise<Signer> {
  const choice = signatureChoice(issuer, key);
  const cacheKey = `${key.mountId}|${key.id}|${choice.label}`;
  const hit = signerCache.get(cacheKey);
  if (hit && hit.sealed === key.sealedPrivateKey) return hit.signer;
  const imported = await importSigner(await unsealPrivateKey(env, key), base64ToBytes(key.publicKey), choice.bits, false);
  const signer = choice.ecHash ? { ...imported, algorithm: { ...imported.algorithm, hash: choice.ecHash } } : imported;
  signerCache.set(cacheKey, { sealed: key.sealedPrivateKey, signer });
  return signer;
}

// -- answering ------------------------------------------------------------------------------------

const matchesIssuer = async (id: OcspCertId, issuer: IssuerRow): Promise<boolean> =>
  certIdMatches(id, await issuerHashes(id.hash, issuer.subjectDer, issuer.publicKey));

/**
 * The status of one CertID in a response signed by `signer`. A serial is revoked only under the
 * issuer its revocation entry names (when it names one); "good" is any other serial under the
 * signer, issued here or not (upstream behaviour: "good" for any serial not revoked); anything else is "unknown".
 */
async function statusOf(id: OcspCertId, signer: IssuerRow, rev: RevocationStatus | undefined, issuers: Map<string, IssuerRow>): Promise<CertStatus> {
  if (!(await matchesIssuer(id, signer))) return { kind: "unknown" };
  if (!rev) return { kind: "good" };
  if (rev.issuerId !== "" && rev.issuerId !== signer.id) {
    const owner = issuers.get(rev.issuerId);
    if (!owner || !(await matchesIssuer(id, owner))) return { kind: "unknown" };
  }
  // The recorded reason (ACME revoke-cert's; the Vault API records none: unspecified, RFC 5280 §5.3.1).
  return { kind: "revoked", revocationTime: new Date(rev.revocationTime * 1000), reason: rev.reason || CrlReason.unspecified };
}

/**
 * Answers a DER request, or `null` for one that could not even be decoded (bad base64, wrong
 * content type). Throws only on internal failures (storage, a broken stored key): the route
 * answers those with internalError.
 */
export async function answerOcsp(ctx: OcspContext, der: Uint8Array<ArrayBuffer> | null, now = new Date()): Promise<OcspOutcome> {
  const { db, env, mount } = ctx;
  let request: OcspRequest | null = null;
  try {
    if (der) request = parseOcspRequest(der);
  } catch (e) {
    if (!(e instanceof OcspRequestError)) throw e;
  }
  if (!request) {
    // ocsp_disable: the responder answers unauthorized whatever it is sent (as upstream).
    const { config } = await loadIssuanceState(db, mount.id, null);
    return config.crl.ocsp_disable ? UNAUTHORIZED() : MALFORMED();
  }

  const serials = [...new Set(request.certIds.map((c) => c.serial))];
  const [state, revoked] = await Promise.all([loadIssuanceState(db, mount.id, null), revocationStatuses(db, mount.id, serials)]);
  const crl = state.config.crl;
  if (crl.ocsp_disable) return UNAUTHORIZED();
  let expirySeconds: number;
  try {
    expirySeconds = parseDurationSeconds(crl.ocsp_expiry);
  } catch {
    return UNAUTHORIZED(); // upstream answers unauthorized when config/crl is unreadable
  }
  const keys = new Map(state.keys.map((k) => [k.id, k]));
  const issuers = new Map(state.issuers.map((i) => [i.id, i]));
  const keyOf = (i: IssuerRow): KeyRow | undefined => (i.keyId ? keys.get(i.keyId) : undefined);

  // The signer (as upstream's path_ocsp.go chooses it): the issuer with a key whose name and key hashes match the first CertID
  // (only the issuer named by its revocation entry, if any), and that may sign OCSP.
  const [first] = request.certIds;
  if (!first) return MALFORMED();
  const firstRev = revoked.get(first.serial);
  const candidates = firstRev?.issuerId ? state.issuers.filter((i) => i.id === firstRev.issuerId) : state.issuers;
  let signer: IssuerRow | null = null;
  let matchedWithoutUsage = false;
  for (const issuer of candidates) {
    if (!keyOf(issuer) || !(await matchesIssuer(first, issuer))) continue;
    if (issuer.usage.includes("ocsp-signing")) {
      signer = issuer;
      break;
    }
    // A matching issuer that may not sign OCSP: a reissued one with the same name and key may.
    matchedWithoutUsage = true;
  }
  if (!signer) {
    if (matchedWithoutUsage) return UNAUTHORIZED();
    // Nothing of ours issued it: "unknown", signed by the default issuer when it can sign.
    const fallback = issuers.get(state.config.issuers.default);
    if (!fallback || !keyOf(fallback) || !fallback.usage.includes("ocsp-signing")) return UNAUTHORIZED();
    signer = fallback;
  }
  const key = keyOf(signer);
  if (!key) return UNAUTHORIZED();

  const answers: SingleAnswer[] = [];
  for (const id of request.certIds) answers.push({ certId: id.der, status: await statusOf(id, signer, revoked.get(id.serial), issuers) });
  // Whole seconds: GeneralizedTime in DER carries no fraction here (RFC 5280 §4.1.2.5.2).
  const thisUpdate = new Date(Math.floor(now.getTime() / 1000) * 1000);
  const nextUpdate = expirySeconds > 0 ? new Date(thisUpdate.getTime() + expirySeconds * 1000) : null;
  const tbs = responseData({
    responderName: base64ToBytes(signer.subjectDer),
    producedAt: thisUpdate,
    thisUpdate,
    nextUpdate,
    answers,
    nonce: request.nonce,
  });
  // BasicOCSPResponse has the shape of a signed certificate: SEQUENCE { tbs, algorithm,
  // signature } (RFC 6960 §4.2.1); no certificates are embedded (upstream does not either).
  const basic = await signTbsCertificate(() => tbs, await signerFor(env, signer, key));
  return { httpStatus: 200, body: successfulResponse(basic), thisUpdate, nextUpdate, nonce: request.nonce !== null };
}
