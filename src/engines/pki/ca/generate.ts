/**
 * CA certificates: root generation (Vault API /pki/root/generate/:type), intermediate CSR
 * generation (/pki/intermediate/generate/:type) and signing an intermediate
 * (/pki/root/sign-intermediate). Keys are generated in WebCrypto and only
 * written together with the issuer that uses them (one D1 batch).
 */
import { badRequest } from "../../../core/errors";
import { defineFields, type FieldValues } from "../../../core/fields";
import { css, csrField, extKeyUsageFields, formatField, keyGenFields, nameFields, notAfterField, privateKeyFormatField, signatureFields, subjectAttributeFields } from "../fields";
import { base64ToBytes, bytesToBase64, hexToBytes } from "../../../core/encoding";
import { OID, emptySans, encodeName, publicKeyFacts, sanExtension, sanIsEmpty, basicConstraintsExtension, type ExtensionDer } from "../x509/asn1";
import { isValidOid } from "../x509/der";
import { checkFormat, checkPrivateKeyFormat, formatPrivateKey } from "../issuance/format";
import { certDerFromPem, checkObjectName, importIssuersAndKeys, resolveKeyIn } from "./issuers";
import { unsealPrivateKey, sealPrivateKey } from "../storage/keystore";
import { validateKeySpec } from "../x509/keytypes";
import { toPem } from "../x509/pem";
import { applyRole, nameRequestFrom, permissiveRole } from "../policy/policy";
import { NO_AIA, caExtensions, resolveAia, type AiaUrls } from "../issuance/profile";
import { defaultRole } from "../policy/roles";
import { getAllConfig, insertKeyStmt, listIssuers, listKeys, putConfigStmt, runBatch, type IssuerRow, type KeyRow, type Stmt } from "../storage/store";
import { generateKeyPair, parseCertificate, signCsr } from "../x509/x509";
import { loadCsr, refuseWeakRsaCsr } from "../issuance/csr";
import {
  certificateRecord,
  certificateResponse,
  issuanceValidity,
  signNewCertificate,
  signingIssuer,
  storeCertificate,
  type IssueContext,
} from "../issuance/pipeline";
import { OID_AKI, OID_SKI } from "../x509/resign";

/** Subject and SAN fields shared by every CA path. */
const subjectFields = {
  ...nameFields,
  ...subjectAttributeFields,
  ...formatField,
  ...signatureFields,
} as const;

const keyFields = {
  type: { type: "string", description: "internal, exported or existing.", required: true },
  ...privateKeyFormatField,
  ...keyGenFields,
  key_name: { type: "string", description: "Name of the new key." },
  key_ref: { type: "string", description: "Key to use with type existing.", default: "default" },
} as const;

const validityFields = {
  ttl: { type: "duration", description: "Validity (default: mount default TTL).", default: 0 },
  ...notAfterField,
  not_before_duration: { type: "duration", description: "Backdating of notBefore.", default: 30 },
  max_path_length: { type: "int", description: "Path length constraint (-1: none).", default: -1 },
  permitted_dns_domains: css("Name constraints: permitted DNS domains."),
  key_usage: css("Only DigitalSignature has an effect on CA certificates."),
  ...extKeyUsageFields,
} as const;

export const rootFields = defineFields({
  ...subjectFields,
  ...keyFields,
  ...validityFields,
  issuer_name: { type: "string", description: "Name of the new issuer." },
});

export const intermediateFields = defineFields({
  ...subjectFields,
  ...keyFields,
  add_basic_constraints: { type: "bool", description: "Request CA:true in the CSR.", default: false },
});

/** intermediate/cross-sign: the intermediate fields, always with an existing key. */
export const crossSignFields = defineFields({
  ...intermediateFields,
  type: { type: "string", description: "Always existing.", default: "existing" },
});

export const signIntermediateFields = defineFields({
  ...subjectFields,
  ...validityFields,
  issuer_ref: { type: "string", description: "Signing issuer.", default: "default" },
  ...csrField,
  use_csr_values: { type: "bool", description: "Keep the CSR's subject, SANs and extensions.", default: false },
  skid: { type: "string", description: "Subject Key Identifier in hex (cross-signing only).", default: "" },
  common_name: { type: "string", description: "Subject CN.", default: "" },
});

type SubjectValues = FieldValues<typeof rootFields>;

