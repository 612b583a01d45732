/**
 * Issuers and keys of a mount (Vault API /pki/issuer/:issuer_ref, /pki/key/:key_ref): reference
 * resolution, name rules, the default-issuer rules, chain building, and importing certificates and
 * keys. Imports are written
 * in one D1 batch, so a failure never leaves a half-written issuer or key.
 */
import type { Db } from "../../../core/db/client";
import { badRequest } from "../../../core/errors";
import { base64ToBytes, bytesToBase64 } from "../../../core/encoding";
import { ALL_USAGES, ISSUER_DEFAULTS } from "../defaults";
import { sealPrivateKey } from "../storage/keystore";
import { unsupportedKeySize } from "../x509/keytypes";
import { publicKeyFacts } from "../x509/asn1";
import { toPem } from "../x509/pem";
import {
  getAllConfig,
  insertIssuerStmt,
  insertKeyStmt,
  listIssuers,
  listKeys,
  putConfigStmt,
  runBatch,
  updateIssuerStmt,
  type IssuerRow,
  type IssuersConfig,
  type KeyRow,
  type KeysConfig,
  type Stmt,
} from "../storage/store";
import { isSignedBy, parseCertificate, publicKeyOf, signatureAlgorithmName, type CertInfo } from "../x509/x509";

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const GENERIC_NAME_RE = /^\w(([\w.-]+)?\w)?$/;

/** Issuer and key names: Vault's generic-name syntax (`\w(([\w-.]+)?\w)?`), not `default`. */
export function checkObjectName(kind: "issuer" | "key", name: string): void {
  if (name === "") throw badRequest(`expected non-empty ${kind} name`);
  if (name.trim().toLowerCase() === "default") throw badRequest(`reserved keyword 'default' can not be used as ${kind} name`);
  if (!GENERIC_NAME_RE.test(name)) throw badRequest(`${kind} name contained invalid characters`);
}

export function resolveIssuerIn(issuers: IssuerRow[], cfg: IssuersConfig, ref: string): IssuerRow {
  const r = ref.trim();
  if (r.toLowerCase() === "default") {
    const hit = cfg.default ? issuers.find((i) => i.id === cfg.default) : undefined;
    if (!hit) throw badRequest("no default issuer currently configured");
    return hit;
  }
  const hit = (UUID_RE.test(r) ? issuers.find((i) => i.id === r) : undefined) ?? issuers.find((i) => i.name !== "" && i.name === r);
  if (!hit) throw badRequest(`unable to find PKI issuer for reference: ${ref}`);
  return hit;
}

export function resolveKeyIn(keys: KeyRow[], cfg: KeysConfig, ref: string): KeyRow {
  const r = ref.trim();
  if (r.toLowerCase() === "default") {
    const hit = cfg.default ? keys.find((k) => k.id === cfg.default) : undefined;
    if (!hit) throw badRequest("no default key currently configured");
    return hit;
  }
  const hit = (UUID_RE.test(r) ? keys.find((k) => k.id === r) : undefined) ?? keys.find((k) => k.name !== "" && k.name === r);
  if (!hit) throw badRequest(`unable to find PKI key for reference: ${ref}`);
  return hit;
}

/** Normalised PEM as stored: trimmed plus exactly one newline, as upstream stores issuers. */
export const issuerPem = (der: Uint8Array): string => `${toPem("CERTIFICATE", der)}\n`;
export const issuerDer = (row: IssuerRow): Uint8Array<ArrayBuffer> => certDerFromPem(row.certificate);

export function certDerFromPem(pem: string): Uint8Array<ArrayBuffer> {
  return base64ToBytes(pem.replace(/-----[A-Z ]+-----/g, "").replace(/\s+/g, ""));
}

/** Chain: self first, then every parent up to the roots, breadth first (Vault's ca_chain). */
export async function buildChain(issuer: IssuerRow, all: IssuerRow[]): Promise<string[]> {
  if (issuer.manualChain && issuer.manualChain.length > 0) return issuer.manualChain;
  const chain = [issuer.id];
  const queue = [issuer];
  while (queue.length > 0) {
    const child = queue.shift();
    if (!child) break;
    if (child.subjectDer === child.issuerDer) continue; // self-issued: a root ends the walk
    for (const cand of all) {
      if (chain.includes(cand.id) || cand.subjectDer !== child.issuerDer) continue;
      if (await isSignedBy(issuerDer(child), base64ToBytes(cand.publicKey))) {
        chain.push(cand.id);
        queue.push(cand);
      }
    }
  }
  return chain;
}

