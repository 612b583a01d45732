/**
 * ACME Renewal Information (RFC 9773; docs/pki-acme.md "Renewal information"): the
 * `renewalInfo` resource of every directory, `GET <directory>/renewal-info/<certID>`,
 * unauthenticated like the directory (§4.1), answering `suggestedWindow` with a `Retry-After`;
 * the `replaces` check of new-order (§5); the operator's early-renewal marks
 * (`acme/renewal-marks`, sudo).
 *
 * The window (Let's Encrypt's practice; RFC 9773 leaves it to the CA):
 * - by default centred where the last third of the validity begins (half way for certificates
 *   shorter than 10 days), ± 1 % of the validity;
 * - "now" — a window wholly in the past, [now − 1 h, now − 30 min], which §4.2 tells a client to
 *   act on at once — when the certificate is revoked, its issuer is revoked, or an operator
 *   marked its issuer or its role (a role's mark reaches the certificates ordered over ACME with
 *   that role) after the certificate was issued; a mark's `explanationURL` is shown with it.
 *
 * Windows are built from a per-isolate cache (`pki.acmeRenewalInfo`, area "pki") with the same
 * staleness bound as OCSP answers (CACHE_TTL_MS after the read started; a revocation or a mark
 * written by this isolate invalidates it at once: docs/architecture.md "The read model").
 */
import { generationOf, ReadCache } from "../../../core/read-cache";
import { base64ToBytes, base64UrlToBytes, bytesToBase64Url, bytesToHex } from "../../../core/encoding";
import { badRequest } from "../../../core/errors";
import { defineFields } from "../../../core/fields";
import { MAX_URL_BYTES } from "../../../core/limits";
import { route, type JsonReply, type Req, type RouteDef } from "../../../core/route";
import { certDerFromPem, resolveIssuerIn } from "../ca/issuers";
import { mountOf } from "../routes/common";
import { isReplacementConflict, listRenewalMarks, orderReplacing, putRenewalMark, releaseReplacement, renewalFacts, type RenewalFacts } from "../storage/acme-ari-store";
import { getOrderBySerial } from "../storage/acme-store";
import { getCert, getRole, loadIssuanceState, type IssuerRow } from "../storage/store";
import { colonHex } from "../x509/pem";
import { subjectKeyIdOf } from "../x509/resign";
import { parseCertificate } from "../x509/x509";
import { decodeAcmeConfig } from "./config";
import { linkIndexOf } from "./context";
import type { SignedRequest } from "./context";
import { AcmeError, acmeError, problemResponse, toAcmeError } from "./problem";

/** RFC 9773 §4.3: when to ask again. Let's Encrypt's 6 hours. */
export const ARI_RETRY_AFTER_S = 6 * 3600;
const DAY_MS = 24 * 3600 * 1000;

const rfc3339 = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

export interface CertId {
  keyId: Uint8Array<ArrayBuffer>;
  /** Colon hex, leading zero octets dropped (the form the API and storage take serials in). */
  serial: string;
}

/** RFC 9773 §4.1: base64url(AKI keyIdentifier) "." base64url(serial INTEGER content octets). */
export function parseCertId(text: string): CertId | null {
  const parts = text.split(".");
  // A base64url part of length 1 mod 4 encodes no whole octet (RFC 4648 §5): refused, not decoded.
  if (parts.length !== 2 || parts.some((p) => !/^[A-Za-z0-9_-]+$/.test(p) || p.length % 4 === 1)) return null;
  const keyId = base64UrlToBytes(parts[0] ?? "");
  const serialBytes = base64UrlToBytes(parts[1] ?? "");
  let start = 0;
  while (start < serialBytes.length - 1 && serialBytes[start] === 0) start++;
  const hex = bytesToHex(serialBytes.subarray(start));
  if (keyId.length === 0 || hex === "" || hex === "00") return null;
  return { keyId, serial: colonHex(hex) };
}

/** The certID of a certificate whose issuer has `keyId`, from its colon-hex serial. */
export function certIdOf(keyId: Uint8Array, serial: string): string {
  let hex = serial.replace(/:/g, "");
  if (hex.length % 2 === 1) hex = `0${hex}`;
  // DER: a positive INTEGER whose first octet has the high bit set carries a leading 0x00.
  if (/^[89a-f]/.test(hex)) hex = `00${hex}`;
  const bytes = new Uint8Array(hex.length / 2).map((_, i) => parseInt(hex.slice(2 * i, 2 * i + 2), 16));
  return `${bytesToBase64Url(keyId)}.${bytesToBase64Url(bytes)}`;
}

export interface RenewalWindow {
  start: number;
  end: number;
  explanationUrl: string;
}

