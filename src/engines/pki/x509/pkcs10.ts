/**
 * PKCS#10 certificate requests (RFC 2986) read with the hand-written DER reader, their
 * self-signature verified through WebCrypto (signature.ts). This was @peculiar/x509's job; its
 * schema parser cost more than a millisecond per request, several times the rest of a sign.
 *
 * Invariants, each kept from the library path it replaces (and tested in
 * test/unit/pki-pkcs10.test.ts and the pki-* integration files):
 * - nothing after the outer SEQUENCE ("trailing data after the CSR"), nor inside any SEQUENCE
 *   this module reads;
 * - the public key is read (type, size) and its size checked before the signature, so the
 *   client learns the real reason rather than "signature is invalid";
 * - the signature must verify over the CertificationRequestInfo exactly as sent;
 * - extensions come from the first extensionRequest attribute (RFC 2985 §5.4.2); the values of
 *   the extensions the engine reads or copies (SAN, key usage, basic constraints, EKU, ...) must
 *   be well-formed DER, else "malformed extension".
 * Every failure is an X509Error whose message the caller puts after "csr: ".
 */
import { OID, parseGeneralNames, publicKeyFacts, type ExtensionDer, type PublicKeyFacts, type SanSpec } from "./asn1";
import { DerError, TAG, children, decodeOid, expectTag, parse, readNode, type Node } from "./der";
import { X509Error } from "./errors";
import { unsupportedKeySize } from "./keytypes";
import { verifySignature } from "./signature";

export interface CsrInfo {
  subject: Uint8Array<ArrayBuffer>;
  spki: Uint8Array<ArrayBuffer>;
  facts: PublicKeyFacts;
  sans: SanSpec | null;
  /** Extensions requested in the CSR, as DER (copied by sign-intermediate with use_csr_values). */
  extensions: ExtensionDer[];
  isCa: boolean;
  /** Key usage bits requested in the CSR (RFC 5280 §4.2.1.3), or null without the extension. */
  keyUsage: number[] | null;
}

const EXTENSION_REQUEST = "1.2.840.113549.1.9.14";

/**
 * Extensions whose values a CA reads or copies into certificates (the ones @peculiar/x509
 * parsed with a schema): their DER is checked throughout, so a malformed one is refused here
 * rather than signed.
 */
const CHECKED_EXTENSIONS = new Set<string>([
  OID.subjectAltName,
  OID.keyUsage,
  OID.basicConstraints,
  OID.extKeyUsage,
  OID.nameConstraints,
  OID.crlDistributionPoints,
  OID.certificatePolicies,
  OID.freshestCrl,
  OID.authorityInfoAccess,
  "2.5.29.14", // subjectKeyIdentifier
  "2.5.29.35", // authorityKeyIdentifier
  "2.5.29.18", // issuerAltName
  "2.5.29.36", // policyConstraints
  "2.5.29.54", // inhibitAnyPolicy
]);

/** Walks a DER value to its leaves: every constructed node's content must be whole TLVs. */
function checkDer(node: Node, depth = 0): void {
  if (depth > 32) throw new DerError("nested too deeply");
  if ((node.tag & 0x20) === 0) return;
  for (const child of children(node)) checkDer(child, depth + 1);
}

function bitsOf(bitStringContent: Uint8Array): number[] {
  const out: number[] = [];
  for (let i = 1; i < bitStringContent.length; i++) {
    for (let b = 0; b < 8; b++) if ((bitStringContent[i] ?? 0) & (0x80 >> b)) out.push((i - 1) * 8 + b);
  }
  return out;
}

interface RawCsr {
  info: Node;
  subject: Node;
  spki: Node;
  extensions: ExtensionDer[];
  algorithm: Node;
  signature: Uint8Array<ArrayBuffer>;
}

