// In-runtime CPU cost of one EC P-256 certificate (npm run bench), measured inside workerd:
//   floor:     generate a P-256 key pair, export it, one ECDSA-SHA256 signature (the WebCrypto floor)
//   engine:    the engine's own path without I/O: key pair, SKI, subject, extensions, the
//              hand-encoded TBSCertificate, signature, PEM of certificate and key
//   library:   the same with @peculiar/x509's generator instead of the hand-encoded TBS
//   issue:     the issue handler's work between parsed request fields and the JSON response,
//              without the serial reservation and the D1 write: the role applied, validity, AIA,
//              key generation, the issuer's key unsealed and imported, its key id, extensions,
//              TBS and signature, the response (PEM of certificate, key and chain) and its JSON
//   csr:       the CSR field alone: PEM decoded, CSR parsed, its self-signature verified
//   sign:      the sign handler's work likewise (issue's, with the CSR instead of a new key)
// The issue and sign rows call the same functions as issuance/issue.ts's issueLeaf, in its
// order, with signNewCertificate's I/O (reserveSerial) replaced by a fixed serial; keep them in
// step with issueLeaf when it changes.
// Local workerd advances the clock during CPU work, so means over many iterations are
// meaningful here (they would not be in production, where timers freeze between I/O); each
// row keeps its best of 5 rounds.
import "reflect-metadata";
import { caExtensions, leafExtensions, NO_AIA, resolveAia } from "../src/engines/pki/issuance/profile";
import { encodeName, publicKeyFacts, traditionalPrivateKey } from "../src/engines/pki/x509/asn1";
import { toPem } from "../src/engines/pki/x509/pem";
import { defaultRole, type Role } from "../src/engines/pki/policy/roles";
import { applyRole, nameRequestFrom } from "../src/engines/pki/policy/policy";
import { loadCsr } from "../src/engines/pki/issuance/csr";
import { metadataToStore } from "../src/engines/pki/issuance/cert-metadata";
import { computeValidity } from "../src/engines/pki/issuance/ttl";
import { certificateResponse, issuerKeyId, issuerSigner, leafBound, signingIssuerFrom, type SubjectKey } from "../src/engines/pki/issuance/pipeline";
import { sealPrivateKey } from "../src/engines/pki/storage/keystore";
import type { IssuanceState, IssuerRow, KeyRow } from "../src/engines/pki/storage/store";
import { generateKeyPair, importSigner, signCertificate, signCsr } from "../src/engines/pki/x509/x509";
import { bytesToBase64 } from "../src/core/encoding";
import { CONFIG_DEFAULTS } from "../src/engines/pki/defaults";

/**
 * Mean ms per call over `n` calls, in 5 rounds: the best round's mean, so that other processes
 * taking the core for a while (this machine is shared) do not count as the Worker's CPU.
 */
async function time(n: number, fn: () => Promise<unknown>): Promise<number> {
  const per = Math.max(1, Math.floor(n / 5));
  let best = Infinity;
  for (let round = 0; round < 5; round++) {
    const t0 = performance.now();
    for (let i = 0; i < per; i++) await fn();
    best = Math.min(best, (performance.now() - t0) / per);
  }
  return best;
}

const SERIAL = "3a5f00112233445566778899aabbccddeeff0011";
const MOUNT_ID = "bench-mount";
// A throwaway seal key for the bench's own sealed CA key (never a deployment's).
const BENCH_ENV = { ROOT_TOKEN: "bench-root-token-0000", SEAL_KEY: bytesToBase64(new Uint8Array(32).fill(7)) } as unknown as Env;

/** A mount with an EC P-256 root, as storage would hand it to issueLeaf. */
async function benchState(role: Role): Promise<IssuanceState> {
  const ca = await generateKeyPair("ec", 256);
  const facts = await publicKeyFacts(ca.spki);
  const name = encodeName({ commonName: "Bench Root" });
  const der = await signCertificate({
    serialHex: "01",
    subject: name,
    issuer: name,
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 10 * 365 * 86_400_000),
    spki: ca.spki,
    extensions: caExtensions({
      sans: { dns: [], email: [], ip: [], uri: [], otherNames: [] },
      subjectEmpty: false,
      ski: facts.ski,
      issuerSki: facts.ski,
      maxPathLength: -1,
      keyUsage: [],
      extKeyUsage: [],
      extKeyUsageOids: [],
      permittedDnsDomains: [],
      aia: NO_AIA,
    }),
    signer: await importSigner(ca.pkcs8, ca.spki),
  });
  const key: KeyRow = {
    id: "00000000-0000-4000-8000-00000000000b",
    mountId: MOUNT_ID,
    name: "",
    keyType: "ec",
    keyBits: 256,
    publicKey: bytesToBase64(ca.spki),
    sealedPrivateKey: await sealPrivateKey(BENCH_ENV, MOUNT_ID, "00000000-0000-4000-8000-00000000000b", ca.pkcs8),
    createdAt: Date.now(),
  };
  const id = "00000000-0000-4000-8000-00000000000a";
  const issuer: IssuerRow = {
    id,
    mountId: MOUNT_ID,
    name: "root",
    keyId: key.id,
    certificate: `${toPem("CERTIFICATE", der).trim()}\n`,
    serial: "01",
    subjectDer: bytesToBase64(name),
    issuerDer: bytesToBase64(name),
    publicKey: bytesToBase64(ca.spki),
    notAfter: Date.now() + 10 * 365 * 86_400_000,
    caChain: [id],
    manualChain: null,
    leafNotAfterBehavior: "err",
    usage: ["read-only", "issuing-certificates", "crl-signing", "ocsp-signing"],
    revocationSignatureAlgorithm: "",
    aia: null,
    revoked: false,
    revocationTime: null,
    lastModified: Date.now(),
    createdAt: Date.now(),
  };
  return { role, issuers: [issuer], keys: [key], config: { ...CONFIG_DEFAULTS, issuers: { default: id, default_follows_latest_issuer: false } } };
}