/** Recomputes every issuer's chain; returns the statements for those that changed. */
export async function rebuildChains(db: Db, mountId: string, all: IssuerRow[]): Promise<Stmt[]> {
  const out: Stmt[] = [];
  for (const i of all) {
    const chain = await buildChain(i, all);
    if (JSON.stringify(chain) !== JSON.stringify(i.caChain)) {
      i.caChain = chain;
      out.push(updateIssuerStmt(db, mountId, i.id, { caChain: chain }));
    }
  }
  return out;
}

/** The PEMs of an issuer's chain (self first). */
export function chainPems(issuer: IssuerRow, all: IssuerRow[]): string[] {
  return issuer.caChain.map((id) => all.find((i) => i.id === id)?.certificate).filter((p): p is string => p !== undefined);
}

export function issuerView(issuer: IssuerRow, all: IssuerRow[]): Record<string, unknown> {
  const aia = issuer.aia;
  const view: Record<string, unknown> = {
    issuer_id: issuer.id,
    issuer_name: issuer.name,
    key_id: issuer.keyId,
    certificate: issuer.certificate,
    ca_chain: chainPems(issuer, all),
    manual_chain: issuer.manualChain && issuer.manualChain.length > 0 ? issuer.manualChain : null,
    leaf_not_after_behavior: issuer.leafNotAfterBehavior,
    usage: [...issuer.usage, "read-only"].sort().join(","),
    revocation_signature_algorithm: issuer.revocationSignatureAlgorithm,
    revoked: issuer.revoked,
    issuing_certificates: aia?.issuing_certificates ?? [],
    crl_distribution_points: aia?.crl_distribution_points ?? [],
    delta_crl_distribution_points: aia?.delta_crl_distribution_points ?? [],
    ocsp_servers: aia?.ocsp_servers ?? [],
  };
  if (aia) view.enable_aia_url_templating = aia.enable_aia_url_templating;
  if (issuer.revoked && issuer.revocationTime) {
    view.revocation_time = Math.floor(issuer.revocationTime / 1000);
    view.revocation_time_rfc3339 = new Date(issuer.revocationTime).toISOString();
  }
  return view;
}

// ---------------------------------------------------------------------------------------------
// Import (Vault API /pki/issuers/import/bundle), also used by root generation and set-signed.

export interface ImportInput {
  certs: Uint8Array<ArrayBuffer>[];
  /** PKCS#8 keys. */
  keys: Uint8Array<ArrayBuffer>[];
  issuerName?: string;
  keyName?: string;
  /** Extra statements to commit in the same batch (e.g. the generated root in pki_certs). */
  extra?: Stmt[];
  /** Id for the first new issuer (lets the caller reference it in `extra`). */
  issuerId?: string;
}

export interface ImportResult {
  importedIssuers: string[];
  importedKeys: string[];
  existingIssuers: string[];
  existingKeys: string[];
  mapping: Record<string, string>;
  warnings: string[];
  issuers: IssuerRow[];
  keys: KeyRow[];
}

/** What one import works on: the mount's rows (updated in place), the statements and the answer. */
interface ImportRun {
  db: Db;
  env: Env;
  mountId: string;
  now: number;
  issuers: IssuerRow[];
  keys: KeyRow[];
  newIssuers: IssuerRow[];
  stmts: Stmt[];
  res: ImportResult;
}

export async function importIssuersAndKeys(db: Db, env: Env, mountId: string, input: ImportInput): Promise<ImportResult> {
  const [issuers, keys, cfg] = await Promise.all([listIssuers(db, mountId), listKeys(db, mountId), getAllConfig(db, mountId)]);
  const res: ImportResult = { importedIssuers: [], importedKeys: [], existingIssuers: [], existingKeys: [], mapping: {}, warnings: [], issuers, keys };
  const run: ImportRun = { db, env, mountId, now: Date.now(), issuers, keys, newIssuers: [], stmts: [], res };
  checkImportNames(input, issuers, keys);
  for (const pkcs8 of input.keys) await importKey(run, pkcs8, input.keyName);
  for (const [n, der] of input.certs.entries()) await importCert(run, n, der, input);
  linkKeylessIssuers(run);
  await chainsAfterImport(run);
  applyDefaults(run, cfg);
  run.stmts.push(...(input.extra ?? []));
  await runBatch(db, run.stmts);
  return res;
}