const AIA_WARNING =
  "This mount hasn't configured any authority information access (AIA) fields; this may make it harder for systems to find missing certificates in the chain or to validate revocation status of certificates. Consider updating /config/urls or the newly generated issuer with this information.";

function namesFrom(f: Pick<SubjectValues, keyof typeof subjectFields>) {
  const role = permissiveRole({
    ...defaultRole(),
    ou: f.ou,
    organization: f.organization,
    country: f.country,
    locality: f.locality,
    province: f.province,
    street_address: f.street_address,
    postal_code: f.postal_code,
  });
  return applyRole(role, nameRequestFrom(f, []), null);
}

interface KeyMaterial {
  pkcs8: Uint8Array<ArrayBuffer>;
  spki: Uint8Array<ArrayBuffer>;
  keyType: string;
  existing: KeyRow | null;
}

/** The key for a CA path: generated (internal/exported) or an existing key of the mount. */
async function caKey(ctx: IssueContext, f: Pick<SubjectValues, keyof typeof keyFields | "signature_bits">, has: (n: string) => boolean): Promise<KeyMaterial> {
  if (f.type === "kms") throw badRequest('type: "kms" keys are not supported by this service');
  if (!["internal", "exported", "existing"].includes(f.type)) {
    throw badRequest('the "exported" path parameter must be "internal", "existing", exported" or "kms"');
  }
  if (f.type === "existing") {
    if (has("key_type") || has("key_bits")) {
      throw badRequest("invalid parameter for the kms/existing path parameter, key_type nor key_bits arguments can be set in this mode");
    }
    const [keys, cfg] = await Promise.all([listKeys(ctx.db, ctx.mount.id), getAllConfig(ctx.db, ctx.mount.id)]);
    const key = resolveKeyIn(keys, cfg.keys, f.key_ref);
    return { pkcs8: await unsealPrivateKey(ctx.env, key), spki: base64ToBytes(key.publicKey), keyType: key.keyType, existing: key };
  }
  const spec = validateKeySpec(f.key_type, f.key_bits, f.signature_bits, true);
  const pair = await generateKeyPair(spec.keyType as "rsa" | "ec" | "ed25519", spec.keyBits);
  return { ...pair, keyType: spec.keyType, existing: null };
}

const DNS_LABEL = "[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?";
const PERMITTED_DOMAIN_RE = new RegExp(`^\\.?${DNS_LABEL}(?:\\.${DNS_LABEL})*$`);

/**
 * The CA-only request fields every CA path shares. max_path_length: -1 means "none" (Vault API
 * /pki/root/sign-intermediate); any other negative value has no meaning and would be encoded as a negative
 * pathLenConstraint, which RFC 5280 §4.2.1.9 (INTEGER (0..MAX)) does not allow.
 * permitted_dns_domains: each entry goes into an IA5String dNSName constraint (RFC 5280
 * §4.2.1.10), so it must be an ASCII DNS name, optionally with a leading "." for "subdomains only".
 */
function checkCaConstraints(f: { max_path_length: number; permitted_dns_domains: string[] }): void {
  if (f.max_path_length < -1) {
    throw badRequest(`max_path_length: must be -1 (no limit) or a path length of 0 or more, got ${f.max_path_length}`);
  }
  for (const d of f.permitted_dns_domains) {
    if (d.length > 254 || !PERMITTED_DOMAIN_RE.test(d)) {
      throw badRequest(`permitted_dns_domains: "${d}" is not a DNS domain (ASCII labels separated by dots, optionally with one leading "."; RFC 5280 §4.2.1.10)`);
    }
  }
}

/** Global AIA for a new root: templated URLs cannot name an issuer that does not exist yet. */
function rootAia(urls: Awaited<ReturnType<typeof getAllConfig>>["urls"], warnings: string[]): AiaUrls {
  const hasUrls = urls.issuing_certificates.length + urls.crl_distribution_points.length + urls.ocsp_servers.length > 0;
  if (!hasUrls) {
    warnings.push(AIA_WARNING);
    return NO_AIA;
  }
  if (urls.enable_templating) {
    warnings.push("The mount's AIA URLs are templated; they were left out of the root certificate because it is self-signed.");
    return NO_AIA;
  }
  return resolveAia("", null, urls, { path: "", aia_path: "" });
}

