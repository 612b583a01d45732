/**
 * Issue and sign (Vault API /pki/issue/:name, /pki/sign/:name): resolve the issuer, apply
 * the role, then the issuance pipeline (pipeline.ts): validity, serial, signer, sign, store
 * (unless no_store), output.
 */
import { badRequest } from "../../../core/errors";
import { encodeName } from "../x509/asn1";
import type { CertFormat } from "./format";
import { metadataToStore } from "./cert-metadata";
import { loadCsr } from "./csr";
import { validateKeySpec } from "../x509/keytypes";
import { applyRole, type NameRequest } from "../policy/policy";
import { leafExtensions, resolveAia } from "./profile";
import { shardAia, shardCountFor } from "../revocation/crl-shards";
import type { Role } from "../policy/roles";
import type { IssuanceState } from "../storage/store";
import { generateKeyPair, type CsrInfo } from "../x509/x509";
import {
  certificateResponse,
  issuanceValidity,
  leafBound,
  signNewCertificate,
  signingIssuerFrom,
  storeCertificate,
  type CertificateResponse,
  type IssueContext,
  type SubjectKey,
} from "./pipeline";

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

export async function issueLeaf(ctx: IssueContext, state: IssuanceState, r: LeafRequest): Promise<{ data: CertificateResponse; warnings: string[] }> {
  const { role } = r;
  // Checked first, as upstream does ("error out early if incompatible fields set").
  const metadata = metadataToStore({ value: r.certMetadata ?? null, role });
  const csr = r.csr !== undefined ? await loadCsr(r.csr) : null;
  if (!csr && role.key_type === "any") throw badRequest("key_type: role key type \"any\" not allowed for issuing certificates, only signing");
  const { issuer, key, all, cfg } = signingIssuerFrom(state, r.issuerRef);
  const names = applyRole(role, r.names, csr);
  if (csr) checkCsrKey(role, csr);

  const now = Date.now();
  const validity = issuanceValidity(ctx.mount, {
    now,
    ttl: r.ttl,
    notAfter: r.notAfter,
    notBeforeDuration: role.not_before_duration,
    role: {
      ttl: role.ttl,
      maxTtl: role.max_ttl,
      notAfter: role.not_after,
      notAfterBound: role.not_after_bound,
      notBefore: role.not_before_bound === "forbid" ? "" : role.not_before,
    },
    issuer: leafBound(issuer),
  });

  const aia = resolveAia(issuer.id, issuer.aia, cfg.urls, cfg.cluster);
  // Key generation overlaps the serial reservation (signNewCertificate): everything that can
  // fail on bad input has been checked by now.
  const spec = csr ? null : validateKeySpec(role.key_type, role.key_bits, role.signature_bits, true);
  const subjectKey: SubjectKey | Promise<SubjectKey> = spec
    ? generateKeyPair(spec.keyType as "rsa" | "ec" | "ed25519", spec.keyBits).then((pair) => ({ ...pair, keyType: spec.keyType }))
    : { spki: csr?.spki ?? new Uint8Array(0), pkcs8: null, keyType: "" };
  const subject = encodeName(names.subject);
  const signed = await signNewCertificate(ctx, {
    signedBy: { issuer, key, signature: { signatureBits: role.signature_bits, usePss: role.use_pss } },
    subject,
    subjectKey,
    validity,
    extensions: ({ ski, issuerSki, crlShard }) => leafExtensions({ role, sans: names.sans, subjectEmpty: subject.length <= 2, ski, issuerSki, aia: shardAia(aia, crlShard) }),
    crlShards: shardCountFor(cfg.crl.shard_count, aia, { ca: false }),
  });

  if (!role.no_store) {
    await storeCertificate(ctx, signed, {
      issuerId: issuer.id,
      createdAt: now,
      role: r.roleName ?? null,
      metadata: metadata === null ? null : { role: r.roleName ?? "", value: metadata },
    });
  }
  const data = certificateResponse(signed, {
    format: r.format,
    chain: { issuer, all, removeRoots: r.removeRootsFromChain },
    privateKeyFormat: r.privateKeyFormat,
  });
  return { data, warnings: validity.warnings };
}
