/**
 * Certificate metadata (cert_metadata of Vault API /pki/issue/:name, /pki/sign/:name and
 * /pki/sign-verbatim; Vault Enterprise /pki/cert-metadata/:serial): a base64 value the caller ties to a certificate's serial number.
 * It is stored sealed (src/core/db/seal.ts) in the certificate's row, bound to the mount and the
 * serial so a sealed value copied to another row does not open, together with the role name
 * the read returns.
 */
import { loadConfig } from "../../../core/config";
import { seal, unseal } from "../../../core/db/seal";
import { badRequest } from "../../../core/errors";
import type { Role } from "../policy/roles";

/** Standard base64 with padding (Go's base64.StdEncoding, which upstream decodes with). */
const BASE64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export interface MetadataRequest {
  /** The cert_metadata field when the request carried it (an empty string counts), else null. */
  value: string | null;
  /** The role in effect, or null (sign-verbatim without a role). */
  role: Role | null;
  /** sign-verbatim: metadata needs a named role (docs/pki-privileged-signing.md). */
  verbatim?: boolean;
}

/**
 * Checks a request's cert_metadata against the rules of docs/pki-privileged-signing.md "Certificate metadata"
 * before anything is signed; returns the value to store, or null when there is none.
 */
export function metadataToStore(r: MetadataRequest): string | null {
  if (r.value === null) return null;
  if (r.verbatim && !r.role) {
    throw badRequest("cert_metadata: a role must be given (sign-verbatim/:role) to store certificate metadata");
  }
  if (r.role?.no_store_metadata) {
    throw badRequest("cert_metadata: the role has no_store_metadata set, so certificate metadata cannot be stored");
  }
  // Metadata lives in the certificate's stored row; a certificate that is not stored has none.
  if (r.role?.no_store) {
    throw badRequest("cert_metadata: the role has no_store set; certificate metadata is kept with the stored certificate, so it cannot be stored");
  }
  // Go's StdEncoding decoder, which upstream uses, skips line breaks.
  const value = r.value.replace(/[\r\n]/g, "");
  if (!BASE64_RE.test(value)) throw badRequest("cert_metadata: must be base64-encoded (standard alphabet, with padding)");
  return value;
}

const context = (mountId: string, serial: string) => `pki-cert-metadata:${mountId}:${serial}`;

interface SealedShape {
  role: string;
  cert_metadata: string;
}

export async function sealMetadata(env: Env, mountId: string, serial: string, role: string, value: string): Promise<string> {
  const body: SealedShape = { role, cert_metadata: value };
  return seal(loadConfig(env).seal, JSON.stringify(body), context(mountId, serial));
}

export async function openMetadata(env: Env, mountId: string, serial: string, sealed: string): Promise<SealedShape> {
  const parsed = JSON.parse(await unseal(loadConfig(env).seal, sealed, context(mountId, serial))) as Partial<SealedShape>;
  return { role: parsed.role ?? "", cert_metadata: parsed.cert_metadata ?? "" };
}