export interface RootOptions {
  /** root/rotate: the issuer name defaults to "next" when free. */
  rotate?: boolean;
}

export async function generateRoot(ctx: IssueContext, f: FieldValues<typeof rootFields>, has: (n: string) => boolean, opts: RootOptions = {}) {
  const format = checkFormat(f.format);
  const keyFormat = checkPrivateKeyFormat(f.private_key_format);
  checkOids("ext_key_usage_oids", f.ext_key_usage_oids);
  if (f.issuer_name !== undefined && has("issuer_name")) checkObjectName("issuer", f.issuer_name);
  if (f.key_name !== undefined && has("key_name") && f.type !== "existing") checkObjectName("key", f.key_name);
  checkCaConstraints(f);
  const warnings: string[] = [];
  const key = await caKey(ctx, f, has);
  const names = namesFrom(f);
  const cfg = await getAllConfig(ctx.db, ctx.mount.id);
  const now = Date.now();
  // A new root has no issuer to bound it (leaf_not_after_behavior is the signer's).
  const validity = issuanceValidity(ctx.mount, { now, ttl: f.ttl, notAfter: f.not_after, notBeforeDuration: f.not_before_duration, issuer: null });
  warnings.push(...validity.warnings);
  const subject = encodeName(names.subject);
  if (subject.length <= 2) {
    warnings.push("This issuer certificate was generated without a Subject; this makes it likely that issuing leaf certs with this certificate will cause TLS validation libraries to reject this certificate.");
  }
  if (f.max_path_length === 0) {
    warnings.push("Max path length of the generated certificate is zero. This certificate cannot be used to issue intermediate CA certificates.");
  }
  const aia = rootAia(cfg.urls, warnings);
  const signed = await signNewCertificate(ctx, {
    signedBy: { selfSigned: true, signature: { signatureBits: f.signature_bits, usePss: f.use_pss } },
    subject,
    subjectKey: { spki: key.spki, pkcs8: key.pkcs8, keyType: key.keyType },
    validity,
    extensions: ({ ski, issuerSki }) =>
      caExtensions({
        sans: names.sans,
        subjectEmpty: subject.length <= 2,
        ski,
        issuerSki,
        maxPathLength: f.max_path_length,
        keyUsage: f.key_usage,
        extKeyUsage: f.ext_key_usage,
        extKeyUsageOids: f.ext_key_usage_oids,
        permittedDnsDomains: f.permitted_dns_domains,
        aia,
      }),
  });
  let issuerName = f.issuer_name ?? "";
  if (opts.rotate && !has("issuer_name")) {
    const all = await listIssuers(ctx.db, ctx.mount.id);
    issuerName = all.some((i) => i.name === "next") ? "" : "next";
  }
  const newIssuerId = crypto.randomUUID();
  // The root is also a certificate of the mount (LIST certs, cert/:serial, as upstream stores it),
  // written in the same batch as its issuer and key.
  const result = await importIssuersAndKeys(ctx.db, ctx.env, ctx.mount.id, {
    issuerId: newIssuerId,
    certs: [signed.der],
    keys: key.existing ? [] : [key.pkcs8],
    issuerName,
    keyName: key.existing ? undefined : (f.key_name ?? ""),
    extra: certificateRecord(ctx, signed, { issuerId: newIssuerId, createdAt: now }),
  });
  warnings.push(...result.warnings);
  const issuerId = result.importedIssuers[0] ?? result.existingIssuers[0] ?? "";
  const issuer = result.issuers.find((i) => i.id === issuerId);
  const keyRow = result.keys.find((k) => k.id === issuer?.keyId);
  const data = {
    ...certificateResponse(signed, { format, chain: "self-signed", privateKeyFormat: f.type === "exported" ? keyFormat : null }),
    issuer_id: issuerId,
    issuer_name: issuer?.name ?? "",
    key_id: keyRow?.id ?? "",
    key_name: keyRow?.name ?? "",
  };
  return { data, warnings };
}

