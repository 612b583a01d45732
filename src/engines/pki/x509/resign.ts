/**
 * DER surgery on existing certificates (RFC 5280 §4.1): read a TBSCertificate into its parts,
 * swap the parts a re-signature changes (signature algorithm, issuer, some extensions) and
 * re-encode it, leaving every other byte as it was. Used by sign-self-issued (Vault API
 * /pki/root/sign-self-issued: "Only authority key ID, issuer DN and, if set, distribution points are
 * changed"), and to read an issuer's own Subject Key Identifier. Pure functions over bytes.
 */
import type { ExtensionDer } from "./asn1";
import { DerError, TAG, bool, children, concat, ctxCons, decodeOid, expectTag, octets, oid, parse, seq, type Node } from "./der";

export const OID_SKI = "2.5.29.14";
export const OID_AKI = "2.5.29.35";

/** One extension of a parsed certificate: its OID and its complete, untouched encoding. */
export interface RawExtension {
  oid: string;
  raw: Uint8Array<ArrayBuffer>;
}

/** The fields of a TBSCertificate, each as its original TLV. */
export interface TbsParts {
  /** `[0] EXPLICIT Version`, absent for v1. */
  version: Node | null;
  serial: Node;
  signature: Node;
  issuer: Node;
  validity: Node;
  subject: Node;
  spki: Node;
  /** issuerUniqueID `[1]` / subjectUniqueID `[2]` (RFC 5280 §4.1.2.8), kept verbatim. */
  uniqueIds: Node[];
  extensions: RawExtension[];
}

/** Splits a DER Certificate into its TBSCertificate parts. Throws DerError on malformed input. */
export function readTbs(certDer: Uint8Array<ArrayBuffer>): TbsParts {
  const [tbsNode, sigAlg, sigValue] = children(expectTag(parse(certDer), TAG.SEQUENCE, "certificate"));
  expectTag(sigAlg, TAG.SEQUENCE, "signature algorithm");
  expectTag(sigValue, TAG.BIT_STRING, "signature");
  const items = children(expectTag(tbsNode, TAG.SEQUENCE, "TBSCertificate"));
  let i = 0;
  const version = items[0]?.tag === 0xa0 ? (items[i++] ?? null) : null;
  const serial = expectTag(items[i++], TAG.INTEGER, "serial number");
  const signature = expectTag(items[i++], TAG.SEQUENCE, "TBS signature algorithm");
  const issuer = expectTag(items[i++], TAG.SEQUENCE, "issuer");
  const validity = expectTag(items[i++], TAG.SEQUENCE, "validity");
  const subject = expectTag(items[i++], TAG.SEQUENCE, "subject");
  const spki = expectTag(items[i++], TAG.SEQUENCE, "subject public key info");
  const uniqueIds: Node[] = [];
  const extensions: RawExtension[] = [];
  for (const item of items.slice(i)) {
    if (item.tag === 0x81 || item.tag === 0xa1 || item.tag === 0x82 || item.tag === 0xa2) {
      uniqueIds.push(item);
    } else if (item.tag === 0xa3) {
      const list = children(item)[0];
      for (const ext of children(expectTag(list, TAG.SEQUENCE, "extensions"))) {
        const id = expectTag(children(expectTag(ext, TAG.SEQUENCE, "extension"))[0], TAG.OID, "extension id");
        extensions.push({ oid: decodeOid(id.content), raw: ext.raw });
      }
    } else {
      throw new DerError("malformed TBSCertificate: unexpected field");
    }
  }
  return { version, serial, signature, issuer, validity, subject, spki, uniqueIds, extensions };
}

/** The DER of one Extension (RFC 5280 §4.1): critical is written only when true (DER DEFAULT). */
export function encodeExtension(e: ExtensionDer): RawExtension {
  const raw = e.critical ? seq(oid(e.oid), bool(true), octets(e.value)) : seq(oid(e.oid), octets(e.value));
  return { oid: e.oid, raw };
}

/**
 * `existing` with each of `replacements` put in place of the extension with its OID, or
 * appended when there is none (an extension appears at most once, RFC 5280 §4.2).
 */
export function replaceExtensions(existing: RawExtension[], replacements: ExtensionDer[]): RawExtension[] {
  const out = [...existing];
  for (const r of replacements) {
    const enc = encodeExtension(r);
    const at = out.findIndex((e) => e.oid === r.oid);
    if (at >= 0) out[at] = enc;
    else out.push(enc);
  }
  return out;
}

export interface TbsChanges {
  /** The signer's AlgorithmIdentifier (RFC 5280 §4.1.2.3: equal to the outer one). */
  algorithm: Uint8Array<ArrayBuffer>;
  /** The signer's subject, as DER. */
  issuer: Uint8Array<ArrayBuffer>;
  extensions: RawExtension[];
}

/** Re-encodes a TBSCertificate with the given changes; every other field keeps its bytes. */
export function encodeTbs(parts: TbsParts, changes: TbsChanges): Uint8Array<ArrayBuffer> {
  const fields: Uint8Array[] = [];
  if (parts.version) fields.push(parts.version.raw);
  fields.push(parts.serial.raw, changes.algorithm, changes.issuer, parts.validity.raw, parts.subject.raw, parts.spki.raw);
  for (const u of parts.uniqueIds) fields.push(u.raw);
  if (changes.extensions.length > 0) fields.push(ctxCons(3, seq(concat(changes.extensions.map((e) => e.raw)))));
  return seq(...fields);
}

/**
 * The keyIdentifier of a certificate's Subject Key Identifier extension (RFC 5280 §4.2.1.2), or
 * null without one. An issuer's AKI must carry this exact value, whatever method made it, or
 * chain builders that match AKI to SKI (OpenSSL) will not find the issuer.
 */
export function subjectKeyIdOf(certDer: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> | null {
  let parts: TbsParts;
  try {
    parts = readTbs(certDer);
  } catch {
    return null;
  }
  const ext = parts.extensions.find((e) => e.oid === OID_SKI);
  if (!ext) return null;
  try {
    const items = children(parse(ext.raw));
    const value = items[items.length - 1];
    return expectTag(parse(expectTag(value, TAG.OCTET_STRING, "SKI").content), TAG.OCTET_STRING, "key identifier").content.slice();
  } catch {
    return null;
  }
}
