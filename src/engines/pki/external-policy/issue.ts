/**
 * external-policy/issue, /sign and /sign-intermediate (Vault API
 * /pki/external-policy/issue; docs/pki-external-policy.md). Only format, key_type, key_bits, private_key_format,
 * remove_roots_from_chain and csr are read here; the caller's whole body goes to the policy
 * service, which decides. Private keys never leave: for issue the key is generated here and the
 * service gets a CSR for it (with an empty subject, see docs/pki-external-policy.md).
 */
import { formatGoDuration } from "../../../core/duration";
import { ApiError, badRequest } from "../../../core/errors";
import { defineFields, parseFields } from "../../../core/fields";
import { formatField, keyGenFields, privateKeyFormatField, removeRootsField } from "../fields";
import { effectiveTtls } from "../../../core/mount-store";
import { base64ToBytes } from "../../../core/encoding";
import { encodeName, publicKeyFacts } from "../x509/asn1";
import { buildCiepsRequest, callPolicyService, usableConfig, type CiepsResponse, type IssuanceMode } from "./client";
import { checkTemplateKind, readTemplate, signatureChoice, templateExtensions, templateValidity } from "./template";
import { checkFormat, checkPrivateKeyFormat } from "../issuance/format";
import { certDerFromPem } from "../ca/issuers";
import { loadCsr, refuseWeakRsaCsr } from "../issuance/csr";
import { certificateResponse, signNewCertificate, signingIssuerFrom, storeCertificate, type CertificateResponse, type IssueContext, type SubjectKey } from "../issuance/pipeline";
import { validateKeySpec } from "../x509/keytypes";
import { toPem } from "../x509/pem";
import { resolveAia, type AiaUrls } from "../issuance/profile";
import { shardAia, shardCountFor } from "../revocation/crl-shards";
import { loadIssuanceState, putConfigStmt, runBatch, type IssuanceState, type IssuerRow, type Stmt } from "../storage/store";
import { generateKeyPair, parseCertificate, signCsr } from "../x509/x509";

const common = { ...formatField, ...privateKeyFormatField, ...removeRootsField } as const;

/** What Lanyard itself reads from an issue body; everything else is the service's business. */
export const externalIssueFields = defineFields({
  ...common,
  ...keyGenFields,
});

export const externalSignFields = defineFields({
  ...common,
  csr: { type: "string", description: "PEM certificate request.", required: true },
});

export interface ExternalPolicyRequest {
  mode: IssuanceMode;
  /** The optional `:policy` path segment ("" when absent). */
  policy: string;
  /** The issuer named in the path (per-issuer paths); null on the plain paths. */
  pathIssuerRef: string | null;
  /** The caller's body, unparsed. */
  body: Record<string, unknown>;
  /** The namespace path ("" for the root namespace). */
  ns: string;
}

/** The certified key (for issue, its pkcs8 is generated here and stays here) and its CSR. */
interface KeyMaterial extends SubjectKey {
  csrPem: string;
}

async function keyMaterial(mode: IssuanceMode, body: Record<string, unknown>): Promise<{ key: KeyMaterial; format: ReturnType<typeof checkFormat>; keyFormat: "der" | "pkcs8"; removeRoots: boolean }> {
  if (mode === "issue") {
    const f = parseFields(externalIssueFields, body).values;
    const format = checkFormat(f.format);
    const keyFormat = checkPrivateKeyFormat(f.private_key_format);
    const spec = validateKeySpec(f.key_type, f.key_bits, 0, true);
    const keyType = spec.keyType as "rsa" | "ec" | "ed25519";
    const pair = await generateKeyPair(keyType, spec.keyBits);
    // The service gets a CSR proving the key, with an empty subject and no extensions: the
    // caller's wishes travel as the body's other values (docs/pki-external-policy.md).
    const csr = await signCsr(encodeName({}), [], pair.pkcs8, pair.spki);
    return { key: { spki: pair.spki, csrPem: toPem("CERTIFICATE REQUEST", csr), pkcs8: pair.pkcs8, keyType }, format, keyFormat, removeRoots: f.remove_roots_from_chain };
  }
  const f = parseFields(externalSignFields, body).values;
  const format = checkFormat(f.format);
  const keyFormat = checkPrivateKeyFormat(f.private_key_format);
  const csr = await loadCsr(f.csr);
  refuseWeakRsaCsr(csr);
  return { key: { spki: csr.spki, csrPem: f.csr, pkcs8: null, keyType: csr.facts.type }, format, keyFormat, removeRoots: f.remove_roots_from_chain };
}

/** The issuer the request names: the path's, else the mount's default (null when none is set). */
function requestedIssuer(state: IssuanceState, pathRef: string | null): IssuerRow | null {
  if (pathRef !== null) return signingIssuerFrom(state, pathRef).issuer;
  if (state.issuers.length === 0) throw badRequest("could not fetch the CA certificate (was one set?): this mount has no issuers");
  return state.issuers.find((i) => i.id === state.config.issuers.default) ?? null;
}

const sameBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i]);

/** Records a well-formed answer (config/external-policy external_service_validated, last_successful_request). */
function statusStmt(ctx: IssueContext, state: IssuanceState, now: number): Stmt {
  return putConfigStmt(ctx.db, ctx.mount.id, "external_policy_status", {
    validated_for: state.config.external_policy.external_service_last_updated,
    last_successful_request: new Date(now).toISOString(),
  });
}

