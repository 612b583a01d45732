/**
 * ACME orders (RFC 8555 §7.1.3, §7.4): new-order, the account's order list, order/:id,
 * finalize and order/:id/cert.
 *
 * - new-order checks every identifier against the directory's role (the PKI name policy,
 *   policy/names.ts; IP identifiers against allow_ip_sans and its CIDRs) and refuses with
 *   `rejectedIdentifier` before anything is stored; sign-verbatim directories take any
 *   well-formed name. One authorization per identifier: http-01 and dns-01 for a DNS name,
 *   dns-01 only for a wildcard, http-01 for an IP (Vault offers tls-alpn-01 too; Lanyard's
 *   validator does not). Orders expire after 24 h (Vault's). A `profile` picks the role
 *   (profiles.ts); `replaces` names the certificate the order renews (ari.ts, RFC 9773 §5).
 * - finalize: the CSR must name exactly the order's identifiers (`badCSR`), then the certificate
 *   is issued through the PKI's issue path (issuance/issue.ts issueLeaf, the one pipeline), so it
 *   is stored, listed, revocable and in CRLs and OCSP like any other. As in Vault's ACME: the
 *   CSR's names are used (use_csr_common_name / use_csr_sans), the role's key rules apply, only
 *   serverAuth is kept unless allow_role_ext_key_usage, the validity is capped by config/acme
 *   max_ttl, an issuer whose leaf_not_after_behavior is `err` truncates instead, certificates
 *   are always stored (the order serves them) and get no lease.
 */
import { ApiError } from "../../../core/errors";
import { base64UrlToBytes, randomHex, toPem } from "../../../core/encoding";
import { effectiveTtls } from "../../../core/mount-store";
import { issueLeaf } from "../issuance/issue";
import { loadCsr, refuseWeakRsaCsr } from "../issuance/csr";
import { cidrContains, formatIp, parseCidr, parseIp } from "../../../core/ip";
import { HOSTNAME_RE, nameAllowed } from "../policy/names";
import { permissiveRole, type NameRequest } from "../policy/policy";
import { defaultRole, type Role } from "../policy/roles";
import { OID, nameAttributes } from "../x509/asn1";
import {
  claimOrderForFinalize,
  getOrderWithAuthzs,
  insertOrder,
  listOrderIds,
  updateOrder,
  type AcmeAuthzRow,
  type AcmeChallengeRow,
  type AcmeOrderRow,
} from "../storage/acme-store";
import type { AcmeReply, AcmeRequest, SignedRequest } from "./context";
import { checkReplaces, replacementConflict } from "./ari";
import { acmeError, problemBody } from "./problem";
import { orderRole, roleOfOrder } from "./profiles";

const ORDER_LIFETIME_MS = 24 * 3600 * 1000;
const MAX_IDENTIFIERS = 100;

export interface Identifier {
  type: "dns" | "ip";
  value: string;
}

const rfc3339 = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

/** The order's status as RFC 8555 §7.1.6 defines it: "ready" and expiry are derived. */
export function orderStatus(order: AcmeOrderRow, authzs: AcmeAuthzRow[], now: number): string {
  if (order.status !== "pending") return order.status;
  if (order.expiresAt <= now) return "invalid";
  if (authzs.some((z) => z.status !== "pending" && z.status !== "valid")) return "invalid";
  if (authzs.length > 0 && authzs.every((z) => z.status === "valid")) return "ready";
  return "pending";
}

export function orderJson(a: AcmeRequest, order: AcmeOrderRow, authzs: AcmeAuthzRow[]): Record<string, unknown> {
  const status = orderStatus(order, authzs, a.now);
  return {
    status,
    expires: rfc3339(order.expiresAt),
    identifiers: order.identifiers,
    ...(order.notAfter ? { notAfter: order.notAfter } : {}),
    authorizations: authzs.map((z) => a.url(`authorization/${z.id}`)),
    finalize: a.url(`order/${order.id}/finalize`),
    ...(status === "valid" ? { certificate: a.url(`order/${order.id}/cert`) } : {}),
    ...(order.error ? { error: order.error } : {}),
    ...(order.profile ? { profile: order.profile } : {}),
    ...(order.replaces ? { replaces: order.replaces } : {}),
  };
}

