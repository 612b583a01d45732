/**
 * The `csr` request field of the signing paths (Vault API /pki/sign/:name, /pki/root/sign-intermediate,
 * /pki/sign-verbatim, /pki/external-policy/sign): PEM in, parsed CSR out, every failure a 400 that
 * names the field.
 */
import { badRequest } from "../../../core/errors";
import { decodePemBlocks } from "../x509/pem";
import { X509Error, parseCsr, type CsrInfo } from "../x509/x509";

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

/**
 * The paths without a role to set key_bits (sign-verbatim, sign-intermediate, external policy)
 * still refuse RSA keys under 2048 bits, as upstream does for every key it certifies
 * ("RSA keys < 2048 bits are unsafe and not supported").
 */
export function refuseWeakRsaCsr(csr: CsrInfo): void {
  if (csr.facts.type === "rsa" && csr.facts.bits < 2048) {
    throw badRequest(`csr: RSA keys < 2048 bits are unsafe and not supported: got ${csr.facts.bits}`);
  }
}
