// In-runtime cost of the CRL builder (npm run bench:crl → scripts/bench-crl.mjs), measured inside
// workerd with no I/O: for n revoked entries, stream them into the revoked list (crl.ts), encode
// the TBSCertList, sign it with the issuer key (EC P-256 or RSA-2048), assemble the
// CertificateList and base64 it for storage, exactly as crl-rebuild.ts does after reading D1.
// Local workerd advances the clock during CPU work, so these are CPU times (production timers
// freeze between I/O).
import "reflect-metadata";
import { publicKeyFacts } from "../src/engines/pki/x509/asn1";
import { RevokedListWriter, algorithmSpec, assembleCertificateList, ecdsaSignatureDer, encodeTbsCertList } from "../src/engines/pki/x509/crl";
import { bytesToBase64 } from "../src/core/encoding";
import { encodeName } from "../src/engines/pki/x509/asn1";
import { generateKeyPair, importSigner } from "../src/engines/pki/x509/x509";

function serials(n: number): string[] {
  const out: string[] = [];
  const b = new Uint8Array(20);
  for (let i = 0; i < n; i++) {
    crypto.getRandomValues(b);
    b[0] = (b[0] ?? 0) & 0x7f;
    out.push(Array.from(b, (x) => x.toString(16).padStart(2, "0")).join(":"));
  }
  return out;
}

export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const n = Number(url.searchParams.get("n") ?? "1000");
    const alg = url.searchParams.get("alg") === "rsa" ? "rsa" : "ec";
    const pair = await generateKeyPair(alg, alg === "rsa" ? 2048 : 256);
    const signer = await importSigner(pair.pkcs8, pair.spki);
    const facts = await publicKeyFacts(pair.spki);
    const spec = algorithmSpec(alg === "rsa" ? "SHA256WithRSA" : "ECDSAWithSHA256");
    const list = serials(n);
    const now = Math.floor(Date.now() / 1000);
    const t0 = performance.now();
    const writer = new RevokedListWriter();
    for (let i = 0; i < list.length; i++) writer.add(list[i] ?? "", now - (i % 86400));
    const t1 = performance.now();
    const thisUpdate = new Date(now * 1000);
    const tbs = encodeTbsCertList({
      algorithm: spec,
      issuer: encodeName({ commonName: "Bench Root" }),
      thisUpdate,
      nextUpdate: new Date(thisUpdate.getTime() + 72 * 3600 * 1000),
      revoked: writer.finish(),
      authorityKeyId: facts.ski,
      crlNumber: 7,
    });
    const t2 = performance.now();
    const raw = new Uint8Array(await crypto.subtle.sign(signer.algorithm, signer.key, tbs));
    const der = assembleCertificateList(tbs, spec, alg === "ec" ? ecdsaSignatureDer(raw) : raw);
    const t3 = performance.now();
    const b64 = bytesToBase64(der);
    const t4 = performance.now();
    return Response.json({
      n,
      alg,
      entriesMs: t1 - t0,
      tbsMs: t2 - t1,
      signMs: t3 - t2,
      base64Ms: t4 - t3,
      totalMs: t4 - t0,
      derBytes: der.length,
      base64Chars: b64.length,
    });
  },
};