/** One identifier, checked and normalised (lower-case DNS names, canonical IP text). */
function parseIdentifier(v: unknown): Identifier {
  if (typeof v !== "object" || v === null) throw acmeError("malformed", "each identifier must be an object with 'type' and 'value'");
  const { type, value } = v as Record<string, unknown>;
  if (typeof value !== "string" || value === "") throw acmeError("malformed", "identifier 'value' must be a non-empty string");
  if (type === "dns") {
    const name = value.toLowerCase();
    if (name.length > 253 || name.endsWith(".") || !HOSTNAME_RE.test(name)) throw acmeError("rejectedIdentifier", `${JSON.stringify(value.slice(0, 64))} is not a valid DNS name`);
    return { type, value: name };
  }
  if (type === "ip") {
    const ip = parseIp(value);
    if (!ip) throw acmeError("malformed", `${JSON.stringify(value.slice(0, 64))} is not an IP address`);
    return { type, value: formatIp(ip) };
  }
  throw acmeError("unsupportedIdentifier", `identifier type ${JSON.stringify(String(type).slice(0, 32))} is not supported; use dns or ip`);
}

/** Whether the directory's role lets this identifier into a certificate (null role: sign-verbatim). */
function identifierAllowed(role: Role | null, id: Identifier): boolean {
  if (!role) return true;
  if (id.type === "dns") return nameAllowed(role, id.value);
  if (!role.allow_ip_sans) return false;
  if (role.allowed_ip_sans_cidr.length === 0) return true;
  const ip = parseIp(id.value);
  return ip !== null && role.allowed_ip_sans_cidr.some((text) => {
    const c = parseCidr(text);
    return c !== null && cidrContains(c, ip);
  });
}

function challengeTypes(id: Identifier): string[] {
  if (id.type === "ip") return ["http-01"];
  return id.value.startsWith("*.") ? ["dns-01"] : ["http-01", "dns-01"];
}

/** The order of the request's path, owned by the signing account. */
async function ownOrder(s: SignedRequest): Promise<{ order: AcmeOrderRow; authzs: AcmeAuthzRow[] }> {
  const found = await getOrderWithAuthzs(s.ctx.db, s.ctx.mount.id, s.req.params.id ?? "");
  if (!found || found.order.accountId !== s.account?.id) throw acmeError("malformed", "no such order for this account", 404);
  return found;
}

/** always-required: an account created without EAB may no longer order (Vault's eab_policy). */
function checkEabPolicy(s: SignedRequest): void {
  if (s.cfg.eab_policy === "always-required" && s.account?.eabId === "") {
    throw acmeError("externalAccountRequired", "this mount requires accounts created with an external account binding (config/acme eab_policy always-required)");
  }
}

export async function newOrder(s: SignedRequest): Promise<AcmeReply> {
  checkEabPolicy(s);
  const p = s.payload;
  if (!p) throw acmeError("malformed", "new-order needs a payload");
  if (!Array.isArray(p.identifiers) || p.identifiers.length === 0) throw acmeError("malformed", "'identifiers' must be a non-empty array");
  if (p.identifiers.length > MAX_IDENTIFIERS) throw acmeError("rejectedIdentifier", `at most ${MAX_IDENTIFIERS} identifiers per order`);
  const seen = new Set<string>();
  const ids: Identifier[] = [];
  for (const raw of p.identifiers) {
    const id = parseIdentifier(raw);
    const k = `${id.type}:${id.value}`;
    if (!seen.has(k)) ids.push(id);
    seen.add(k);
  }
  const chosen = await orderRole(s, p.profile);
  const refused = ids.filter((id) => !identifierAllowed(chosen.role, id));
  if (refused.length > 0) {
    throw acmeError("rejectedIdentifier", `${refused.map((r) => r.value).join(", ")}: not allowed by role ${chosen.roleName} of this ACME ${chosen.profile ? "profile" : "directory"}`);
  }
  if (p.notBefore !== undefined) throw acmeError("malformed", "'notBefore' is not supported");
  let notAfter = "";
  if (p.notAfter !== undefined) {
    const t = typeof p.notAfter === "string" ? Date.parse(p.notAfter) : Number.NaN;
    if (Number.isNaN(t) || t <= s.now) throw acmeError("malformed", "'notAfter' must be an RFC 3339 time in the future");
    notAfter = rfc3339(t);
  }

  const { mount } = s.ctx;
  const account = s.account;
  if (!account) throw acmeError("accountDoesNotExist", "no account");
  const replaces = p.replaces === undefined ? "" : await checkReplaces(s, p.replaces, (id) => orderFailed(s, id));
  const expiresAt = s.now + ORDER_LIFETIME_MS;
  const order: AcmeOrderRow = {
    mountId: mount.id,
    id: randomHex(16),
    accountId: account.id,
    directory: s.dir.prefix,
    status: "pending",
    identifiers: ids,
    notAfter,
    role: chosen.roleName,
    issuer: s.dir.issuer.id,
    expiresAt,
    certSerial: "",
    certChain: "",
    certExpiresAt: 0,
    error: null,
    createdAt: s.now,
    profile: chosen.profile,
    replaces,
  };
  const authzs: AcmeAuthzRow[] = [];
  const challenges: AcmeChallengeRow[] = [];
  for (const id of ids) {
    const wildcard = id.type === "dns" && id.value.startsWith("*.");
    const authz: AcmeAuthzRow = {
      mountId: mount.id,
      id: randomHex(16),
      orderId: order.id,
      accountId: account.id,
      identifierType: id.type,
      identifierValue: wildcard ? id.value.slice(2) : id.value,
      wildcard,
      status: "pending",
      expiresAt,
      createdAt: s.now,
    };
    authzs.push(authz);
    for (const type of challengeTypes(id)) {
      challenges.push({ mountId: mount.id, authzId: authz.id, type, token: randomHex(16), status: "pending", validatedAt: 0, error: null, attempts: 0 });
    }
  }
  await insertOrder(s.ctx.db, order, authzs, challenges).catch((e: unknown) => {
    throw replacementConflict(e, replaces);
  });
  return { status: 201, json: orderJson(s, order, authzs), headers: { location: s.url(`order/${order.id}`) } };
}

