// In-runtime CPU cost of one EC P-256 leaf (npm run bench), measured inside workerd:
//   floor:   generate a P-256 key pair, export it, one ECDSA-SHA256 signature (the WebCrypto floor)
//   engine:  the engine's own path without I/O: key pair, SKI, subject, extensions, the
//            hand-encoded TBSCertificate, signature, PEM of certificate and key
//   library: the same with @peculiar/x509's generator instead of the hand-encoded TBS
// Local workerd advances the clock during CPU work, so means over many iterations are
// meaningful here (they would not be in production, where timers freeze between I/O).
import "reflect-metadata";
import { encodeName, publicKeyFacts, traditionalPrivateKey } from "../src/engines/pki/x509/asn1";
import { toPem } from "../src/engines/pki/x509/pem";
import { leafExtensions, NO_AIA } from "../src/engines/pki/issuance/profile";
import { defaultRole } from "../src/engines/pki/policy/roles";
import { generateKeyPair, importSigner, signCertificate } from "../src/engines/pki/x509/x509";

async function time(n: number, fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await fn();
  return (performance.now() - t0) / n;
}

export default {
  async fetch(request: Request): Promise<Response> {
    const n = Number(new URL(request.url).searchParams.get("n") ?? "500");
    const data = crypto.getRandomValues(new Uint8Array(400));
    const ca = await generateKeyPair("ec", 256);
    const signer = await importSigner(ca.pkcs8, ca.spki);
    const caFacts = await publicKeyFacts(ca.spki);
    const caName = encodeName({ commonName: "Bench Root" });
    const role = { ...defaultRole(), key_type: "ec", key_bits: 256 };
    const floor = await time(n, async () => {
      const pair = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])) as CryptoKeyPair;
      await crypto.subtle.exportKey("spki", pair.publicKey);
      await crypto.subtle.exportKey("pkcs8", pair.privateKey);
      await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, signer.key, data);
    });
    const leaf = (encoder: "direct" | "library") => async () => {
      const pair = await generateKeyPair("ec", 256);
      const facts = await publicKeyFacts(pair.spki);
      const der = await signCertificate(
        {
          serialHex: "3a5f00112233445566778899aabbccddeeff0011",
          subject: encodeName({ commonName: "leaf.bench.example" }),
          issuer: caName,
          notBefore: new Date(Date.now() - 30_000),
          notAfter: new Date(Date.now() + 86_400_000),
          spki: pair.spki,
          extensions: leafExtensions({
            role,
            sans: { dns: ["leaf.bench.example"], email: [], ip: [], uri: [], otherNames: [] },
            subjectEmpty: false,
            ski: facts.ski,
            issuerSki: caFacts.ski,
            aia: NO_AIA,
          }),
          signer,
        },
        encoder,
      );
      const key = traditionalPrivateKey(pair.pkcs8);
      return [toPem("CERTIFICATE", der), toPem(key.label, key.der)];
    };
    const engine = await time(n, leaf("direct"));
    const library = await time(Math.max(50, Math.floor(n / 4)), leaf("library"));
    return Response.json({ iterations: n, floorMs: floor, engineMs: engine, libraryMs: library });
  },
};
