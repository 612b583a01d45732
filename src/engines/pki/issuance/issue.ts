/**
 * Issue and sign (spec "Issue", "Sign"; pki-engine.md §1.8–1.11, §3): resolve the issuer,
 * apply the role, compute validity, build the leaf, reserve its serial from the Authority,
 * sign, store (unless no_store) and format the response.
 */
import type { Db } from "../../../core/db/client";
import { badRequest } from "../../../core/errors";
import { effectiveTtls, type MountRow } from "../../../core/mount-store";
import { base64ToBytes, bytesToBase64 } from "../../../core/encoding";
import { encodeName, publicKeyFacts } from "../x509/asn1";
import { certOutput, formatPrivateKey, responseChain, type CertFormat } from "./format";
import { metadataToStore, sealMetadata } from "./cert-metadata";
import { certDerFromPem, resolveIssuerIn } from "../ca/issuers";
import { unsealPrivateKey } from "../storage/keystore";
import { validateKeySpec } from "../x509/keytypes";
import { decodePemBlocks } from "../x509/pem";
import { applyRole, type NameRequest } from "../policy/policy";
import { leafExtensions, resolveAia } from "./profile";
import { subjectKeyIdOf } from "../x509/resign";
import type { Role } from "../policy/roles";
import { reserveSerial } from "./serials";
import { insertCertStmt, loadIssuanceState, runBatch, type ConfigShapes, type IssuanceState, type IssuerRow, type KeyRow } from "../storage/store";
import { computeValidity, type LeafNotAfterBehavior } from "./ttl";
import { X509Error, generateKeyPair, importSigner, parseCsr, signCertificate, type CsrInfo } from "../x509/x509";
import { colonHex } from "../x509/pem";

export interface IssueContext {
  db: Db;
  env: Env;
  mount: MountRow;
}

export interface LeafRequest {
  role: Role;
  /** The issuer: from the path, else the role's issuer_ref. */
  issuerRef: string;
  names: NameRequest;
  ttl: number;
  notAfter: string;
  format: CertFormat;
  privateKeyFormat: "der" | "pkcs8";
  removeRootsFromChain: boolean;
  /** PEM CSR for sign; absent for issue (a key is generated). */
  csr?: string;
  /** The role's name (recorded with certificate metadata). */
  roleName?: string;
  /** cert_metadata when the request carried it, else null/absent (src/engines/pki/issuance/cert-metadata.ts). */
  certMetadata?: string | null;
}

/** Decodes a PEM (or base64 DER) CSR field into DER, with a 400 naming the field. */
export function csrDer(text: string): Uint8Array<ArrayBuffer> {
  let blocks;
  try {
    blocks = decodePemBlocks(text);
  } catch {
    throw badRequest("csr: the certificate request is not valid PEM");
  }
  const block = blocks.find((b) => b.label === "CERTIFICATE REQUEST" || b.label === "NEW CERTIFICATE REQUEST");
  if (!block) throw badRequest("csr: no CERTIFICATE REQUEST PEM block found");
  return block.der;
}

export async function loadCsr(text: string): Promise<CsrInfo> {
  if (text.trim() === "") throw badRequest("csr: a certificate request is required");
  try {
    return await parseCsr(csrDer(text));
  } catch (e) {
    if (e instanceof X509Error) throw badRequest(`csr: ${e.message}`);
    throw e;
  }
}

