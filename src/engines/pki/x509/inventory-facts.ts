/**
 * The facts of a certificate that the inventory lists and filters on (docs/pki-inventory.md):
 * subject common name, subject alternative names, notBefore. Read with the DER reader, not the
 * generic ASN.1 library, because every issuance computes them for its pki_certs row and the
 * backfill of older rows runs them by the hundred per cron run.
 *
 * Certificate layout (RFC 5280 §4.1): SEQUENCE { tbsCertificate, signatureAlgorithm, signature };
 * tbsCertificate: [0] version?, serialNumber, signature, issuer, validity, subject,
 * subjectPublicKeyInfo, [1] issuerUID?, [2] subjectUID?, [3] extensions?.
 */
import { formatIp } from "../../../core/ip";
import { OID, nameAttributes, parseGeneralNames } from "./asn1";
import { DerError, TAG, children, decodeOid, expectTag, parse, type Node } from "./der";

export interface InventoryFacts {
  /** The last commonName attribute of the subject ("" when none), as OpenSSL's `-subject` shows it. */
  commonName: string;
  /** Every DNS name, email address, IP address and URI of the SAN extension, in its order. */
  sans: string[];
  /** notBefore, Unix seconds. */
  notBefore: number;
}

const ASCII = new TextDecoder();

/** UTCTime (YYMMDDHHMMSSZ) or GeneralizedTime (YYYYMMDDHHMMSSZ), RFC 5280 §4.1.2.5. */
function decodeTime(n: Node): number {
  const s = ASCII.decode(n.content);
  const m = n.tag === TAG.UTC_TIME ? /^(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$/.exec(s) : /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$/.exec(s);
  if (!m) throw new DerError("malformed validity time");
  const [, y = "", mo = "", d = "", h = "", mi = "", se = ""] = m;
  let year = Number(y);
  // RFC 5280 §4.1.2.5.1: UTCTime YY ≥ 50 is 19YY, else 20YY.
  if (n.tag === TAG.UTC_TIME) year += year >= 50 ? 1900 : 2000;
  return Date.UTC(year, Number(mo) - 1, Number(d), Number(h), Number(mi), Number(se)) / 1000;
}

function sanValues(extnValue: Uint8Array<ArrayBuffer>): string[] {
  const g = parseGeneralNames(extnValue);
  return [...g.dns, ...g.email, ...g.ip.map((ip) => formatIp(ip)), ...g.uri];
}

/** The inventory facts of a DER certificate. Throws DerError when it is not one. */
export function inventoryFacts(der: Uint8Array<ArrayBuffer>): InventoryFacts {
  const [tbs] = children(expectTag(parse(der), TAG.SEQUENCE, "certificate"));
  const fields = children(expectTag(tbs, TAG.SEQUENCE, "tbsCertificate"));
  const at = fields[0]?.tag === 0xa0 ? 1 : 0;
  const validity = children(expectTag(fields[at + 3], TAG.SEQUENCE, "validity"));
  const subject = expectTag(fields[at + 4], TAG.SEQUENCE, "subject");
  const notBeforeNode = validity[0];
  if (!notBeforeNode) throw new DerError("malformed validity");
  let commonName = "";
  for (const a of nameAttributes(subject.raw)) if (a.type === OID.commonName) commonName = a.value;
  let sans: string[] = [];
  const extsWrapper = fields.slice(at + 6).find((f) => f.tag === 0xa3);
  if (extsWrapper) {
    for (const ext of children(expectTag(children(extsWrapper)[0], TAG.SEQUENCE, "extensions"))) {
      const parts = children(ext);
      const id = parts[0];
      const value = parts[parts.length - 1];
      if (!id || !value || decodeOid(id.content) !== OID.subjectAltName) continue;
      sans = sanValues(expectTag(value, TAG.OCTET_STRING, "extnValue").content);
    }
  }
  return { commonName, sans, notBefore: decodeTime(notBeforeNode) };
}