/** The default window: around two thirds of the validity (half for short certificates), ± 1 %. */
export function defaultWindow(notBefore: number, notAfter: number): RenewalWindow {
  const validity = notAfter + 1000 - notBefore;
  const offset = validity < 10 * DAY_MS ? validity / 2 : validity / 3;
  const ideal = notAfter - offset;
  return { start: Math.floor((ideal - validity / 100) / 1000) * 1000, end: Math.floor((ideal + validity / 100) / 1000) * 1000, explanationUrl: "" };
}

/** "Renew now": a window wholly in the past (RFC 9773 §4.2: a client renews at once). */
export function immediateWindow(now: number, explanationUrl: string): RenewalWindow {
  const start = Math.floor((now - 3600_000) / 1000) * 1000;
  return { start, end: start + 1800_000, explanationUrl };
}

/** Whether `keyId` is the issuer's Subject Key Identifier (what its certificates carry as AKI). */
function keyIdMatches(issuer: IssuerRow | undefined, keyId: Uint8Array): boolean {
  const ski = issuer ? subjectKeyIdOf(certDerFromPem(issuer.certificate)) : null;
  return ski !== null && bytesToHex(ski) === bytesToHex(keyId);
}

type Answer = { ok: true; window: RenewalWindow; base: string } | { ok: false; error: AcmeError; base: string | null };

function validityOf(derB64: string): { from: number; to: number } {
  const info = parseCertificate(base64ToBytes(derB64));
  return { from: info.notBefore.getTime(), to: info.notAfter.getTime() };
}

/** The window of one certificate from what the store holds. */
function windowOf(facts: RenewalFacts, keyId: Uint8Array, issuers: readonly IssuerRow[], now: number): RenewalWindow | AcmeError {
  const cert = facts.cert;
  if (!cert) return acmeError("malformed", "no certificate of this mount has that serial", 404);
  const issuer = issuers.find((i) => i.id === cert.issuerId);
  if (!keyIdMatches(issuer, keyId)) return acmeError("malformed", "the certID's key identifier is not the certificate's issuer's", 404);
  // The validity from the row's columns: a row written since bodies moved to R2 has no DER in D1
  // (storage/cert-bodies.ts) but always its not_before; older rows may lack not_before, never DER.
  const validity = cert.notBefore !== null ? { from: cert.notBefore * 1000, to: cert.notAfter * 1000 } : validityOf(cert.der);
  if (facts.revoked || issuer?.revoked) return immediateWindow(now, "");
  const mark = facts.marks.find((m) => m.markedAt > cert.createdAt && ((m.kind === "issuer" && m.ref === cert.issuerId) || (m.kind === "role" && facts.orderRole !== null && m.ref === facts.orderRole)));
  if (mark) return immediateWindow(now, mark.explanationUrl);
  return defaultWindow(validity.from, validity.to);
}

const answers = new ReadCache<Answer>("pki.acmeRenewalInfo", "pki", 2048);

async function loadAnswer(req: Req, certId: CertId, prefix: string): Promise<Answer> {
  const mountId = mountOf(req).id;
  const [state, facts] = await Promise.all([loadIssuanceState(req.db, mountId, null), renewalFacts(req.db, mountId, certId.serial)]);
  const path = state.config.cluster.path.replace(/\/+$/, "");
  const base = path === "" ? null : `${path}/${prefix}`;
  if (!decodeAcmeConfig(facts.acmeConfig).enabled || base === null) {
    return { ok: false, error: acmeError("malformed", "ACME is not enabled on this mount (config/acme enabled)", 404), base: null };
  }
  const w = windowOf(facts, certId.keyId, state.issuers, Date.now());
  return w instanceof AcmeError ? { ok: false, error: w, base } : { ok: true, window: w, base };
}

/** GET <directory>/renewal-info/<certID> (RFC 9773 §4.1). */
export async function renewalInfo(req: Req): Promise<Response> {
  const prefix = req.path.slice(mountOf(req).path.length).replace(/\/renewal-info\/[^/]*$/, "");
  try {
    const certId = parseCertId(req.params.certid ?? "");
    if (!certId) throw acmeError("malformed", "the certID must be base64url(AKI keyIdentifier) \".\" base64url(serial) (RFC 9773 §4.1)");
    const key = `${mountOf(req).id}/${prefix}/${req.params.certid ?? ""}`;
    let a = answers.get(key);
    if (!a) {
      const readAt = Date.now();
      const generation = generationOf("pki");
      a = await loadAnswer(req, certId, prefix);
      answers.set(key, a, readAt, generation);
    }
    if (!a.ok) return problemResponse(a.error, linkIndexOf(a.base));
    const body: Record<string, unknown> = { suggestedWindow: { start: rfc3339(a.window.start), end: rfc3339(a.window.end) } };
    if (a.window.explanationUrl) body.explanationURL = a.window.explanationUrl;
    return new Response(JSON.stringify(body), {
      headers: { "content-type": "application/json", "retry-after": String(ARI_RETRY_AFTER_S), ...linkIndexOf(a.base) },
    });
  } catch (e) {
    return problemResponse(toAcmeError(e, "malformed", req.requestId), {});
  }
}