/** issueLeaf (issuance/issue.ts) without reserveSerial and the D1 write; returns the JSON body. */
async function handlerWork(state: IssuanceState, role: Role, commonName: string, csrPem: string | undefined): Promise<string> {
  metadataToStore({ value: null, role });
  const csr = csrPem !== undefined ? await loadCsr(csrPem) : null;
  const { issuer, key, all, cfg } = signingIssuerFrom(state, "default");
  const names = applyRole(
    role,
    nameRequestFrom({ common_name: commonName, alt_names: [], ip_sans: [], uri_sans: [], other_sans: [], serial_number: "", exclude_cn_from_sans: false }, []),
    csr,
  );
  const now = Date.now();
  const validity = computeValidity({
    now,
    requestTtl: 0,
    requestNotAfter: "",
    roleTtl: role.ttl,
    roleMaxTtl: role.max_ttl,
    roleNotAfter: role.not_after,
    notAfterBound: role.not_after_bound,
    mountDefaultTtl: 2_764_800,
    mountMaxTtl: 2_764_800,
    notBeforeDuration: role.not_before_duration,
    notBefore: role.not_before,
    issuer: leafBound(issuer),
    refuseOverMax: true,
  });
  const aia = resolveAia(issuer.id, issuer.aia, cfg.urls, cfg.cluster);
  const subjectKey: Promise<SubjectKey> = csr
    ? Promise.resolve({ spki: csr.spki, pkcs8: null, keyType: "" })
    : generateKeyPair("ec", 256).then((pair) => ({ ...pair, keyType: "ec" }));
  const subject = encodeName(names.subject);
  // signNewCertificate's stages 3-4.
  const [signer, sk, issuerSki] = await Promise.all([
    issuerSigner(BENCH_ENV, issuer, key, { signatureBits: role.signature_bits, usePss: role.use_pss }),
    subjectKey,
    issuerKeyId(issuer),
  ]);
  const { ski } = await publicKeyFacts(sk.spki);
  const der = await signCertificate({
    serialHex: SERIAL,
    subject,
    issuer: Uint8Array.from(atob(issuer.subjectDer), (c) => c.charCodeAt(0)),
    notBefore: validity.notBefore,
    notAfter: validity.notAfter,
    spki: sk.spki,
    extensions: leafExtensions({ role, sans: names.sans, subjectEmpty: subject.length <= 2, ski, issuerSki, aia }),
    signer,
  });
  const data = certificateResponse(
    { der, serial: SERIAL, notAfterSec: Math.floor(validity.notAfter.getTime() / 1000), subjectKey: sk },
    { format: "pem", chain: { issuer, all, removeRoots: false }, privateKeyFormat: "der" },
  );
  return JSON.stringify({ data });
}

export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const n = Number(url.searchParams.get("n") ?? "500");
    // ?row=floor|engine|library|issue|csr|sign runs that row alone, so a caller can read the
    // process's CPU time around it (/proc) rather than trust the clock on a busy machine.
    const only = url.searchParams.get("row");
    const want = (row: string) => only === null || only === row;
    const data = crypto.getRandomValues(new Uint8Array(400));
    const ca = await generateKeyPair("ec", 256);
    const signer = await importSigner(ca.pkcs8, ca.spki);
    const caFacts = await publicKeyFacts(ca.spki);
    const caName = encodeName({ commonName: "Bench Root" });
    const role: Role = { ...defaultRole(), key_type: "ec", key_bits: 256, allow_any_name: true, ttl: 86_400 };
    const floor = !want("floor") ? NaN : await time(n, async () => {
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
          serialHex: SERIAL,
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
    const engine = want("engine") ? await time(n, leaf("direct")) : NaN;
    const library = want("library") ? await time(Math.max(25, Math.floor(n / 20)), leaf("library")) : NaN;

    // The handlers' work: a stored mount, and a CSR like the bench's (EC P-256, a CN).
    const state = await benchState(role);
    const csrKey = await generateKeyPair("ec", 256);
    const csrPem = toPem("CERTIFICATE REQUEST", await signCsr(encodeName({ commonName: "csr.bench.example" }), [], csrKey.pkcs8, csrKey.spki));
    const issue = want("issue") ? await time(n, () => handlerWork(state, role, "a.bench.example", undefined)) : NaN;
    const csr = want("csr") ? await time(n, () => loadCsr(csrPem)) : NaN;
    const sign = want("sign") ? await time(n, () => handlerWork(state, role, "b.bench.example", csrPem)) : NaN;
    return Response.json({ iterations: n, floorMs: floor, engineMs: engine, libraryMs: library, issueMs: issue, csrMs: csr, signMs: sign });
  },
};
