/**
 * sign-verbatim(/:role) and issuer/:ref/sign-verbatim(/:role) (Vault API /pki/sign-verbatim/:role):
 * a leaf certificate with the CSR's own subject and extensions, not subject to role name policy.
 * The only refusal of content is a CA request (docs/pki-privileged-signing.md). Upstream builds a
 * synthetic role that allows any name (OpenBao builtin/logical/pki/path_issue_sign.go) and copies
 * every CSR extension but basicConstraints over what it generates (Go's ExtraExtensions), so the key_usage / ext_key_usage / OID fields are
 * defaults that apply only when the CSR lacks the extension. A named role contributes ttl,
 * max_ttl, issuer_ref, no_store, no_store_metadata and not_before_duration.
 */
import { badRequest } from "../../../core/errors";
import { defineFields, type FieldValues } from "../../../core/fields";
import { base64ToBytes } from "../../../core/encoding";
import {
  OID,
  aiaExtension,
  akiExtension,
  distributionPointsExtension,
  extKeyUsageExtension,
  keyUsageExtension,
  nameAttributes,
  publicKeyFacts,
  skiExtension,
  type ExtensionDer,
} from "../x509/asn1";
import { metadataToStore } from "./cert-metadata";
import { DerError, children, isValidOid, oid, parse, seq, set, utf8 } from "../x509/der";
import { checkFormat } from "./format";
import { loadCsr, refuseWeakRsaCsr } from "./csr";
import type { CsrInfo } from "../x509/x509";
import { validateKeySpec } from "../x509/keytypes";
import { extKeyUsageOids, keyUsageBits, resolveAia, type AiaUrls } from "./profile";
import { shardAia, shardCountFor } from "../revocation/crl-shards";
import { OID_AKI, OID_SKI } from "../x509/resign";
import type { Role } from "../policy/roles";
import { DEFAULT_KEY_USAGE } from "../defaults";
import { css, csrField, formatField, notAfterField, removeRootsField, signatureFields } from "../fields";
import { loadIssuanceState } from "../storage/store";
import { certificateResponse, issuanceValidity, leafBound, signNewCertificate, signingIssuerFrom, storeCertificate, type IssueContext, type KeyIds } from "./pipeline";

export const signVerbatimFields = defineFields({
  role: { type: "string", description: "Role (path): its ttl, max_ttl, issuer_ref, no_store, no_store_metadata and not_before_duration apply." },
  name: { type: "string", description: "Role, as a body field, when the path names none." },
  issuer_ref: { type: "string", description: "Signing issuer (per-issuer paths)." },
  ...csrField,
  key_usage: css("Key usages when the CSR has no key usage extension (case-insensitive; empty: none).", DEFAULT_KEY_USAGE),
  ext_key_usage: css("Extended key usages when the CSR has no extended key usage extension."),
  ext_key_usage_oids: css("Extended key usage OIDs when the CSR has no extended key usage extension."),
  enforce_leaf_not_after_behavior: {
    type: "bool",
    description: "Follow the issuer's leaf_not_after_behavior instead of truncating to its notAfter.",
    default: false,
  },
  ttl: { type: "duration", description: "Requested TTL (at most the role's or the engine's max_ttl).", default: 0 },
  ...formatField,
  ...notAfterField,
  // Only RSA issuers use them; a bad value is refused for every issuer.
  ...signatureFields,
  ...removeRootsField,
  user_ids: css("User ID (0.9.2342.19200300.100.1.1) subject values to add; not validated here."),
  cert_metadata: { type: "string", description: "Base64 metadata stored with the certificate (needs a role).", default: "" },
});

export interface VerbatimOptions {
  /** The issuer from the path (per-issuer paths), else null: the role's issuer, or the default. */
  pathIssuer: string | null;
  /** The role name ("" for none). */
  roleName: string;
  /** cert_metadata when the request carried it, else null. */
  certMetadata: string | null;
}

/** The CSR's subject with the requested user ids appended as UID attributes (RFC 4519 §2.39). */
function subjectWithUserIds(subject: Uint8Array<ArrayBuffer>, userIds: string[]): Uint8Array<ArrayBuffer> {
  const wanted = [...new Set(userIds.map((u) => u.trim()).filter((u) => u !== ""))];
  if (wanted.length === 0) return subject;
  let rdns;
  let present: string[];
  try {
    rdns = children(parse(subject)).map((n) => n.raw);
    present = nameAttributes(subject).filter((a) => a.type === OID.userId).map((a) => a.value);
  } catch (e) {
    throw badRequest(`csr: the certificate request's subject could not be read: ${e instanceof DerError ? e.message : String(e)}`);
  }
  const added = wanted.filter((u) => !present.includes(u)).map((u) => set(seq(oid(OID.userId), utf8(u))));
  return seq(...rdns, ...added);
}

/**
 * The extensions of a verbatim certificate. The CSR's win over generated ones with the same OID
 * (Go's ExtraExtensions); basicConstraints is never copied, and the AKI must name this issuer
 * (RFC 5280 §4.2.1.1).
 */