/** The signing issuer and its key, checked usable for issuance (upstream 500s; we 400). */
export function signingIssuerFrom(state: IssuanceState, ref: string): { issuer: IssuerRow; key: KeyRow; all: IssuerRow[]; cfg: ConfigShapes } {
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

/**
 * The key identifier a certificate signed by `issuer` names in its AKI: the issuer's own SKI
 * extension (an imported CA may have made it another way than RFC 5280 §4.2.1.2 method 1),
 * else method 1 over its public key.
 */
export async function issuerKeyId(issuer: IssuerRow): Promise<Uint8Array> {
  return subjectKeyIdOf(certDerFromPem(issuer.certificate)) ?? (await publicKeyFacts(base64ToBytes(issuer.publicKey))).ski;
}

export async function signingIssuer(ctx: IssueContext, ref: string) {
  return signingIssuerFrom(await loadIssuanceState(ctx.db, ctx.mount.id, null), ref);
}

/** The CSR's key must suit the role (key_type, and at least key_bits). */
function checkCsrKey(role: Role, csr: CsrInfo): void {
  const { type, bits } = csr.facts;
  if (role.key_type !== "any" && role.key_type !== type) {
    throw badRequest(`key_type: role requires keys of type ${role.key_type}, but the CSR has a ${type} key`);
  }
  if (role.key_type !== "any" && role.key_bits > 0 && bits < role.key_bits) {
    throw badRequest(`key_bits: role requires a minimum of ${role.key_bits} bits, but the CSR's ${type} key has ${bits}`);
  }
  if (type === "rsa" && bits < 2048) throw badRequest(`key_bits: RSA keys < 2048 bits are unsafe and not supported: got ${bits}`);
}

export async function issueLeaf(
  ctx: IssueContext,
  state: IssuanceState,
  r: LeafRequest,
): Promise<{ data: Record<string, unknown>; warnings: string[] }> {
  const { role } = r;
  // Checked first, as upstream does ("error out early if incompatible fields set").
  const metadata = metadataToStore({ value: r.certMetadata ?? null, role });
  const csr = r.csr !== undefined ? await loadCsr(r.csr) : null;
  if (!csr && role.key_type === "any") throw badRequest("key_type: role key type \"any\" not allowed for issuing certificates, only signing");
  const { issuer, key, all, cfg } = signingIssuerFrom(state, r.issuerRef);
  const names = applyRole(role, r.names, csr);
  if (csr) checkCsrKey(role, csr);

  const { defaultTtl, maxTtl } = effectiveTtls(ctx.mount);
  const now = Date.now();
  const validity = computeValidity({
    now,
    requestTtl: r.ttl,
    requestNotAfter: r.notAfter,
    roleTtl: role.ttl,
    roleMaxTtl: role.max_ttl,
    roleNotAfter: role.not_after,
    notAfterBound: role.not_after_bound,
    mountDefaultTtl: defaultTtl,
    mountMaxTtl: maxTtl,
    notBeforeDuration: role.not_before_duration,
    notBefore: role.not_before_bound === "forbid" ? "" : role.not_before,
    issuer: { notAfter: issuer.notAfter, behavior: issuer.leafNotAfterBehavior as LeafNotAfterBehavior },
    refuseOverMax: true,
  });

  const aia = resolveAia(issuer.id, issuer.aia, cfg.urls, cfg.cluster);

  // The serial reservation (a Durable Object round trip) overlaps with key generation and
  // opening the CA key: everything that can fail on bad input has been checked by now.
  const spec = csr ? null : validateKeySpec(role.key_type, role.key_bits, role.signature_bits, true);
  const issuerSpki = base64ToBytes(issuer.publicKey);
  const [serialHex, signer, pair, issuerSki] = await Promise.all([
    reserveSerial(ctx.env, ctx.mount),
    unsealPrivateKey(ctx.env, key).then((pk) => importSigner(pk, issuerSpki, role.signature_bits, role.use_pss)),
    spec ? generateKeyPair(spec.keyType as "rsa" | "ec" | "ed25519", spec.keyBits) : null,
    issuerKeyId(issuer),
  ]);
  const spki = csr ? csr.spki : (pair?.spki ?? new Uint8Array(0));
  const pkcs8 = pair?.pkcs8 ?? null;
  const keyType = spec?.keyType ?? "";
  const leafFacts = await publicKeyFacts(spki);
  const subject = encodeName(names.subject);
  const der = await signCertificate({
    serialHex,
    subject,
    issuer: base64ToBytes(issuer.subjectDer),
    notBefore: validity.notBefore,
    notAfter: validity.notAfter,
    spki,
    extensions: leafExtensions({
      role,
      sans: names.sans,
      subjectEmpty: subject.length <= 2,
      ski: leafFacts.ski,
      issuerSki,
      aia,
    }),
    signer,
  });

  const serial = colonHex(serialHex);
  if (!role.no_store) {
    await runBatch(ctx.db, [
      insertCertStmt(ctx.db, {
        mountId: ctx.mount.id,
        serial,
        der: bytesToBase64(der),
        issuerId: issuer.id,
        notAfter: Math.floor(validity.notAfter.getTime() / 1000),
        createdAt: now,
        metadata: metadata === null ? null : await sealMetadata(ctx.env, ctx.mount.id, serial, r.roleName ?? "", metadata),
      }),
    ]);
  }

  const chain = responseChain(issuer, all, r.removeRootsFromChain);
  const formattedKey = pkcs8 ? formatPrivateKey(pkcs8, keyType, r.format, r.privateKeyFormat) : null;
  const out = certOutput(der, issuer, chain, r.format, formattedKey);
  const data: Record<string, unknown> = {
    certificate: out.certificate,
    issuing_ca: out.issuing_ca,
    ca_chain: out.ca_chain,
    serial_number: serial,
    // The spec shows expiration as a decimal string (spec "Certificate response").
    expiration: String(Math.floor(validity.notAfter.getTime() / 1000)),
  };
  if (formattedKey) {
    data.private_key = formattedKey.private_key;
    data.private_key_type = formattedKey.private_key_type;
  }
  return { data, warnings: validity.warnings };
}