/** intermediate/generate/:type: a key and a CSR; the key is stored, no issuer is created. */
export async function generateIntermediate(ctx: IssueContext, f: FieldValues<typeof intermediateFields>, has: (n: string) => boolean) {
  const format = checkFormat(f.format);
  const keyFormat = checkPrivateKeyFormat(f.private_key_format);
  const warnings: string[] = [];
  if (f.key_name !== undefined && has("key_name") && f.type !== "existing") checkObjectName("key", f.key_name);
  const key = await caKey(ctx, f, has);
  const names = namesFrom(f);
  const subject = encodeName(names.subject);
  const exts: ExtensionDer[] = [];
  if (!sanIsEmpty(names.sans)) exts.push(sanExtension(names.sans, subject.length <= 2));
  if (f.add_basic_constraints) exts.push(basicConstraintsExtension(true));
  const csr = await signCsr(subject, exts, key.pkcs8, key.spki, f.signature_bits, f.use_pss);
  let keyId = key.existing?.id ?? "";
  let keyName = key.existing?.name ?? "";
  if (!key.existing) {
    const [keys, cfg] = await Promise.all([listKeys(ctx.db, ctx.mount.id), getAllConfig(ctx.db, ctx.mount.id)]);
    keyName = f.key_name ?? "";
    if (keyName !== "" && keys.some((k) => k.name === keyName)) throw badRequest("key name already in use");
    keyId = crypto.randomUUID();
    const facts = await publicKeyFacts(key.spki);
    const row: KeyRow = {
      id: keyId,
      mountId: ctx.mount.id,
      name: keyName,
      keyType: facts.type,
      keyBits: facts.bits,
      publicKey: bytesToBase64(key.spki),
      sealedPrivateKey: await sealPrivateKey(ctx.env, ctx.mount.id, keyId, key.pkcs8),
      createdAt: Date.now(),
    };
    const stmts: Stmt[] = [insertKeyStmt(ctx.db, row)];
    if (cfg.keys.default === "" || !keys.some((k) => k.id === cfg.keys.default)) stmts.push(putConfigStmt(ctx.db, ctx.mount.id, "keys", { default: keyId }));
    await runBatch(ctx.db, stmts);
  }
  const cfg = await getAllConfig(ctx.db, ctx.mount.id);
  if (cfg.urls.issuing_certificates.length + cfg.urls.crl_distribution_points.length + cfg.urls.ocsp_servers.length === 0) warnings.push(AIA_WARNING);
  const exported = f.type === "exported";
  const formattedKey = exported ? formatPrivateKey(key.pkcs8, key.keyType, format, keyFormat) : null;
  const csrText = format === "der" ? bytesToBase64(csr) : toPem("CERTIFICATE REQUEST", csr);
  const data: Record<string, unknown> = {
    csr: format === "pem_bundle" && formattedKey ? `${formattedKey.bundlePem}\n${csrText}` : csrText,
    key_id: keyId,
    key_name: keyName,
  };
  if (formattedKey) {
    data.private_key = formattedKey.private_key;
    data.private_key_type = formattedKey.private_key_type;
  }
  return { data, warnings };
}

/** OID lists from the request: a malformed OID is the client's error (400 naming the field). */
function checkOids(field: string, oids: string[]): void {
  for (const o of oids) if (!isValidOid(o)) throw badRequest(`${field}: "${o}" is not a valid OID`);
}

/**
 * root/sign-intermediate and issuer/:ref/sign-intermediate (Vault API /pki/root/sign-intermediate).
 * The notAfter is truncated to the signer's, as Vault's docs say (OpenBao's path_root.go permits
 * instead; docs/pki-privileged-signing.md).
 * With use_csr_values the CSR's subject and SAN extension are kept byte for byte, its key usages
 * replace the requested ones on top of CertSign/CRLSign, and its other extensions are copied
 * over the generated ones with the same OID (as Go's ExtraExtensions do upstream).
 */
