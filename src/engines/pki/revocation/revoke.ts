/**
 * Revocation (Vault API /pki/revoke, /pki/revoke-with-key, /pki/issuer/:issuer_ref/revoke):
 * find the certificate by serial or from a PEM signed by an issuer of the mount, prove
 * possession of its key on revoke-with-key, record the revocation, and rebuild the CRLs unless
 * config/crl auto_rebuild leaves that to the schedule.
 *
 * Ordering (the "never missed" rule of src/engines/pki/authority/crl-coordinator.ts): the pki_revoked row is
 * written first; only then is the Authority asked for a rebuild, which therefore reads it.
 */
import { badRequest } from "../../../core/errors";
import type { JsonReply } from "../../../core/route";
import { base64ToBytes, bytesToBase64 } from "../../../core/encoding";
import { privateKeyFacts, publicKeyFacts, toPkcs8 } from "../x509/asn1";
import { DerError } from "../x509/der";
import { rebuildCrls, rebuildWarnings } from "./crl-rebuild";
import type { IssueContext } from "../issuance/pipeline";
import { certDerFromPem, issuerView, resolveIssuerIn } from "../ca/issuers";
import { checkKeySize } from "../x509/keytypes";
import { decodePemBlocks, normalizeSerial } from "../x509/pem";
import { getRevoked, insertRevoked, type RevokedRow } from "../storage/revocation-store";
import { inventoryColumns } from "../inventory/columns";
import { getAllConfig, getCertWithBody, insertCertStmts, listIssuers, runBatch, updateIssuerStmt, type ConfigShapes, type IssuerRow } from "../storage/store";
import { resolveAia } from "../issuance/profile";
import { crlDistributionPointUrls } from "../x509/x509";
import { shardNamedBy } from "./crl-shards";
import { X509Error, isSignedBy, keyMatchesPublicKey, parseCertificate, type CertInfo } from "../x509/x509";

export interface RevokeInput {
  serialNumber: string | undefined;
  certificate: string | undefined;
  /** Set on revoke-with-key only (undefined when the client sent none). */
  privateKey: string | undefined;
  withKey: boolean;
  /** RFC 5280 §5.3.1 reason code (ACME revoke-cert's `reason`); absent: 0, unspecified. */
  reason?: number;
}

/** The revocation answer (Vault API /pki/revoke): integer seconds, RFC 3339 and the state. */
export function revocationData(row: Pick<RevokedRow, "revocationTime">): Record<string, unknown> {
  return {
    revocation_time: row.revocationTime,
    revocation_time_rfc3339: new Date(row.revocationTime * 1000).toISOString().replace(".000Z", "Z"),
    state: "revoked",
  };
}

/** The mount issuer whose subject names the certificate's issuer and whose key signed it; "" when none. */
export async function signingIssuerOf(cert: CertInfo, issuers: IssuerRow[]): Promise<string> {
  const issuerName = bytesToBase64(cert.issuer);
  for (const i of issuers) {
    if (i.subjectDer !== issuerName) continue;
    if (await isSignedBy(cert.der, base64ToBytes(i.publicKey))) return i.id;
  }
  return "";
}

interface Located {
  cert: CertInfo;
  serial: string;
  issuerId: string;
  /** Not yet in pki_certs: a certificate given as PEM that the mount signed without storing. */
  store: boolean;
  /** The CRL shard it names (pki_certs.crl_shard); null: the full CRL only. */
  crlShard: number | null;
}

function parseOrRefuse(der: Uint8Array<ArrayBuffer>): CertInfo {
  try {
    return parseCertificate(der);
  } catch (e) {
    throw badRequest(`certificate could not be parsed: ${e instanceof X509Error ? e.message : String(e)}`);
  }
}

/** The certificate of a PEM `certificate` field: stored here, or signed by one of the issuers. */
async function locateByPem(ctx: IssueContext, pem: string, issuers: IssuerRow[]): Promise<Located> {
  if (pem.length < 75) {
    throw badRequest("provided certificate data was too short; perhaps a path was passed to the API rather than the contents of a PEM file");
  }
  let blocks;
  try {
    blocks = decodePemBlocks(pem);
  } catch {
    throw badRequest("certificate contains no PEM data");
  }
  const block = blocks[0];
  if (!block) throw badRequest("certificate contains no PEM data");
  const cert = parseOrRefuse(block.der);
  const serial = normalizeSerial(cert.serialHex) ?? "";
  if (serial === "") throw badRequest("invalid serial number on presented certificate");
  const stored = await getCertWithBody(ctx.db, ctx.env.CERTS, ctx.mount.id, serial);
  if (stored) {
    if (stored.der !== bytesToBase64(cert.der)) {
      throw badRequest("certificate with same serial but unequal value already present in this cluster's storage; refusing to revoke");
    }
    return { cert, serial, issuerId: stored.issuerId, store: false, crlShard: stored.crlShard };
  }
  const issuerId = await signingIssuerOf(cert, issuers);
  if (issuerId === "") {
    throw badRequest(
      "unable to verify signature on presented cert from any present issuer in this mount; certificates from previous CAs will need to have their issuing CA and key re-imported if revocation is necessary",
    );
  }
  return { cert, serial, issuerId, store: true, crlShard: null };
}

