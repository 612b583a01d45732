/**
 * The issuance pipeline: every path that signs a new certificate goes through these stages, in
 * this order (issue, sign, sign-verbatim, sign-intermediate, root generation and rotation, and
 * the external-policy paths; sign-self-issued, which re-signs an existing TBSCertificate, shares
 * the signer stage and the issuer's key identifier):
 *
 *   1. validity  `issuanceValidity`: ttl / not_after / not_before_duration against the role, the
 *                mount's TTLs and the issuer's notAfter with its leaf_not_after_behavior
 *                (Vault API /pki/issuer/:issuer_ref; the arithmetic is ttl.ts's computeValidity).
 *   2. serial    `reserveSerial` (serials.ts): the mount's Authority Durable Object, pooled per
 *                isolate.
 *   3. signer    `issuerSigner`: the issuer's sealed key, unsealed and imported for the chosen
 *                signature algorithm (key_type/signature_bits/use_pss); a new root signs with its own key.
 *   4. sign      `signCertificate` (x509/x509.ts, the only user of @peculiar/x509).
 *   5. store     `certificateRecord` / `storeCertificate`: the pki_certs row, through storage/.
 *   6. output    `certificateResponse`: the one response shape (Vault API /pki/issue/:name).
 *
 * Stages 2-4 are `signNewCertificate`. The serial round trip, opening the CA key, generating
 * the subject's key and reading the issuer's key identifier run concurrently: everything that
 * can fail on bad input is checked by the caller before it calls in, and the serial reservation
 * is the slowest step of an issue (npm run bench).
 */
import { BoundedCache } from "../../../core/bounded-cache";
import type { Db } from "../../../core/db/client";
import { badRequest } from "../../../core/errors";
import { effectiveTtls, type MountRow } from "../../../core/mount-store";
import { base64ToBytes, bytesToBase64 } from "../../../core/encoding";
import { publicKeyFacts, type ExtensionDer } from "../x509/asn1";
import { colonHex } from "../x509/pem";
import { importSigner, signCertificate, type Signer } from "../x509/x509";
import { issuerKeyIdOf } from "../x509/issuer-facts";
import { resolveIssuerIn } from "../ca/issuers";
import { unsealPrivateKey } from "../storage/keystore";
import {
  insertCertStmts,
  loadIssuanceState,
  runBatch,
  type ConfigShapes,
  type IssuanceState,
  type IssuerRow,
  type CertInsert,
  type KeyRow,
  type Stmt,
} from "../storage/store";
import { sealMetadata } from "./cert-metadata";
import { certOutput, encodeCert, formatPrivateKey, responseChain, type CertFormat } from "./format";
import { reserveSerial } from "./serials";
import { storeLeafCertificate, storeWithBody } from "./cert-commit";
import { inventoryColumns } from "../inventory/columns";
import { shardOf } from "../revocation/crl-shards";
import { computeValidity, type LeafNotAfterBehavior, type Validity } from "./ttl";

/** What every PKI operation of a request works with: the database, the Worker env, the mount. */
export interface IssueContext {
  db: Db;
  env: Env;
  mount: MountRow;
  /** The request's waitUntil, when there is a request (a group commit's batch is kept alive by it). */
  waitUntil?: (p: Promise<unknown>) => void;
}

// -- the signing issuer -------------------------------------------------------------------------

export interface SigningIssuer {
  issuer: IssuerRow;
  key: KeyRow;
  all: IssuerRow[];
  cfg: ConfigShapes;
}

/** The signing issuer and its key, checked usable for issuance (upstream 500s; we 400). */
export function signingIssuerFrom(state: IssuanceState, ref: string): SigningIssuer {
  let issuer: IssuerRow;
  try {
    issuer = resolveIssuerIn(state.issuers, state.config.issuers, ref);
  } catch (e) {
    throw badRequest(`could not fetch the CA certificate (was one set?): ${e instanceof Error ? e.message : String(e)}`);
  }
  if (!issuer.usage.includes("issuing-certificates")) {
    throw badRequest(`could not fetch the CA certificate (was one set?): issuer ${issuer.id} lacks the issuing-certificates usage`);
  }
  const key = issuer.keyId ? state.keys.find((k) => k.id === issuer.keyId) : undefined;
  if (!key) throw badRequest(`could not fetch the CA certificate (was one set?): issuer ${issuer.id} has no private key in this mount`);
  return { issuer, key, all: state.issuers, cfg: state.config };
}

export async function signingIssuer(ctx: IssueContext, ref: string): Promise<SigningIssuer> {
  return signingIssuerFrom(await loadIssuanceState(ctx.db, ctx.mount.id, null), ref);
}