export async function signIntermediate(ctx: IssueContext, f: FieldValues<typeof signIntermediateFields>, issuerRef: string) {
  const format = checkFormat(f.format);
  checkOids("ext_key_usage_oids", f.ext_key_usage_oids);
  checkCaConstraints(f);
  const csr = await loadCsr(f.csr);
  refuseWeakRsaCsr(csr);
  const { issuer, key, all, cfg } = await signingIssuer(ctx, issuerRef);
  const issuerFacts = await publicKeyFacts(base64ToBytes(issuer.publicKey));
  // signature_bits: 256/384/512 for RSA issuers, ignored for the others (Vault API /pki/root/sign-intermediate).
  validateKeySpec(issuerFacts.type, 0, f.signature_bits);
  const warnings: string[] = [];
  let names;
  if (f.use_csr_values) {
    names = { subject: {}, sans: emptySans() };
  } else {
    if (f.common_name === "") throw badRequest("common_name: a common name is required to sign an intermediate");
    names = namesFrom(f);
  }
  const now = Date.now();
  const validity = issuanceValidity(ctx.mount, {
    now,
    ttl: f.ttl,
    notAfter: f.not_after,
    notBeforeDuration: f.not_before_duration,
    // Vault's docs: "By default the signed certificate's notAfter is truncated to the signing
    // issuer's notAfter" (OpenBao's code permits instead; Lanyard follows the docs).
    issuer: { notAfter: issuer.notAfter, behavior: "truncate" },
  });
  warnings.push(...validity.warnings);
  const pathLen = childPathLength(f.max_path_length, issuer, warnings);
  const aia = resolveAia(issuer.id, issuer.aia, cfg.urls, cfg.cluster);
  const skid = parseSkid(f.skid);
  const subject = f.use_csr_values ? csr.subject : encodeName(names.subject);
  // Vault API key_usage: "overwritten by use_csr_values when the CSR has a key usage extension".
  const csrKeyUsage = f.use_csr_values ? csr.keyUsage : null;
  const keyUsage = csrKeyUsage !== null ? [] : [...f.key_usage];
  // The CA profile decides these; the CSR's SKI/AKI never name this signature's keys.
  const handled = new Set<string>([OID.basicConstraints, OID.keyUsage, OID_SKI, OID_AKI]);
  const extraExts: ExtensionDer[] = f.use_csr_values ? csr.extensions.filter((e) => !handled.has(e.oid)) : [];
  const signed = await signNewCertificate(ctx, {
    signedBy: { issuer, key, signature: { signatureBits: f.signature_bits, usePss: f.use_pss } },
    subject,
    subjectKey: { spki: csr.spki, pkcs8: null, keyType: csr.facts.type },
    validity,
    extensions: ({ ski, issuerSki }) => {
      const profile = caExtensions({
        sans: names.sans,
        subjectEmpty: subject.length <= 2,
        ski: skid ?? ski,
        issuerSki,
        maxPathLength: pathLen,
        keyUsage,
        additiveKeyUsage: true,
        extraKeyUsageBits: csrKeyUsage ?? [],
        extKeyUsage: f.ext_key_usage,
        extKeyUsageOids: f.ext_key_usage_oids,
        permittedDnsDomains: f.permitted_dns_domains,
        aia,
      });
      // An extension appears once (RFC 5280 §4.2): a copied CSR extension replaces ours.
      return [...profile.filter((e) => !extraExts.some((x) => x.oid === e.oid)), ...extraExts];
    },
  });
  await storeCertificate(ctx, signed, { issuerId: issuer.id, createdAt: now });
  return {
    data: certificateResponse(signed, { format, chain: { issuer, all, removeRoots: false }, privateKeyFormat: null }),
    warnings,
  };
}

/**
 * The new CA's path length: the requested one, else one below the signer's (RFC 5280 §4.2.1.9: a
 * child CA's path length must be below its signer's). A signer with path length zero signs no CA.
 */
function childPathLength(requested: number, issuer: IssuerRow, warnings: string[]): number {
  const issuerInfo = parseCertificate(certDerFromPem(issuer.certificate));
  let pathLen = requested;
  if (pathLen < 0 && issuerInfo.pathLen !== undefined) pathLen = Math.max(0, issuerInfo.pathLen - 1);
  if (issuerInfo.pathLen !== undefined && issuerInfo.pathLen === 0) {
    throw badRequest("the signing issuer has a path length of zero and cannot sign intermediate CAs");
  }
  if (pathLen === 0) {
    // Upstream's text (pathSignIntermediate), whether the zero was asked for or derived.
    warnings.push("Max path length of the signed certificate is zero. This certificate cannot be used to issue intermediate CA certificates.");
  }
  return pathLen;
}

/** skid: the caller's SKI, for cross-signing (Vault API /pki/root/sign-intermediate; RFC 5280 §4.2.1.2). */
function parseSkid(skid: string): Uint8Array | null {
  if (skid === "") return null;
  const hex = skid.replace(/[:\s-]/g, "");
  if (!/^([0-9a-fA-F]{2})+$/.test(hex)) throw badRequest("skid: must be hex-encoded bytes");
  return hexToBytes(hex);
}
