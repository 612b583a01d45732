/**
 * Which CRLs a mount has, and who signs them (docs/pki-revocation-crl.md "What a CRL holds").
 *
 * Choice (documented in docs/pki-revocation-crl.md): one CRL per (key, subject) group of the
 * issuers that have a key, as upstream. Issuers sharing key and subject are the same CRL issuer
 * to a relying party (same name, same AKI), so they share one CRL and one CRL-number sequence;
 * each member's pki_crls row holds the same bytes. A group without a member that has the
 * crl-signing usage gets no CRL (with upstream's warning); a keyless issuer gets none.
 */
import { base64ToBytes, sha256Hex } from "../../../core/encoding";
import { publicKeyFacts, type PublicKeyFacts } from "../x509/asn1";
import { algorithmSpec, type AlgorithmSpec, type RevocationAlgorithm } from "../x509/crl";
import { unsealPrivateKey } from "../storage/keystore";
import type { IssuerRow, KeyRow } from "../storage/store";
import { importSigner, signatureAlgorithmName, type Signer } from "../x509/x509";

export interface CrlGroup {
  /** Stable identity of the CRL issuer (key id + subject digest): keys the CRL-number counter. */
  id: string;
  members: IssuerRow[];
  /** The member whose settings (revocation_signature_algorithm, AIA) the CRL uses. */
  representative: IssuerRow;
  /** Whether the mount's default issuer belongs here: orphaned revocations go on this CRL. */
  hasDefault: boolean;
}

export const NO_CRL_SIGNER_WARNING =
  "Issuer equivalency set with associated keys lacked an issuer with CRL Signing KeyUsage; refusing to rebuild CRL for this group of issuers: ";

/** Groups the mount's keyed issuers; returns the groups that get a CRL and the warnings. */
export async function crlGroups(issuers: IssuerRow[], defaultId: string): Promise<{ groups: CrlGroup[]; warnings: string[] }> {
  const byKey = new Map<string, IssuerRow[]>();
  for (const i of [...issuers].sort((a, b) => a.id.localeCompare(b.id))) {
    if (i.keyId === "") continue;
    const k = `${i.keyId}\n${i.subjectDer}`;
    byKey.set(k, [...(byKey.get(k) ?? []), i]);
  }
  const groups: CrlGroup[] = [];
  const warnings: string[] = [];
  for (const members of byKey.values()) {
    const first = members[0];
    if (!first) continue;
    const signers = members.filter((m) => m.usage.includes("crl-signing"));
    // Upstream prefers the default issuer as the representative when it may sign CRLs.
    const representative = signers.find((m) => m.id === defaultId) ?? signers[0];
    if (!representative) {
      warnings.push(NO_CRL_SIGNER_WARNING + members.map((m) => m.id).join(","));
      continue;
    }
    const id = `${first.keyId}:${(await sha256Hex(first.subjectDer)).slice(0, 32)}`;
    groups.push({ id, members, representative, hasDefault: signers.some((m) => m.id === defaultId) });
  }
  return { groups, warnings };
}

/** A ready-to-use CRL signer: key, algorithm, and what the TBSCertList needs from the issuer. */
export interface CrlSigner {
  signer: Signer;
  algorithm: AlgorithmSpec;
  facts: PublicKeyFacts;
  issuerName: Uint8Array<ArrayBuffer>;
}

function familyOf(spec: AlgorithmSpec): PublicKeyFacts["type"] {
  return spec.family === "ec" ? "ec" : spec.family === "ed25519" ? "ed25519" : "rsa";
}

/**
 * Imports the group's key for the representative's revocation_signature_algorithm (auto when
 * empty: the key's default: SHA-256 for RSA, the curve's hash for ECDSA). An algorithm that does not suit the key (an
 * issuer written before that check existed) falls back to the default, with a warning.
 */
export async function crlSigner(env: Env, group: CrlGroup, key: KeyRow, warnings: string[]): Promise<CrlSigner> {
  const rep = group.representative;
  const spki = base64ToBytes(key.publicKey);
  const facts = await publicKeyFacts(spki);
  let name = rep.revocationSignatureAlgorithm as RevocationAlgorithm | "";
  let spec = name === "" ? null : algorithmSpec(name);
  if (spec && familyOf(spec) !== facts.type) {
    warnings.push(`issuer ${rep.id}: revocation_signature_algorithm ${name} does not suit its ${facts.type} key; signing the CRL with the key's default algorithm`);
    spec = null;
  }
  if (!spec) {
    name = signatureAlgorithmName(facts, 0, false) as RevocationAlgorithm;
    spec = algorithmSpec(name);
  }
  const pkcs8 = await unsealPrivateKey(env, key);
  const bits = spec.hash === "" ? 0 : Number(spec.hash.slice(4));
  const imported = await importSigner(pkcs8, spki, facts.type === "rsa" ? bits : 0, spec.family === "rsa-pss");
  // WebCrypto takes the ECDSA hash per signature, so any of the three hashes works on any curve.
  const signer: Signer = spec.family === "ec" ? { ...imported, algorithm: { name: "ECDSA", hash: spec.hash } } : imported;
  return { signer, algorithm: spec, facts, issuerName: base64ToBytes(rep.subjectDer) };
}