/**
 * The key identifier a certificate signed by `issuer` names in its AKI: the issuer's own SKI
 * extension (an imported CA may have made it another way than RFC 5280 §4.2.1.2 method 1),
 * else method 1 over its public key.
 */
export async function issuerKeyId(issuer: IssuerRow): Promise<Uint8Array> {
  // Cached by the certificate text (x509/issuer-facts.ts): immutable input, nothing to invalidate.
  return issuerKeyIdOf(issuer.certificate, issuer.publicKey);
}

// -- 1. validity --------------------------------------------------------------------------------

export interface ValidityRequest {
  /** The request's clock (ms); also the stored row's createdAt. */
  now: number;
  /** Request ttl in seconds (0: none). */
  ttl: number;
  /** Request not_after ("" : none). */
  notAfter: string;
  notBeforeDuration: number;
  /**
   * The role's limits (ttl, max_ttl, not_after and not_after_bound of Vault API /pki/roles/:name). Absent fields are "not set": the CA paths
   * have no role, sign-verbatim takes only ttl and max_ttl from one (Vault API /pki/sign-verbatim/:role).
   */
  role?: { ttl: number; maxTtl: number; notAfter?: string; notAfterBound?: string; notBefore?: string };
  /** The signing issuer's notAfter and what to do beyond it (leaf_not_after_behavior); null for a new root. */
  issuer: { notAfter: number; behavior: LeafNotAfterBehavior } | null;
}

/** The issuer bound of a leaf: the issuer's leaf_not_after_behavior (err, truncate or permit). */
export function leafBound(issuer: IssuerRow): { notAfter: number; behavior: LeafNotAfterBehavior } {
  return { notAfter: issuer.notAfter, behavior: issuer.leafNotAfterBehavior as LeafNotAfterBehavior };
}

/**
 * Validity of a new certificate under the mount's TTLs. A ttl above the applicable max_ttl is
 * refused on every path (docs/http-conventions.md "Settled questions": a refusal rather than
 * upstream's capping); a long-lived root uses not_after, which max_ttl does not cap.
 */
export function issuanceValidity(mount: MountRow, v: ValidityRequest): Validity {
  const { defaultTtl, maxTtl } = effectiveTtls(mount);
  return computeValidity({
    now: v.now,
    requestTtl: v.ttl,
    requestNotAfter: v.notAfter,
    roleTtl: v.role?.ttl ?? 0,
    roleMaxTtl: v.role?.maxTtl ?? 0,
    roleNotAfter: v.role?.notAfter ?? "",
    notAfterBound: v.role?.notAfterBound ?? "permit",
    mountDefaultTtl: defaultTtl,
    mountMaxTtl: maxTtl,
    notBeforeDuration: v.notBeforeDuration,
    notBefore: v.role?.notBefore ?? "",
    issuer: v.issuer,
    refuseOverMax: true,
  });
}

// -- 3. signer ----------------------------------------------------------------------------------

/** The signature algorithm of a new certificate (signature_bits, use_pss; RFC 5758, RFC 4055). */
export interface SignatureChoice {
  /** RSA hash size 256/384/512 (0: the key's default). */
  signatureBits: number;
  /** RSA-PSS instead of PKCS#1 v1.5 (RSA signers only). */
  usePss: boolean;
  /** An ECDSA hash other than the curve's default (an external policy template's choice). */
  ecdsaHash?: string;
}

/**
 * Opened issuer keys, per isolate: unsealing and importing a key costs more CPU than signing
 * with it. Keyed by the sealed key text itself (with its mount and id, which the seal binds, the
 * issuer's public key and the signature
 * choice), so a changed, rotated or deleted key is never used: a new text is a new entry, and a
 * key no state names is never looked up. Values only, never promises (workerd ties promises to
 * the request that made them). At most 64 entries, the oldest evicted first. The OCSP responder
 * keeps its own opened keys by the same rule (revocation/ocsp-responder.ts).
 */
const openedSigners = new BoundedCache<Signer>("pki.issuerSigners", 64);

/** The signing key of an issuer of the mount, opened and imported for `choice`. */
export async function issuerSigner(env: Env, issuer: IssuerRow, key: KeyRow, choice: SignatureChoice): Promise<Signer> {
  const cacheKey = `${key.mountId}\n${key.id}\n${key.sealedPrivateKey}\n${issuer.publicKey}\n${choice.signatureBits}\n${choice.usePss}`;
  let signer = openedSigners.get(cacheKey);
  if (!signer) {
    signer = await importSigner(await unsealPrivateKey(env, key), base64ToBytes(issuer.publicKey), choice.signatureBits, choice.usePss);
    openedSigners.set(cacheKey, signer);
  }
  return withChoice(signer, choice);
}