export async function listOrders(s: SignedRequest): Promise<AcmeReply> {
  const account = s.account;
  if (!account || (s.req.params.kid !== undefined && s.req.params.kid !== account.id)) throw acmeError("unauthorized", "the request's 'kid' does not name this account");
  const ids = await listOrderIds(s.ctx.db, s.ctx.mount.id, account.id);
  return { json: { orders: ids.map((id) => s.url(`order/${id}`)) } };
}

export async function getOrder(s: SignedRequest): Promise<AcmeReply> {
  const { order, authzs } = await ownOrder(s);
  const status = orderStatus(order, authzs, s.now);
  return { json: orderJson(s, order, authzs), headers: status === "processing" ? { "retry-after": "2" } : {} };
}

/** The names a CSR asks for: its CN and DNS / IP SANs; anything else is refused. */
async function csrIdentifiers(csrField: unknown): Promise<{ pem: string; names: Set<string>; hasCn: boolean }> {
  if (typeof csrField !== "string" || csrField === "") throw acmeError("malformed", "'csr' must be the base64url DER of a PKCS#10 request");
  let der: Uint8Array<ArrayBuffer>;
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(csrField)) throw new Error("not base64url");
    der = base64UrlToBytes(csrField);
  } catch {
    throw acmeError("badCSR", "'csr' is not base64url");
  }
  const pem = toPem("CERTIFICATE REQUEST", der);
  let csr;
  try {
    csr = await loadCsr(pem);
    refuseWeakRsaCsr(csr);
  } catch (e) {
    throw acmeError("badCSR", e instanceof ApiError ? e.messages.join("; ") : "the CSR cannot be parsed");
  }
  if (csr.isCa) throw acmeError("badCSR", "the CSR asks for a CA certificate");
  const names = new Set<string>();
  const sans = csr.sans;
  if (sans && (sans.email.length > 0 || sans.uri.length > 0 || sans.otherNames.length > 0)) throw acmeError("badCSR", "the CSR may only name DNS names and IP addresses");
  for (const d of sans?.dns ?? []) names.add(`dns:${d.toLowerCase()}`);
  for (const ip of sans?.ip ?? []) names.add(`ip:${formatIp(ip)}`);
  const cn = nameAttributes(csr.subject).find((x) => x.type === OID.commonName)?.value ?? "";
  if (cn !== "") {
    const ip = parseIp(cn);
    names.add(ip ? `ip:${formatIp(ip)}` : `dns:${cn.toLowerCase()}`);
  }
  return { pem, names, hasCn: cn !== "" };
}

/** Whether an order has failed (RFC 9773 §5: it no longer holds the certificate it meant to replace). */
async function orderFailed(s: SignedRequest, id: string): Promise<boolean> {
  const found = await getOrderWithAuthzs(s.ctx.db, s.ctx.mount.id, id);
  return !found || orderStatus(found.order, found.authzs, s.now) === "invalid";
}