function checkImportNames(input: ImportInput, issuers: IssuerRow[], keys: KeyRow[]): void {
  if (input.issuerName !== undefined && input.issuerName !== "") {
    checkObjectName("issuer", input.issuerName);
    if (issuers.some((i) => i.name === input.issuerName)) throw badRequest("issuer name already in use");
  }
  if (input.keyName !== undefined && input.keyName !== "") {
    checkObjectName("key", input.keyName);
    if (keys.some((k) => k.name === input.keyName)) throw badRequest("key name already in use");
  }
}

/** One PKCS#8 key: a key with the same public key is reported as existing; the first new one gets `keyName`. */
async function importKey(run: ImportRun, pkcs8: Uint8Array<ArrayBuffer>, keyName: string | undefined): Promise<void> {
  const { res, keys, mountId } = run;
  let spki: Uint8Array<ArrayBuffer>;
  let facts;
  try {
    spki = await publicKeyOf(pkcs8);
    facts = await publicKeyFacts(spki);
  } catch (e) {
    throw badRequest(`unable to parse private key: ${e instanceof Error ? e.message : String(e)}`);
  }
  const b64 = bytesToBase64(spki);
  const existing = keys.find((k) => k.publicKey === b64);
  if (existing) {
    if (!res.existingKeys.includes(existing.id)) res.existingKeys.push(existing.id);
    return;
  }
  const id = crypto.randomUUID();
  const row: KeyRow = {
    id,
    mountId,
    name: res.importedKeys.length === 0 ? (keyName ?? "") : "",
    keyType: facts.type,
    keyBits: facts.bits,
    publicKey: b64,
    sealedPrivateKey: await sealPrivateKey(run.env, mountId, id, pkcs8),
    createdAt: run.now,
  };
  keys.push(row);
  res.importedKeys.push(id);
  run.stmts.push(insertKeyStmt(run.db, row));
}

/** One certificate (the `n`th of the bundle): must be a CA; the same PEM again is reported as existing. */
async function importCert(run: ImportRun, n: number, der: Uint8Array<ArrayBuffer>, input: ImportInput): Promise<void> {
  const { res, newIssuers, now } = run;
  let info: CertInfo;
  try {
    info = parseCertificate(der);
  } catch (e) {
    throw badRequest(`Error parsing issuer ${n}: ${e instanceof Error ? e.message : String(e)}`);
  }
  const pem = issuerPem(info.der);
  if (!info.isCa) throw badRequest(`Error parsing issuer ${n}: Refusing to import non-CA certificate\n${pem}`);
  let keyFacts;
  try {
    keyFacts = await publicKeyFacts(info.spki);
  } catch (e) {
    throw badRequest(`Error parsing issuer ${n}: ${e instanceof Error ? e.message : String(e)}`);
  }
  // WebCrypto could verify nothing this issuer signed (chains, revocation by PEM).
  const sizeProblem = unsupportedKeySize(keyFacts);
  if (sizeProblem) throw badRequest(`Error parsing issuer ${n}: ${sizeProblem}`);
  const existing = run.issuers.find((i) => i.certificate === pem);
  if (existing) {
    if (!res.existingIssuers.includes(existing.id)) res.existingIssuers.push(existing.id);
    res.mapping[existing.id] = existing.keyId;
    return;
  }
  const spkiB64 = bytesToBase64(info.spki);
  const key = run.keys.find((k) => k.publicKey === spkiB64);
  const usage = info.keyUsage && !info.keyUsage.includes(6) ? ALL_USAGES.filter((u) => u !== "crl-signing") : [...ALL_USAGES];
  const row: IssuerRow = {
    id: newIssuers.length === 0 && input.issuerId ? input.issuerId : crypto.randomUUID(),
    mountId: run.mountId,
    name: newIssuers.length === 0 ? (input.issuerName ?? "") : "",
    keyId: key?.id ?? "",
    certificate: pem,
    serial: info.serialHex.match(/../g)?.join(":") ?? info.serialHex,
    subjectDer: bytesToBase64(info.subject),
    issuerDer: bytesToBase64(info.issuer),
    publicKey: spkiB64,
    notAfter: info.notAfter.getTime(),
    caChain: [],
    manualChain: ISSUER_DEFAULTS.manualChain,
    leafNotAfterBehavior: ISSUER_DEFAULTS.leafNotAfterBehavior,
    usage,
    revocationSignatureAlgorithm: info.signatureAlgorithm,
    aia: ISSUER_DEFAULTS.aia,
    revoked: ISSUER_DEFAULTS.revoked,
    revocationTime: ISSUER_DEFAULTS.revocationTime,
    lastModified: now,
    createdAt: now,
  };
  newIssuers.push(row);
  run.issuers.push(row);
  res.importedIssuers.push(row.id);
  res.mapping[row.id] = row.keyId;
}