/** RFC 2986 §4: the structure, without looking inside the key or the extension values. */
function readCsr(der: Uint8Array<ArrayBuffer>): RawCsr {
  const [infoNode, algNode, sigNode, ...rest] = children(expectTag(parse(der), TAG.SEQUENCE, "certificate request"));
  if (rest.length > 0) throw new DerError("extra fields in the certificate request");
  const info = expectTag(infoNode, TAG.SEQUENCE, "certification request info");
  const algorithm = expectTag(algNode, TAG.SEQUENCE, "signature algorithm");
  const signature = expectTag(sigNode, TAG.BIT_STRING, "signature").content;
  const [version, subjectNode, spkiNode, attributes, ...more] = children(info);
  expectTag(version, TAG.INTEGER, "version");
  const subject = expectTag(subjectNode, TAG.SEQUENCE, "subject");
  // Name (RFC 5280 §4.1.2.4): SEQUENCE OF SET OF SEQUENCE { OID, value }.
  for (const rdn of children(subject)) {
    for (const atv of children(expectTag(rdn, TAG.SET, "subject"))) {
      const [type, value, ...extra] = children(expectTag(atv, TAG.SEQUENCE, "subject attribute"));
      expectTag(type, TAG.OID, "subject attribute type");
      if (!value || extra.length > 0) throw new DerError("malformed subject attribute");
    }
  }
  const spki = expectTag(spkiNode, TAG.SEQUENCE, "subject public key info");
  // attributes [0] IMPLICIT SET OF Attribute: required by RFC 2986, absent in some encoders.
  if (attributes && attributes.tag !== 0xa0) throw new DerError("malformed attributes");
  if (more.length > 0) throw new DerError("extra fields in the certification request info");
  let extensions: ExtensionDer[] | null = null;
  for (const attr of attributes ? children(attributes) : []) {
    const [type, values] = children(expectTag(attr, TAG.SEQUENCE, "attribute"));
    const id = decodeOid(expectTag(type, TAG.OID, "attribute type").content);
    const list = children(expectTag(values, TAG.SET, "attribute values"));
    if (id !== EXTENSION_REQUEST || extensions !== null) continue;
    extensions = list[0] ? readExtensions(list[0]) : [];
  }
  return { info, subject, spki, extensions: extensions ?? [], algorithm, signature };
}

/** Extensions ::= SEQUENCE OF SEQUENCE { extnID, critical BOOLEAN DEFAULT FALSE, extnValue }. */
function readExtensions(value: Node): ExtensionDer[] {
  const out: ExtensionDer[] = [];
  try {
    for (const ext of children(expectTag(value, TAG.SEQUENCE, "extensions"))) {
      const parts = children(expectTag(ext, TAG.SEQUENCE, "extension"));
      const id = decodeOid(expectTag(parts[0], TAG.OID, "extension id").content);
      let i = 1;
      let critical = false;
      if (parts[i]?.tag === TAG.BOOLEAN) critical = (parts[i++]?.content[0] ?? 0) !== 0;
      const extnValue = expectTag(parts[i++], TAG.OCTET_STRING, "extension value").content;
      if (i !== parts.length) throw new DerError("malformed extension");
      if (CHECKED_EXTENSIONS.has(id)) checkDer(parse(extnValue));
      out.push({ oid: id, critical, value: extnValue });
    }
  } catch (e) {
    throw new X509Error(`certificate request has a malformed extension: ${e instanceof Error ? e.message : String(e)}`);
  }
  return out;
}

/** Parses a DER PKCS#10 request and verifies its self-signature; the message says what is wrong. */
export async function parseCsr(der: Uint8Array<ArrayBuffer>): Promise<CsrInfo> {
  let end: number;
  try {
    end = readNode(der).next;
  } catch (e) {
    throw new X509Error(`certificate request could not be parsed: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (end !== der.length) throw new X509Error("trailing data after the CSR");
  let raw: RawCsr;
  try {
    raw = readCsr(der);
  } catch (e) {
    if (e instanceof X509Error) throw e;
    throw new X509Error(`certificate request could not be parsed: ${e instanceof Error ? e.message : String(e)}`);
  }
  const spki = raw.spki.raw;
  let facts: PublicKeyFacts;
  try {
    facts = await publicKeyFacts(spki);
  } catch (e) {
    throw new X509Error(`certificate request: ${e instanceof DerError ? e.message : "unsupported public key"}`);
  }
  // Before verifying: WebCrypto cannot import the key, and would report a bad signature.
  const sizeProblem = unsupportedKeySize(facts);
  if (sizeProblem) throw new X509Error(sizeProblem);
  if (!(await verifySignature(raw.info.raw, raw.algorithm, raw.signature, spki, facts))) {
    throw new X509Error("certificate request signature is invalid");
  }
  let sans: SanSpec | null = null;
  let isCa = false;
  let keyUsage: number[] | null = null;
  try {
    for (const ext of raw.extensions) {
      if (ext.oid === OID.subjectAltName) sans = parseGeneralNames(ext.value);
      if (ext.oid === OID.keyUsage) keyUsage = bitsOf(expectTag(parse(ext.value), TAG.BIT_STRING, "key usage").content);
      if (ext.oid === OID.basicConstraints) {
        const first = children(expectTag(parse(ext.value), TAG.SEQUENCE, "basic constraints"))[0];
        isCa = first !== undefined && first.tag === TAG.BOOLEAN && (first.content[0] ?? 0) !== 0;
      }
    }
  } catch (e) {
    // A malformed extension is the client's error, not ours.
    throw new X509Error(`certificate request has a malformed extension: ${e instanceof Error ? e.message : String(e)}`);
  }
  return { subject: raw.subject.raw, spki, facts, sans, extensions: raw.extensions, isCa, keyUsage };
}