/** The role an ACME certificate is issued under (Vault's ACME overrides, see the top comment). */
function issuingRole(a: AcmeRequest, orderRole: Role | null): Role {
  const base: Role = orderRole ? structuredClone(orderRole) : { ...permissiveRole(defaultRole()), key_type: "any", key_bits: 0 };
  const role: Role = { ...base, use_csr_common_name: true, use_csr_sans: true, require_cn: false, no_store: false, generate_lease: false };
  if (!a.cfg.allow_role_ext_key_usage) {
    Object.assign(role, { server_flag: true, client_flag: false, code_signing_flag: false, email_protection_flag: false, ext_key_usage: [], ext_key_usage_oids: [] });
  }
  return role;
}

/** ttl: the role's (or the mount's) default, capped by the role's / mount's max and config/acme max_ttl. */
function issuingTtl(a: AcmeRequest, role: Role): number {
  const mount = effectiveTtls(a.ctx.mount);
  let ttl = role.ttl || mount.defaultTtl;
  const max = role.max_ttl || mount.maxTtl;
  if (max > 0) ttl = Math.min(ttl, max);
  if (a.cfg.max_ttl > 0) ttl = Math.min(ttl, a.cfg.max_ttl);
  return ttl;
}

export async function finalize(s: SignedRequest): Promise<AcmeReply> {
  checkEabPolicy(s);
  const { order, authzs } = await ownOrder(s);
  const status = orderStatus(order, authzs, s.now);
  if (status !== "ready") throw acmeError("orderNotReady", `the order is ${status}, not ready`);
  const csr = await csrIdentifiers(s.payload?.csr);
  const wanted = new Set(order.identifiers.map((i) => `${i.type}:${i.value}`));
  const missing = [...wanted].filter((n) => !csr.names.has(n));
  const extra = [...csr.names].filter((n) => !wanted.has(n));
  if (missing.length > 0 || extra.length > 0) {
    throw acmeError("badCSR", `the CSR must name exactly the order's identifiers${missing.length ? `; missing ${missing.join(", ")}` : ""}${extra.length ? `; not in the order ${extra.join(", ")}` : ""}`);
  }
  if (!(await claimOrderForFinalize(s.ctx.db, s.ctx.mount.id, order.id))) throw acmeError("orderNotReady", "the order is already being finalized");

  const role = issuingRole(s, await roleOfOrder(s, order));
  // Vault's ACME: an issuer set to refuse leaves beyond its own notAfter truncates instead.
  const state = { ...s.state, issuers: s.state.issuers.map((i) => (i.leafNotAfterBehavior === "err" ? { ...i, leafNotAfterBehavior: "truncate" } : i)) };
  const names: NameRequest = { common_name: "", alt_names: [], ip_sans: [], uri_sans: [], other_sans: [], serial_number: "", user_ids: [], exclude_cn_from_sans: false };
  let issued;
  try {
    issued = await issueLeaf(s.ctx, state, {
      role,
      issuerRef: order.issuer,
      names,
      ttl: order.notAfter ? 0 : issuingTtl(s, role),
      notAfter: order.notAfter,
      format: "pem",
      privateKeyFormat: "der",
      removeRootsFromChain: false,
      csr: csr.pem,
      roleName: order.role,
      certMetadata: null,
    });
  } catch (e) {
    // A refusal of the CSR leaves the order ready for another one (RFC 8555 §7.4); anything
    // else fails the order.
    const refused = e instanceof ApiError && e.status < 500;
    await updateOrder(s.ctx.db, s.ctx.mount.id, order.id, refused ? { status: "pending" } : { status: "invalid", error: problemBody("serverInternal", "issuance failed") });
    throw e;
  }
  const { data } = issued;
  const certChain = `${[data.certificate, ...(data.ca_chain ?? [])].map((p) => p.trim()).join("\n")}\n`;
  const done: AcmeOrderRow = { ...order, status: "valid", certSerial: data.serial_number, certChain, certExpiresAt: Number(data.expiration) * 1000 };
  await updateOrder(s.ctx.db, s.ctx.mount.id, order.id, { status: "valid", certSerial: done.certSerial, certChain, certExpiresAt: done.certExpiresAt });
  return { json: orderJson(s, done, authzs), headers: { location: s.url(`order/${order.id}`) } };
}

export async function orderCert(s: SignedRequest): Promise<AcmeReply> {
  const { order } = await ownOrder(s);
  if (order.status !== "valid" || order.certChain === "") throw acmeError("orderNotReady", "the order has no certificate yet");
  return { text: { body: order.certChain, contentType: "application/pem-certificate-chain" } };
}
