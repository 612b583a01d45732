/**
 * Output encodings of issuance responses (Vault API /pki/issue/:name, `format`,
 * `private_key_format`, `remove_roots_from_chain`): pem / der / pem_bundle, private_key_format der / pkcs8, ca_chain and
 * remove_roots_from_chain.
 */
import { badRequest } from "../../../core/errors";
import { bytesToBase64 } from "../../../core/encoding";
import { traditionalPrivateKey } from "../x509/asn1";
import { caCertBase64 } from "../x509/issuer-facts";
import { toPem } from "../x509/pem";
import type { IssuerRow } from "../storage/store";

export type CertFormat = "pem" | "der" | "pem_bundle";

export function checkFormat(format: string): CertFormat {
  if (format === "pem" || format === "der" || format === "pem_bundle") return format;
  throw badRequest(`format: the "format" path parameter must be "pem", "der", or "pem_bundle"`);
}

export function checkPrivateKeyFormat(v: string): "der" | "pkcs8" {
  if (v === "" || v === "der") return "der";
  if (v === "pkcs8") return "pkcs8";
  throw badRequest(`private_key_format: must be "der" or "pkcs8", got "${v}"`);
}

export interface FormattedKey {
  private_key: string;
  private_key_type: string;
  /** PEM of the key for bundles (always the traditional encoding). */
  bundlePem: string;
}

export function formatPrivateKey(pkcs8: Uint8Array<ArrayBuffer>, keyType: string, format: CertFormat, keyFormat: "der" | "pkcs8"): FormattedKey {
  const trad = traditionalPrivateKey(pkcs8);
  const bundlePem = toPem(trad.label, trad.der);
  let private_key: string;
  if (format === "der") private_key = bytesToBase64(keyFormat === "pkcs8" ? pkcs8 : trad.der);
  else private_key = keyFormat === "pkcs8" ? toPem("PRIVATE KEY", pkcs8) : bundlePem;
  return { private_key, private_key_type: keyType, bundlePem };
}

const isSelfSigned = (i: IssuerRow) => i.subjectDer === i.issuerDer;

/** The chain a response carries: signing issuer first, up to the roots (Vault's ca_chain). */
export function responseChain(issuer: IssuerRow, all: IssuerRow[], removeRoots: boolean): IssuerRow[] {
  const chain = issuer.caChain.map((id) => all.find((i) => i.id === id)).filter((i): i is IssuerRow => i !== undefined);
  if (chain.length === 0) chain.push(issuer);
  return removeRoots ? chain.filter((i) => !isSelfSigned(i)) : chain;
}

const trimPem = (pem: string) => pem.trim();

export function encodeCert(der: Uint8Array, format: CertFormat): string {
  return format === "der" ? bytesToBase64(der) : toPem("CERTIFICATE", der);
}

export function encodeIssuer(issuer: IssuerRow, format: CertFormat): string {
  // The base64 of a CA certificate is cached by its text (x509/issuer-facts.ts).
  return format === "der" ? caCertBase64(issuer.certificate) : trimPem(issuer.certificate);
}

export interface CertOutput {
  certificate: string;
  issuing_ca: string;
  ca_chain: string[];
}

/**
 * certificate / issuing_ca / ca_chain per format. pem_bundle joins the key (issue only), the
 * leaf and the chain — except that, as Vault's docs for issue and sign say, the issuing CA is
 * left out when it is a self-signed root (upstream's code appends it anyway; Lanyard follows the
 * docs).
 */
export function certOutput(leafDer: Uint8Array, issuer: IssuerRow, chain: IssuerRow[], format: CertFormat, key: FormattedKey | null): CertOutput {
  const leaf = encodeCert(leafDer, format);
  const caChain = chain.map((i) => encodeIssuer(i, format));
  const issuingCa = encodeIssuer(issuer, format);
  if (format !== "pem_bundle") return { certificate: leaf, issuing_ca: issuingCa, ca_chain: caChain };
  const parts = [...(key ? [key.bundlePem] : []), leaf, ...(isSelfSigned(issuer) ? [] : caChain)];
  return { certificate: parts.join("\n"), issuing_ca: issuingCa, ca_chain: caChain };
}