/** Keys imported now link issuers that had none: linking works both ways, by public key. */
function linkKeylessIssuers(run: ImportRun): void {
  for (const i of run.issuers) {
    if (i.keyId !== "" || run.newIssuers.includes(i)) continue;
    const key = run.keys.find((k) => k.publicKey === i.publicKey);
    if (key) {
      i.keyId = key.id;
      run.stmts.push(updateIssuerStmt(run.db, run.mountId, i.id, { keyId: key.id, lastModified: run.now }));
      run.res.mapping[i.id] = key.id;
    }
  }
}

/** Chains of new issuers, and of old ones that may now find a parent. */
async function chainsAfterImport(run: ImportRun): Promise<void> {
  const { issuers, newIssuers, stmts } = run;
  for (const i of newIssuers) i.caChain = await buildChain(i, issuers);
  stmts.push(...newIssuers.map((i) => insertIssuerStmt(run.db, i)));
  for (const i of issuers) {
    if (newIssuers.includes(i)) continue;
    const chain = await buildChain(i, issuers);
    if (JSON.stringify(chain) !== JSON.stringify(i.caChain)) {
      i.caChain = chain;
      stmts.push(updateIssuerStmt(run.db, run.mountId, i.id, { caChain: chain }));
    }
  }
}

/**
 * The default rules: the first issuer with a key becomes the default when none is set; later
 * ones only with default_follows_latest_issuer (and exactly one new keyed issuer). The default
 * key is likewise the first key when none is set.
 */
function applyDefaults(run: ImportRun, cfg: { issuers: IssuersConfig; keys: KeysConfig }): void {
  const { db, mountId, issuers, keys, newIssuers, stmts, now, res } = run;
  const keyed = newIssuers.filter((i) => i.keyId !== "");
  const issuersCfg = { ...cfg.issuers };
  const defaultExists = issuersCfg.default !== "" && issuers.some((i) => i.id === issuersCfg.default);
  if (!defaultExists) {
    const first = keyed[0] ?? issuers.find((i) => i.keyId !== "");
    if (first) issuersCfg.default = first.id;
  } else if (issuersCfg.default_follows_latest_issuer && newIssuers.length > 0) {
    if (keyed.length === 1 && keyed[0]) issuersCfg.default = keyed[0].id;
    else if (keyed.length > 1) {
      res.warnings.push("Default issuer left unchanged: could not select new issuer automatically as multiple imported issuers had key material in Vault.");
    }
  }
  if (issuersCfg.default !== cfg.issuers.default) {
    stmts.push(putConfigStmt(db, mountId, "issuers", issuersCfg));
    // Becoming or ceasing to be the default changes what ca/pem serves (its Last-Modified).
    for (const i of issuers) {
      if ((i.id === issuersCfg.default || i.id === cfg.issuers.default) && !newIssuers.includes(i)) {
        i.lastModified = now;
        stmts.push(updateIssuerStmt(db, mountId, i.id, { lastModified: now }));
      }
    }
  }
  const keysCfg = { ...cfg.keys };
  if ((keysCfg.default === "" || !keys.some((k) => k.id === keysCfg.default)) && keys[0]) {
    keysCfg.default = (keys.find((k) => res.importedKeys.includes(k.id)) ?? keys[0]).id;
    stmts.push(putConfigStmt(db, mountId, "keys", keysCfg));
  }
  const def = issuers.find((i) => i.id === issuersCfg.default);
  if (def && def.keyId === "") res.warnings.push("This mount's default issuer does not have a key; issuance will fail until a key is imported or the default changed.");
}

/** The signature algorithm name for a freshly generated CA (issuer revocation_signature_algorithm). */
export { signatureAlgorithmName };