function verbatimExtensions(csr: CsrInfo, f: FieldValues<typeof signVerbatimFields>, aia: AiaUrls): (ids: KeyIds) => ExtensionDer[] {
  const fromCsr = csr.extensions.filter((e) => e.oid !== OID.basicConstraints && e.oid !== OID_AKI);
  const inCsr = (o: string) => fromCsr.some((e) => e.oid === o);
  const eku = extKeyUsageOids({
    server_flag: false,
    client_flag: false,
    code_signing_flag: false,
    email_protection_flag: false,
    ext_key_usage: f.ext_key_usage,
    ext_key_usage_oids: f.ext_key_usage_oids.map((o) => o.trim()),
  });
  return ({ ski, issuerSki }) => {
    const generated: (ExtensionDer | null)[] = [
      inCsr(OID.keyUsage) ? null : keyUsageExtension(keyUsageBits(f.key_usage)),
      inCsr(OID.extKeyUsage) ? null : extKeyUsageExtension(eku),
      inCsr(OID_SKI) ? null : skiExtension(ski),
      akiExtension(issuerSki),
      inCsr(OID.authorityInfoAccess) ? null : aiaExtension(aia.issuingCertificates, aia.ocspServers),
      inCsr(OID.crlDistributionPoints) ? null : distributionPointsExtension(aia.crlDistributionPoints, "crl"),
      inCsr(OID.freshestCrl) ? null : distributionPointsExtension(aia.deltaCrlDistributionPoints, "delta"),
    ];
    return [...generated.filter((e): e is ExtensionDer => e !== null), ...fromCsr];
  };
}

export async function signVerbatim(ctx: IssueContext, f: FieldValues<typeof signVerbatimFields>, opts: VerbatimOptions) {
  const format = checkFormat(f.format);
  const state = await loadIssuanceState(ctx.db, ctx.mount.id, opts.roleName || null);
  const role = opts.roleName ? (state.role as Role | null) : null;
  if (opts.roleName && !role) throw badRequest(`unknown role: ${opts.roleName}`);
  const metadata = metadataToStore({ value: opts.certMetadata, role, verbatim: true });
  for (const o of f.ext_key_usage_oids) {
    if (!isValidOid(o.trim())) throw badRequest(`ext_key_usage_oids: "${o}" is not a valid OID`);
  }

  const csr = await loadCsr(f.csr);
  // Sign-verbatim refuses to issue an intermediate CA certificate (sign-intermediate does that).
  if (csr.isCa) {
    throw badRequest("csr: the certificate request asks for a CA certificate (basicConstraints CA:TRUE); sign-verbatim does not issue CA certificates, use sign-intermediate");
  }
  refuseWeakRsaCsr(csr);

  const { issuer, key, all, cfg } = signingIssuerFrom(state, opts.pathIssuer ?? (role?.issuer_ref || "default"));
  const issuerSpki = base64ToBytes(issuer.publicKey);
  const issuerFacts = await publicKeyFacts(issuerSpki);
  // Only RSA issuers honour signature_bits (as on sign-intermediate), but a bad value is refused.
  validateKeySpec(issuerFacts.type, 0, f.signature_bits);

  const now = Date.now();
  const validity = issuanceValidity(ctx.mount, {
    now,
    ttl: f.ttl,
    notAfter: f.not_after,
    notBeforeDuration: role && role.not_before_duration > 0 ? role.not_before_duration : 30,
    // A role contributes only ttl and max_ttl to validity (Vault API /pki/sign-verbatim/:role, name).
    role: { ttl: role?.ttl ?? 0, maxTtl: role?.max_ttl ?? 0 },
    // enforce_leaf_not_after_behavior=false truncates to the issuer's notAfter (Vault API docs).
    issuer: f.enforce_leaf_not_after_behavior ? leafBound(issuer) : { notAfter: issuer.notAfter, behavior: "truncate" },
  });

  const aia = resolveAia(issuer.id, issuer.aia, cfg.urls, cfg.cluster);
  const subject = subjectWithUserIds(csr.subject, f.user_ids);

  const signed = await signNewCertificate(ctx, {
    signedBy: { issuer, key, signature: { signatureBits: f.signature_bits, usePss: f.use_pss } },
    subject,
    subjectKey: { spki: csr.spki, pkcs8: null, keyType: csr.facts.type },
    validity,
    extensions: (ids) => verbatimExtensions(csr, f, shardAia(aia, ids.crlShard))(ids),
    // A CDP the CSR brings is kept (verbatim), and then the certificate names no shard.
    crlShards: shardCountFor(cfg.crl.shard_count, aia, { ca: false, ownCdp: csr.extensions.some((e) => e.oid === OID.crlDistributionPoints) }),
  });

  if (!role?.no_store) {
    await storeCertificate(ctx, signed, {
      issuerId: issuer.id,
      createdAt: now,
      role: opts.roleName || null,
      metadata: metadata === null ? null : { role: opts.roleName, value: metadata },
    });
  }
  return {
    data: certificateResponse(signed, { format, chain: { issuer, all, removeRoots: f.remove_roots_from_chain }, privateKeyFormat: null }),
    warnings: validity.warnings,
    // The role, for what the route adds with it (a generate_lease lease); null without one.
    role,
  };
}