function withChoice(signer: Signer, choice: SignatureChoice): Signer {
  return choice.ecdsaHash ? { ...signer, algorithm: { ...signer.algorithm, hash: choice.ecdsaHash } } : signer;
}

// -- 2-4. serial, signer, sign ------------------------------------------------------------------

/** The key a certificate certifies: from a CSR (no private half here), or generated for it. */
export interface SubjectKey {
  spki: Uint8Array<ArrayBuffer>;
  /** The private key when it was generated here (issue, root generation); null for a CSR. */
  pkcs8: Uint8Array<ArrayBuffer> | null;
  /** rsa / ec / ed25519: private_key_type of the response. */
  keyType: string;
}

/** Who signs: an issuer of the mount with its stored key, or (a new root) the subject's own key. */
export type SignedBy = { issuer: IssuerRow; key: KeyRow; signature: SignatureChoice } | { selfSigned: true; signature: SignatureChoice };

/** The key identifiers the profile's SKI and AKI extensions carry (RFC 5280 §4.2.1.1-2). */
export interface KeyIds {
  /** RFC 5280 §4.2.1.2 method 1 over the subject's key. */
  ski: Uint8Array;
  /** The signer's: issuerKeyId, or `ski` for a self-signed certificate. */
  issuerSki: Uint8Array;
  /** The CRL shard the certificate names (revocation/crl-shards.ts); null: the full CRL. */
  crlShard: number | null;
}

export interface CertificateToSign {
  signedBy: SignedBy;
  /** DER Name (RFC 5280 §4.1.2.6). */
  subject: Uint8Array<ArrayBuffer>;
  /** A promise lets key generation overlap the serial round trip. */
  subjectKey: SubjectKey | Promise<SubjectKey>;
  validity: Validity;
  /** The profile's extensions, once the key identifiers (and the CRL shard) are known. */
  extensions: (ids: KeyIds) => ExtensionDer[];
  /**
   * Shards to assign among (shardCountFor); absent or 1: none. The shard is fixed here, from the
   * serial, and stored with the row (docs/pki-revocation-crl.md "Sharded CRLs").
   */
  crlShards?: number;
}

export interface SignedCertificate {
  der: Uint8Array<ArrayBuffer>;
  /** Colon-separated lowercase hex, as Vault writes serial_number. */
  serial: string;
  /** notAfter in Unix seconds: the stored row's and the response's expiration. */
  notAfterSec: number;
  subjectKey: SubjectKey;
  /** The CRL shard its CDP names; null when none (pki_certs.crl_shard). */
  crlShard: number | null;
}

export async function signNewCertificate(ctx: IssueContext, c: CertificateToSign): Promise<SignedCertificate> {
  const by = c.signedBy;
  const subjectKey = Promise.resolve(c.subjectKey);
  const [serialHex, signer, key, issuerSki] = await Promise.all([
    reserveSerial(ctx.env, ctx.mount),
    "issuer" in by ? issuerSigner(ctx.env, by.issuer, by.key, by.signature) : subjectKey.then((k) => selfSigner(k, by.signature)),
    subjectKey,
    "issuer" in by ? issuerKeyId(by.issuer) : null,
  ]);
  const { ski } = await publicKeyFacts(key.spki);
  const crlShard = (c.crlShards ?? 1) > 1 ? shardOf(serialHex, c.crlShards ?? 1) : null;
  const der = await signCertificate({
    serialHex,
    subject: c.subject,
    issuer: "issuer" in by ? base64ToBytes(by.issuer.subjectDer) : c.subject,
    notBefore: c.validity.notBefore,
    notAfter: c.validity.notAfter,
    spki: key.spki,
    extensions: c.extensions({ ski, issuerSki: issuerSki ?? ski, crlShard }),
    signer,
  });
  return { der, serial: colonHex(serialHex), notAfterSec: Math.floor(c.validity.notAfter.getTime() / 1000), subjectKey: key, crlShard };
}

async function selfSigner(key: SubjectKey, choice: SignatureChoice): Promise<Signer> {
  // A wiring bug, not input: only the CA paths sign with the subject's key, and they have it.
  if (!key.pkcs8) throw new Error("a self-signed certificate needs its private key");
  return withChoice(await importSigner(key.pkcs8, key.spki, choice.signatureBits, choice.usePss), choice);
}

// -- 5. store -----------------------------------------------------------------------------------

export interface CertRecord {
  /** The signing issuer's id (for a new root: the id its issuer row will get). */
  issuerId: string;
  createdAt: number;
  /** The role it was issued under, for the inventory (docs/pki-inventory.md); none for CA certificates. */
  role?: string | null;
}