/**
 * new-order `replaces` (RFC 9773 §5): the certificate must have been ordered by this account, and
 * no other order that has not failed may replace it. Returns the canonical certID the order
 * records; the insert's unique index settles a race (see `replacementConflict`).
 */
export async function checkReplaces(s: SignedRequest, value: unknown, orderIsInvalid: (orderId: string) => Promise<boolean>): Promise<string> {
  if (typeof value !== "string") throw acmeError("malformed", "'replaces' must be a certID string (RFC 9773 §4.1)");
  const id = parseCertId(value);
  if (!id) throw acmeError("malformed", "'replaces' is not a certID: base64url(AKI keyIdentifier) \".\" base64url(serial)");
  const { db, mount } = s.ctx;
  const [order, cert] = await Promise.all([getOrderBySerial(db, mount.id, id.serial), getCert(db, mount.id, id.serial)]);
  if (!order || !cert || order.accountId !== s.account?.id) throw acmeError("unauthorized", "'replaces' names a certificate this account did not order", 403);
  // The key identifier must be the issuer's, so one certificate has one certID (and one replacement).
  if (!keyIdMatches(s.state.issuers.find((i) => i.id === cert.issuerId), id.keyId)) {
    throw acmeError("malformed", "'replaces': the certID's key identifier is not the certificate's issuer's");
  }
  const canonical = certIdOf(id.keyId, id.serial);
  const current = await orderReplacing(db, mount.id, canonical);
  if (current) {
    if (!(await orderIsInvalid(current.id))) throw acmeError("alreadyReplaced", `certificate ${id.serial} is already replaced by order ${s.url(`order/${current.id}`)}`);
    await releaseReplacement(db, mount.id, current.id, canonical);
  }
  return canonical;
}

/** The unique index refusing a concurrent second replacement, as the problem RFC 9773 §7.4 names. */
export function replacementConflict(e: unknown, certId: string): unknown {
  return isReplacementConflict(e) ? acmeError("alreadyReplaced", `certificate ${certId} is already replaced by another order`) : e;
}

// -- the operator's marks ------------------------------------------------------------------------

const markFields = defineFields({
  issuer_ref: { type: "string", description: "Mark every certificate of this issuer (id or name) for renewal now." },
  role: { type: "string", description: "Mark every certificate ordered over ACME with this role for renewal now." },
  explanation_url: { type: "string", maxBytes: MAX_URL_BYTES, description: "Shown to ACME clients as the window's explanationURL." },
});

async function markRenewal(req: Req): Promise<JsonReply> {
  const mount = mountOf(req);
  const f = req.fields as { issuer_ref?: string; role?: string; explanation_url?: string };
  const issuerRef = (f.issuer_ref ?? "").trim();
  const roleName = (f.role ?? "").trim();
  if ((issuerRef === "") === (roleName === "")) throw badRequest("issuer_ref: give exactly one of issuer_ref and role");
  const url = (f.explanation_url ?? "").trim();
  if (url !== "" && !/^https?:\/\/[^\s]+$/.test(url)) throw badRequest("explanation_url: must be an http or https URL");
  let kind: "issuer" | "role";
  let ref: string;
  if (issuerRef !== "") {
    const state = await loadIssuanceState(req.db, mount.id, null);
    try {
      ref = resolveIssuerIn(state.issuers, state.config.issuers, issuerRef).id;
    } catch {
      throw badRequest(`issuer_ref: no issuer ${JSON.stringify(issuerRef)} on this mount`);
    }
    kind = "issuer";
  } else {
    if (!(await getRole(req.db, mount.id, roleName))) throw badRequest(`role: no role ${JSON.stringify(roleName)} on this mount`);
    kind = "role";
    ref = roleName;
  }
  const markedAt = Date.now();
  await putRenewalMark(req.db, { mountId: mount.id, kind, ref, explanationUrl: url, markedAt });
  return { data: { kind, ref, explanation_url: url, marked_at: rfc3339(markedAt) } };
}

async function readMarks(req: Req): Promise<JsonReply> {
  const rows = await listRenewalMarks(req.db, mountOf(req).id);
  return { data: { marks: rows.map((r) => ({ kind: r.kind, ref: r.ref, explanation_url: r.explanationUrl, marked_at: rfc3339(r.markedAt) })) } };
}

/** POST marks (sudo: it makes every client of an issuer or role renew at once), GET lists them. */
export const renewalMarkRoutes: RouteDef[] = [route({ pattern: "acme/renewal-marks", fields: markFields, sudo: ["update"], handlers: { read: readMarks, update: markRenewal } })];