/** The shard an unstored certificate's CDP names, given the URLs its issuer would have written. */
function shardOfUnstored(cert: CertInfo, issuer: IssuerRow | undefined, cfg: ConfigShapes): number | null {
  if (!issuer || cfg.crl.published_shards <= 1) return null;
  let configured: string[];
  try {
    configured = resolveAia(issuer.id, issuer.aia, cfg.urls, cfg.cluster).crlDistributionPoints;
  } catch {
    return null;
  }
  return shardNamedBy(crlDistributionPointUrls(cert.der), configured, cfg.crl.published_shards);
}

/** Parses a PEM private key (PKCS#8, PKCS#1, SEC1, Ed25519) and checks it against the certificate. */
async function checkPossession(keyPem: string, cert: CertInfo): Promise<void> {
  let blocks;
  try {
    blocks = decodePemBlocks(keyPem);
  } catch {
    throw badRequest("provided key PEM block contained no data or failed to parse");
  }
  const block = blocks[0];
  if (!block) throw badRequest("provided key PEM block contained no data or failed to parse");
  let pkcs8: Uint8Array<ArrayBuffer>;
  let keyFacts: { type: string; bits: number };
  try {
    pkcs8 = toPkcs8(block.label, block.der);
    keyFacts = privateKeyFacts(pkcs8);
  } catch (e) {
    throw badRequest(`failed to parse provided private key: ${e instanceof DerError || e instanceof Error ? e.message : String(e)}`);
  }
  // Before the possession check, which WebCrypto could not run and would call a mismatch.
  checkKeySize("private_key", keyFacts);
  const keyType = keyFacts.type;
  let certType: string;
  try {
    certType = (await publicKeyFacts(cert.spki)).type;
  } catch {
    throw badRequest("certificate has an unknown public key algorithm; unable to validate provided private key; ask an admin to revoke this certificate instead");
  }
  if (keyType !== certType) throw badRequest("provided private key type does not match certificate's public key type");
  let matches = false;
  try {
    matches = await keyMatchesPublicKey(pkcs8, cert.spki);
  } catch {
    // A key WebCrypto cannot import (bad curve point, truncated RSA key) is not this cert's key.
    matches = false;
  }
  if (!matches) throw badRequest("provided private key does not match certificate's public key");
}

/** POST revoke and revoke-with-key. */
export async function revokeCertificate(ctx: IssueContext, input: RevokeInput): Promise<JsonReply> {
  const haveSerial = input.serialNumber !== undefined;
  const haveCert = input.certificate !== undefined;
  if (!haveSerial && !haveCert) throw badRequest("The serial number or certificate to revoke must be provided.");
  if (haveSerial && haveCert) throw badRequest("Must provide either the certificate or the serial to revoke; not both.");
  if (input.withKey) {
    if (input.privateKey === undefined) throw badRequest("Must have private key to revoke via the /revoke-with-key path.");
    if (input.privateKey.length < 64) {
      throw badRequest("Provided data for private_key was too short; perhaps a path was passed to the API rather than the contents of a PEM file?");
    }
  }
  const { db, mount } = ctx;
  const [issuers, cfg] = await Promise.all([listIssuers(db, mount.id), getAllConfig(db, mount.id)]);

  let located: Located;
  if (input.certificate !== undefined) {
    located = await locateByPem(ctx, input.certificate, issuers);
  } else {
    const given = (input.serialNumber ?? "").trim();
    if (given === "") throw badRequest("The serial number must be provided");
    const serial = normalizeSerial(given);
    if (!serial) throw badRequest(`serial_number: "${given}" is not a hexadecimal serial number (colon- or hyphen-separated)`);
    const row = await getCertWithBody(db, ctx.env.CERTS, mount.id, serial);
    if (!row) throw badRequest(`certificate with serial ${given} not found.`);
    located = { cert: parseOrRefuse(base64ToBytes(row.der)), serial, issuerId: row.issuerId, store: false, crlShard: row.crlShard };
  }
  if (input.withKey) await checkPossession(input.privateKey ?? "", located.cert);

  const { serial, cert } = located;
  // Issuers are revoked through issuer/:ref/revoke only (upstream's words below).
  const asIssuer = issuers.find((i) => i.serial === serial);
  if (asIssuer) throw badRequest(`adding issuer (id: ${asIssuer.id}) to its own CRL is not allowed`);

  const existing = await getRevoked(db, mount.id, serial);
  if (existing) return { data: revocationData(existing) };

  const nowMs = Date.now();
  // Upstream allows two seconds of slack (leases are stored with second granularity).
  if (cert.notAfter.getTime() < nowMs + 2000 && !cfg.crl.allow_expired_cert_revocation) {
    return { data: null, warnings: [`certificate with serial ${serial} already expired; refusing to add to CRL`] };
  }
  const notAfter = Math.floor(cert.notAfter.getTime() / 1000);
  let crlShard = located.crlShard;
  if (located.store) {
    crlShard = shardOfUnstored(cert, issuers.find((i) => i.id === located.issuerId), cfg);
    // Upstream keeps a PEM-revoked certificate it had not stored, so reads and CRLs find it.
    const row = { mountId: mount.id, serial, der: bytesToBase64(cert.der), issuerId: located.issuerId, notAfter, createdAt: nowMs, crlShard };
    await runBatch(db, insertCertStmts(db, { ...row, ...inventoryColumns(cert.der) }));
  }
  // The stored association may name an issuer deleted since; re-derive it then (as upstream).
  let issuerId = located.issuerId;
  if (!issuers.some((i) => i.id === issuerId)) issuerId = await signingIssuerOf(cert, issuers);
  const row = await insertRevoked(db, {
    mountId: mount.id,
    serial,
    issuerId,
    revocationTime: Math.floor(nowMs / 1000),
    notAfter,
    der: bytesToBase64(cert.der),
    createdAt: nowMs,
    reason: input.reason ?? 0,
    crlShard,
  });
  // Without auto_rebuild the CRL is rotated before answering; with it, the row is the delta
  // bookkeeping and the schedule (or crl/rotate) picks it up (Vault API /pki/config/crl, auto_rebuild).
  // A certificate in a shard rebuilds that shard only; the full CRL follows at the next complete
  // build (docs/pki-revocation-crl.md "Sharded CRLs").
  const scope = crlShard === null ? {} : { shards: [crlShard] };
  const warnings = cfg.crl.auto_rebuild ? [] : rebuildWarnings(await rebuildCrls(ctx.env, mount, scope));
  return { data: revocationData(row), warnings };
}