/**
 * The pki_certs row of a signed certificate, as statements for the caller's D1 batch (a new
 * root's goes in with its issuer and key). Synchronous on purpose: Drizzle statements are
 * thenables, so one returned from an async function would run on its own, outside the batch.
 */
export function certificateRecord(ctx: IssueContext, signed: SignedCertificate, r: CertRecord, sealedMetadata: string | null = null): Stmt[] {
  return insertCertStmts(ctx.db, certificateRow(ctx, signed, r, sealedMetadata));
}

function certificateRow(ctx: IssueContext, signed: SignedCertificate, r: CertRecord, sealedMetadata: string | null): CertInsert {
  return {
    mountId: ctx.mount.id,
    serial: signed.serial,
    der: bytesToBase64(signed.der),
    issuerId: r.issuerId,
    notAfter: signed.notAfterSec,
    createdAt: r.createdAt,
    metadata: sealedMetadata,
    ...inventoryColumns(signed.der),
    role: r.role ?? null,
    crlShard: signed.crlShard,
  };
}

/**
 * Stores the certificate with its cert_metadata, sealed (cert-metadata.ts), in one D1 batch
 * with `before` (D1 has no interactive transactions: drizzle's BEGIN is refused). A certificate
 * alone is group-committed with the isolate's concurrent issues, its body in R2 (cert-commit.ts,
 * storage/cert-bodies.ts); with `before`, its row goes in one batch with them, its body to R2
 * beside it the same way. Resolved only once its row and body are durable either way.
 */
export async function storeCertificate(
  ctx: IssueContext,
  signed: SignedCertificate,
  r: CertRecord & { metadata?: { role: string; value: string } | null },
  before: Stmt[] = [],
): Promise<void> {
  const sealed = r.metadata ? await sealMetadata(ctx.env, ctx.mount.id, signed.serial, r.metadata.role, r.metadata.value) : null;
  if (before.length === 0) await storeLeafCertificate(ctx.db, ctx.env.CERTS, certificateRow(ctx, signed, r, sealed), signed.der, ctx.waitUntil);
  else await storeWithBody(ctx.db, ctx.env.CERTS, certificateRow(ctx, signed, r, sealed), signed.der, (slim) => runBatch(ctx.db, [...before, ...insertCertStmts(ctx.db, slim)]), ctx.waitUntil);
}

// -- 6. output ----------------------------------------------------------------------------------

/**
 * The data of every signing response (Vault API /pki/issue/:name; root generation adds the
 * issuer and key fields, which the caller spreads next to these).
 */
export interface CertificateResponse {
  certificate: string;
  issuing_ca: string;
  /** Absent for a new root: Vault's root/generate response has no chain. */
  ca_chain?: string[];
  serial_number: string;
  /**
   * notAfter in Unix seconds as a decimal string, as Vault's API docs show it. Upstream's code
   * answers a JSON integer; Lanyard keeps the documented shape on every path.
   */
  expiration: string;
  private_key?: string;
  private_key_type?: string;
}

export interface ResponseOptions {
  format: CertFormat;
  /** The signing issuer and the chain to answer with, or a new root (its own issuing CA). */
  chain: { issuer: IssuerRow; all: IssuerRow[]; removeRoots: boolean } | "self-signed";
  /** The encoding of a private key generated here; null: never answer it (internal CA keys). */
  privateKeyFormat: "der" | "pkcs8" | null;
}

export function certificateResponse(signed: SignedCertificate, o: ResponseOptions): CertificateResponse {
  const { pkcs8, keyType } = signed.subjectKey;
  const key = pkcs8 && o.privateKeyFormat ? formatPrivateKey(pkcs8, keyType, o.format, o.privateKeyFormat) : null;
  let head: Pick<CertificateResponse, "certificate" | "issuing_ca" | "ca_chain">;
  if (o.chain === "self-signed") {
    const leaf = encodeCert(signed.der, o.format);
    // pem_bundle: the key, then the certificate (Vault API /pki/root/generate/:type).
    head = { certificate: o.format === "pem_bundle" && key ? `${key.bundlePem}\n${leaf}` : leaf, issuing_ca: leaf };
  } else {
    head = certOutput(signed.der, o.chain.issuer, responseChain(o.chain.issuer, o.chain.all, o.chain.removeRoots), o.format, key);
  }
  const data: CertificateResponse = { ...head, serial_number: signed.serial, expiration: String(signed.notAfterSec) };
  if (key) {
    data.private_key = key.private_key;
    data.private_key_type = key.private_key_type;
  }
  return data;
}