/** The signing issuer: the path's wins on per-issuer paths, else the answer's issuer_ref (Vault's CIEPS protocol). */
function pickIssuer(state: IssuanceState, r: ExternalPolicyRequest, requested: IssuerRow | null, resp: CiepsResponse, warnings: string[]) {
  if (r.pathIssuerRef !== null) {
    const chosen = signingIssuerFrom(state, r.pathIssuerRef);
    if (resp.issuer_ref !== "") {
      let named: IssuerRow | null = null;
      try {
        named = signingIssuerFrom(state, resp.issuer_ref).issuer;
      } catch {
        named = null;
      }
      if (named?.id !== chosen.issuer.id) {
        warnings.push(`the policy service named issuer_ref "${resp.issuer_ref}"; the issuer in the request path (${chosen.issuer.id}) signed instead`);
      }
    }
    return chosen;
  }
  const ref = resp.issuer_ref !== "" ? resp.issuer_ref : requested?.id;
  if (!ref) throw new ApiError(502, "external policy service: the answer names no issuer_ref and the mount has no default issuer");
  try {
    return signingIssuerFrom(state, ref);
  } catch (e) {
    // The service chose the issuer, so an unusable one is the service's error.
    if (e instanceof ApiError && resp.issuer_ref !== "") throw new ApiError(502, `external policy service: issuer_ref "${resp.issuer_ref}": ${e.messages.join("; ")}`);
    throw e;
  }
}

export async function issueWithExternalPolicy(ctx: IssueContext, r: ExternalPolicyRequest): Promise<{ data: CertificateResponse; warnings: string[] }> {
  const state = await loadIssuanceState(ctx.db, ctx.mount.id, null);
  const cfg = state.config.external_policy;
  const url = usableConfig(ctx.env, cfg);
  const requested = requestedIssuer(state, r.pathIssuerRef);
  const { key, format, keyFormat, removeRoots } = await keyMaterial(r.mode, r.body);
  const aia: AiaUrls | null = requested ? resolveAia(requested.id, requested.aia, state.config.urls, state.config.cluster) : null;
  const { defaultTtl, maxTtl } = effectiveTtls(ctx.mount);

  const request = buildCiepsRequest({
    mode: r.mode,
    policy: r.policy,
    mount: ctx.mount.path,
    ns: r.ns,
    userValues: { ...r.body, csr: key.csrPem },
    issuer: requested
      ? { name: requested.name, id: requested.id, certificate: requested.certificate.trim(), leafNotAfterBehavior: requested.leafNotAfterBehavior }
      : null,
    aia,
    mountDefaultTtl: formatGoDuration(defaultTtl),
    mountMaxTtl: formatGoDuration(maxTtl),
  });
  const resp = await callPolicyService(url, cfg.timeout, request);
  const now = Date.now();

  const warnings = [...resp.warnings];
  if (resp.error !== "") {
    if (resp.certificate === "") {
      await runBatch(ctx.db, [statusStmt(ctx, state, now)]);
      throw badRequest(`the external policy service refused the request: ${resp.error}`);
    }
    // CIEPS: with both a certificate and an error, the error becomes a warning and the cert is issued.
    warnings.push(resp.error);
  }
  if (resp.certificate === "") throw new ApiError(502, "external policy service: the answer has neither a certificate nor an error");

  const { issuer, key: issuerKey, all } = pickIssuer(state, r, requested, resp, warnings);
  const template = readTemplate(resp.certificate);
  checkTemplateKind(template, r.mode);
  if (r.mode === "ica" && parseCertificate(certDerFromPem(issuer.certificate)).pathLen === 0) {
    throw badRequest("the signing issuer has a path length of zero and cannot sign intermediate CAs");
  }
  const validity = templateValidity(template, issuer.notAfter, r.mode === "ica" ? "truncate" : issuer.leafNotAfterBehavior, now);
  warnings.push(...validity.warnings);
  const keyReplaced = !sameBytes(template.spki, key.spki);
  if (keyReplaced) warnings.push("the policy service's template carried another public key; the certificate binds the requester's key");

  // The template's signature algorithm, where the issuer's key allows it (template.ts).
  const choice = signatureChoice(template, (await publicKeyFacts(base64ToBytes(issuer.publicKey))).type);
  const issuerAia = resolveAia(issuer.id, issuer.aia, state.config.urls, state.config.cluster);
  const signed = await signNewCertificate(ctx, {
    signedBy: { issuer, key: issuerKey, signature: choice },
    subject: template.subject,
    subjectKey: key,
    validity,
    // The AKI is the issuer's own SKI (issuerKeyId), so leaves of an imported CA whose SKI is
    // not the SHA-1 of its key still chain (RFC 5280 §4.2.1.1).
    extensions: ({ ski, issuerSki, crlShard }) => templateExtensions(template, { mode: r.mode, ski, keyReplaced, issuerSki, aia: shardAia(issuerAia, crlShard) }),
    // The template's own CDP is always replaced (template.ts), so a leaf names its shard.
    crlShards: shardCountFor(state.config.crl.shard_count, issuerAia, { ca: r.mode === "ica" }),
  });

  // The status row goes in the same batch as the certificate (or alone when it is not stored).
  const status = [statusStmt(ctx, state, now)];
  if (resp.store_certificate) {
    await storeCertificate(ctx, signed, { issuerId: issuer.id, createdAt: now }, status);
    if (resp.generate_lease) warnings.push("generate_lease: this service does not create leases for certificates; the certificate was stored without one");
  } else {
    await runBatch(ctx.db, status);
  }

  const data = certificateResponse(signed, { format, chain: { issuer, all, removeRoots }, privateKeyFormat: keyFormat });
  return { data, warnings };
}