export const SELF_SIGNED_WARNING =
  "This issuer is a self-signed (potentially root) certificate. This means it may not be considered revoked if there is not an external, cross-signed variant of this certificate. This issuer's serial number will not appear on its own CRL.";
export const NO_PARENT_WARNING =
  "This issuer lacks another parent issuer within the mount. This means it will not appear on any other CRLs and may not be considered revoked by clients. Consider adding this issuer to its issuer's CRL as well if it is not self-signed.";
export const DEFAULT_ISSUER_WARNING =
  "This issuer is currently configured as the default issuer for this mount; operations such as certificate issuance may not work until a new default issuer is selected.";

/** POST issuer/:ref/revoke (Vault API /pki/issuer/:issuer_ref/revoke): irreversible; the issuer stops issuing. */
export async function revokeIssuer(ctx: IssueContext, ref: string): Promise<JsonReply> {
  const { db, mount } = ctx;
  const [issuers, cfg] = await Promise.all([listIssuers(db, mount.id), getAllConfig(db, mount.id)]);
  let issuer: IssuerRow;
  try {
    issuer = resolveIssuerIn(issuers, cfg.issuers, ref);
  } catch (e) {
    throw badRequest(e instanceof Error ? e.message : String(e));
  }
  if (issuer.revoked) return { data: issuerView(issuer, issuers) };
  const nowMs = Date.now();
  const next: IssuerRow = {
    ...issuer,
    revoked: true,
    revocationTime: nowMs,
    usage: issuer.usage.filter((u) => u !== "issuing-certificates"),
    lastModified: nowMs,
  };
  await runBatch(db, [updateIssuerStmt(db, mount.id, issuer.id, { revoked: true, revocationTime: nowMs, usage: next.usage, lastModified: nowMs })]);
  const der = certDerFromPem(issuer.certificate);
  // A revocation row when the mount stored this certificate, so reads, LIST certs/revoked and
  // OCSP see it; the CRLs take revoked issuers from the issuer records (crl-rebuild.ts).
  const stored = await getCertWithBody(db, ctx.env.CERTS, mount.id, issuer.serial);
  if (stored && stored.der === bytesToBase64(der)) {
    const cert = parseOrRefuse(der);
    const others = issuers.filter((i) => i.id !== issuer.id);
    await insertRevoked(db, {
      mountId: mount.id,
      serial: issuer.serial,
      issuerId: (await signingIssuerOf(cert, others)) || issuer.id,
      revocationTime: Math.floor(nowMs / 1000),
      notAfter: Math.floor(cert.notAfter.getTime() / 1000),
      der: stored.der,
      createdAt: nowMs,
    });
  }
  // Always a complete rebuild, whatever auto_rebuild says: the serial belongs on the parents'
  // complete CRLs, not on a delta (upstream).
  const warnings = rebuildWarnings(await rebuildCrls(ctx.env, mount));
  const all = issuers.map((i) => (i.id === issuer.id ? next : i));
  let selfSigned = false;
  let otherParent = false;
  for (const candidate of issuers) {
    if (!(await isSignedBy(der, base64ToBytes(candidate.publicKey)))) continue;
    if (candidate.id === issuer.id) selfSigned = true;
    else otherParent = true;
  }
  if (selfSigned) warnings.push(SELF_SIGNED_WARNING);
  if (!otherParent) warnings.push(NO_PARENT_WARNING);
  if (cfg.issuers.default === issuer.id) warnings.push(DEFAULT_ISSUER_WARNING);
  return { data: issuerView(next, all), warnings };
}
