// A small DER reader (ITU-T X.690 §8.1: tag, length, value) for what the certificate page shows:
// subject, issuer, validity, subject alternative names and the public key (RFC 5280 §4.1,
// §4.2.1.6). Display only: the console trusts nothing it parses here.

function tlv(b, pos) {
  const tag = b[pos];
  let len = b[pos + 1];
  let hdr = 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + b[pos + 2 + i];
    hdr += n;
  }
  if (pos + hdr + len > b.length) throw new Error("truncated DER");
  return { tag, body: pos + hdr, end: pos + hdr + len, b };
}

function kids(node) {
  const out = [];
  for (let pos = node.body; pos < node.end; ) {
    const k = tlv(node.b, pos);
    out.push(k);
    pos = k.end;
  }
  return out;
}

const bytes = (n) => n.b.subarray(n.body, n.end);
const hex = (u8) => Array.from(u8, (x) => x.toString(16).padStart(2, "0")).join("");

function oid(n) {
  const v = bytes(n);
  const parts = [Math.floor(v[0] / 40), v[0] % 40];
  let acc = 0;
  for (const x of v.subarray(1)) {
    acc = acc * 128 + (x & 0x7f);
    if (!(x & 0x80)) {
      parts.push(acc);
      acc = 0;
    }
  }
  return parts.join(".");
}

function text(n) {
  const v = bytes(n);
  if (n.tag === 0x1e) return new TextDecoder("utf-16be").decode(v);
  return new TextDecoder(n.tag === 0x0c ? "utf-8" : "latin1").decode(v);
}

const ATTRS = {
  "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
  "2.5.4.11": "OU", "2.5.4.5": "serialNumber", "1.2.840.113549.1.9.1": "emailAddress",
};

function name(n) {
  const rdns = kids(n).map((set) =>
    kids(set).map((atv) => {
      const [type, value] = kids(atv);
      return `${ATTRS[oid(type)] ?? oid(type)}=${text(value)}`;
    }).join("+"),
  );
  return rdns.join(", ");
}

function time(n) {
  const s = new TextDecoder("latin1").decode(bytes(n));
  const full = n.tag === 0x17 ? (Number(s.slice(0, 2)) >= 50 ? "19" : "20") + s : s;
  return Date.UTC(+full.slice(0, 4), +full.slice(4, 6) - 1, +full.slice(6, 8), +full.slice(8, 10), +full.slice(10, 12), +full.slice(12, 14));
}

function ip(v) {
  if (v.length === 4) return Array.from(v).join(".");
  const groups = [];
  for (let i = 0; i < v.length; i += 2) groups.push(((v[i] << 8) | v[i + 1]).toString(16));
  return groups.join(":");
}

const SAN_KINDS = { 0x81: "email", 0x82: "DNS", 0x86: "URI", 0x87: "IP" };

function sans(extValue) {
  const seq = tlv(bytes(extValue), 0);
  return kids(seq).flatMap((g) => {
    const kind = SAN_KINDS[g.tag];
    if (!kind) return [];
    return [`${kind}:${kind === "IP" ? ip(bytes(g)) : new TextDecoder("latin1").decode(bytes(g))}`];
  });
}

const CURVES = { "1.2.840.10045.3.1.7": "P-256", "1.3.132.0.34": "P-384", "1.3.132.0.35": "P-521", "1.3.132.0.33": "P-224" };

function keyType(spki) {
  const [alg, bits] = kids(spki);
  const [algOid, params] = kids(alg);
  const id = oid(algOid);
  if (id === "1.2.840.113549.1.1.1") {
    const rsa = tlv(bytes(bits).subarray(1), 0);
    const mod = bytes(kids(rsa)[0]);
    const lead = mod[0] === 0 ? 1 : 0;
    return `RSA ${(mod.length - lead) * 8}`;
  }
  if (id === "1.2.840.10045.2.1") return `EC ${CURVES[oid(params)] ?? oid(params)}`;
  if (id === "1.3.101.112") return "Ed25519";
  if (id === "1.3.101.113") return "Ed448";
  return id;
}

export function pemToDer(pem) {
  const b64 = pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "");
  return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
}

/** The certificate's display facts: subject, issuer (and their DER, hex, to match issuers), validity, SANs, key. */
export function parseCertificate(pem) {
  const cert = tlv(pemToDer(pem), 0);
  const tbs = kids(cert)[0];
  const f = kids(tbs);
  const i = f[0].tag === 0xa0 ? 1 : 0;
  const [serial, , issuer, validity, subject, spki] = f.slice(i);
  const [nb, na] = kids(validity);
  const out = {
    serial: hex(bytes(serial)).replace(/(..)(?!$)/g, "$1:"),
    issuer: name(issuer),
    issuerDer: hex(bytes(issuer)),
    subject: name(subject),
    subjectDer: hex(bytes(subject)),
    notBefore: time(nb),
    notAfter: time(na),
    key: keyType(spki),
    sans: [],
  };
  const extsWrap = f.find((n) => n.tag === 0xa3);
  for (const ext of extsWrap ? kids(kids(extsWrap)[0]) : []) {
    const parts = kids(ext);
    if (oid(parts[0]) === "2.5.29.17") out.sans = sans(parts[parts.length - 1]);
  }
  return out;
}
