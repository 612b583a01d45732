/**
 * One step of a tidy job (docs/pki-tidy.md "How it runs"): the unit of work between two checkpoints. The
 * mount's Authority (src/engines/pki/authority/tidy-runner.ts) calls `tidyStep` from its alarm, stores the
 * job it returns and schedules the next step, so a cancel or a restart only ever lands between
 * steps. A step is one page of the cert store, one page of the revocation list, the CRL rebuild,
 * the expired-issuer sweep, or one page of ACME accounts, in upstream's order (doTidyCertStore,
 * doTidyRevocationStore, doTidyRebuildCRL, doTidyExpiredIssuers, doTidyAcme).
 *
 * Every step is safe to run twice: deletes are idempotent and counted from what D1 reports as
 * deleted; a page resumes after the cursor written by the previous step.
 */
import { openDb, type Db } from "../../../core/db/client";
import type { MountRow } from "../../../core/mount-store";
import { base64ToBytes, bytesToBase64 } from "../../../core/encoding";
import { buildChain } from "../ca/issuers";
import { deleteIssuerStmt, getConfig, listIssuers, runBatch, updateIssuerStmt, type IssuerRow, type Stmt } from "../storage/store";
import { TIDY_PHASES, certVerdict, nextPhase, revokedExpired, stepSize, type TidyJob, type TidyPhase } from "./tidy";
import { acmeAccountVerdict } from "./acme-tidy";
import { applyAcmeTidy, deleteExpiredAcmeNonces, deleteStaleEabs, listAcmeAccountsPage, listAcmeOrdersOf } from "../storage/acme-tidy-store";
import { deleteBySerial, listCertsPage, listRevokedPage, setRevokedIssuers } from "../storage/tidy-store";
import { bodiesOf } from "../storage/cert-bodies";
import { isSignedBy, parseCertificate, type CertInfo } from "../x509/x509";

import { rebuildCrls } from "../revocation/crl-rebuild";

/** Parses stored base64 DER; null when it is not a certificate (tidy_invalid_certs). */
export function tryParse(derB64: string): CertInfo | null {
  try {
    return parseCertificate(base64ToBytes(derB64));
  } catch {
    return null;
  }
}

/**
 * The mount issuer whose subject is the certificate's issuer name and whose key verifies its
 * signature (upstream associateRevokedCertWithIsssuer); "" when none does.
 */
export async function findSigningIssuer(cert: CertInfo, issuers: IssuerRow[]): Promise<string> {
  const issuerName = bytesToBase64(cert.issuer);
  for (const i of issuers) {
    if (i.subjectDer !== issuerName) continue;
    if (await isSignedBy(cert.der, base64ToBytes(i.publicKey))) return i.id;
  }
  return "";
}

function advance(job: TidyJob, from: TidyPhase): TidyJob {
  const after = TIDY_PHASES[TIDY_PHASES.indexOf(from) + 1] ?? "done";
  return { ...job, phase: nextPhase(job.params, after, job.rebuildCrl), cursor: "", counters: { ...job.counters, checked: 0 } };
}

async function certStorePage(env: Env, db: Db, mount: MountRow, job: TidyJob, now: number): Promise<TidyJob> {
  const p = job.params;
  const size = stepSize(p);
  const rows = await listCertsPage(db, mount.id, job.cursor, size);
  if (rows.length === 0) return advance(job, "certs");
  // Bodies only when tidy_invalid_certs parses them: from R2 for rows that keep none in D1; a row
  // without any body (storage/cert-bodies.ts) counts as invalid.
  const bodies = p.tidy_invalid_certs ? await bodiesOf(env.CERTS, mount.id, rows) : [];
  const nowSec = Math.floor(now / 1000);
  const certs: string[] = [];
  const revoked: string[] = [];
  for (const [i, r] of rows.entries()) {
    // Parsing costs time; only tidy_invalid_certs needs it (notAfter is a column).
    const body = bodies[i];
    const parses = p.tidy_invalid_certs ? typeof body === "string" && tryParse(body) !== null : null;
    const verdict = certVerdict(p, { notAfter: r.notAfter, revoked: r.revoked, parses }, nowSec);
    if (verdict !== "keep") certs.push(r.serial);
    if (verdict === "delete-with-revocation") revoked.push(r.serial);
  }
  const gone = await deleteBySerial(db, env.CERTS, mount.id, certs, revoked);
  const checked = job.counters.checked + rows.length;
  const last = rows[rows.length - 1];
  const next: TidyJob = {
    ...job,
    cursor: last ? last.serial : job.cursor,
    rebuildCrl: job.rebuildCrl || gone.revoked > 0,
    counters: {
      ...job.counters,
      certStoreDeleted: job.counters.certStoreDeleted + gone.certs,
      revokedDeleted: job.counters.revokedDeleted + gone.revoked,
      checked,
    },
    message: `Tidying certificate store: checking entry ${rows.length} of ${size} on current page; total certs checked: ${checked}`,
  };
  return rows.length < size ? advance(next, "certs") : next;
}

async function revocationPage(env: Env, db: Db, mount: MountRow, job: TidyJob, now: number): Promise<TidyJob> {
  const p = job.params;
  const size = stepSize(p);
  const rows = await listRevokedPage(db, mount.id, Number(job.cursor || "0"), size);
  if (rows.length === 0) return advance(job, "revoked");
  const nowSec = Math.floor(now / 1000);
  const issuers = p.tidy_revoked_cert_issuer_associations ? await listIssuers(db, mount.id) : [];
  const toDelete: string[] = [];
  const reassigned: { serial: string; issuerId: string }[] = [];
  let missing = 0;
  let fixed = 0;
  for (const r of rows) {
    const needParse = p.tidy_invalid_certs || p.tidy_revoked_cert_issuer_associations;
    const cert = needParse ? tryParse(r.der) : null;
    if (needParse && cert === null) {
      // Unparsable: removed only with tidy_invalid_certs, otherwise left alone (upstream).
      if (p.tidy_invalid_certs) toDelete.push(r.serial);
      continue;
    }
    // Association runs before expiry, as upstream: an entry that then expires is only counted.
    let issuerId = r.issuerId;
    if (cert && p.tidy_revoked_cert_issuer_associations && !issuers.some((i) => i.id === r.issuerId)) {
      missing++;
      issuerId = await findSigningIssuer(cert, issuers);
      if (issuerId !== "") fixed++;
    }
    if (revokedExpired(p, r.notAfter, nowSec)) toDelete.push(r.serial);
    else if (issuerId !== r.issuerId) reassigned.push({ serial: r.serial, issuerId });
  }
  // An expired revocation entry takes its stored certificate with it (upstream deletes both).
  const gone = await deleteBySerial(db, env.CERTS, mount.id, toDelete, toDelete);
  await setRevokedIssuers(db, mount.id, reassigned);
  const checked = job.counters.checked + rows.length;
  const last = rows[rows.length - 1];
  const next: TidyJob = {
    ...job,
    cursor: last ? String(last.id) : job.cursor,
    rebuildCrl: job.rebuildCrl || gone.revoked > 0 || reassigned.length > 0,
    counters: {
      ...job.counters,
      revokedDeleted: job.counters.revokedDeleted + gone.revoked,
      missingIssuer: job.counters.missingIssuer + missing,
      fixedIssuers: job.counters.fixedIssuers + fixed,
      checked,
    },
    message: `Tidying revoked certificates: checking certificate ${rows.length} of ${size} on current page; total revoked certs checked: ${checked}`,
  };
  // A short page was the last one: move on without another (empty) step.
  return rows.length < size ? advance(next, "revoked") : next;
}

function logWarnings(mount: MountRow, warnings: string[]): void {
  if (warnings.length > 0) console.warn(`tidy on mount ${mount.accessor}: CRL rebuild warnings: ${warnings.join("; ")}`);
}

/**
 * Upstream doTidyRebuildCRL: with config/crl auto_rebuild the periodic rebuild picks the change
 * up, otherwise the CRLs are rebuilt now so removed entries leave them.
 */
async function crlRebuild(env: Env, db: Db, mount: MountRow, job: TidyJob): Promise<TidyJob> {
  const crl = await getConfig(db, mount.id, "crl");
  if (!crl.auto_rebuild) logWarnings(mount, await rebuildCrls(env, mount));
  return advance({ ...job, rebuildCrl: false, message: "Rebuilding CRLs" }, "crl");
}

/**
 * Upstream doTidyExpiredIssuers: issuers past notAfter + issuer_safety_buffer go, except the
 * default; their keys stay. Chains are rebuilt as the issuer DELETE route does, and the CRLs
 * always (a removed issuer changes which CRLs exist).
 */
async function expiredIssuers(env: Env, db: Db, mount: MountRow, job: TidyJob, now: number): Promise<TidyJob> {
  const [issuers, cfg] = await Promise.all([listIssuers(db, mount.id), getConfig(db, mount.id, "issuers")]);
  const bufferMs = job.params.issuer_safety_buffer * 1000;
  const expired = issuers.filter((i) => i.notAfter + bufferMs < now);
  const removed: IssuerRow[] = [];
  for (const i of expired) {
    const label = `[id:${i.id}/name:${i.name}]`;
    if (i.id === cfg.default) {
      console.warn(`[Tidy on mount: ${mount.id}] Issuer ${label} has expired and would be removed via tidy, but won't be, as it is currently the default issuer.`);
      continue;
    }
    console.log(`[Tidy on mount: ${mount.id}] Issuer ${label} has expired by ${job.params.issuer_safety_buffer}s and is being removed (serial ${i.serial}, key ${i.keyId || "none"}).`);
    removed.push(i);
  }
  if (removed.length === 0) return advance(job, "issuers");
  const goneIds = new Set(removed.map((i) => i.id));
  const rest = issuers.filter((i) => !goneIds.has(i.id));
  const stmts: Stmt[] = removed.map((i) => deleteIssuerStmt(db, mount.id, i.id));
  for (const i of rest) {
    if (i.manualChain?.some((id) => goneIds.has(id))) {
      i.manualChain = null;
      stmts.push(updateIssuerStmt(db, mount.id, i.id, { manualChain: null }));
    }
  }
  for (const i of rest) {
    const chain = await buildChain(i, rest);
    if (JSON.stringify(chain) !== JSON.stringify(i.caChain)) stmts.push(updateIssuerStmt(db, mount.id, i.id, { caChain: chain }));
  }
  await runBatch(db, stmts);
  logWarnings(mount, await rebuildCrls(env, mount));
  return advance({ ...job, message: `Removed ${removed.length} expired issuer(s)` }, "issuers");
}

/**
 * Upstream doTidyAcme: one page of accounts (acme-tidy.ts decides, acme-tidy-store.ts writes in
 * one batch). The first page also deletes unused EAB keys older than acme_account_safety_buffer
 * (upstream) and expired replay nonces.
 */
async function acmePage(db: Db, mount: MountRow, job: TidyJob, now: number): Promise<TidyJob> {
  const p = job.params;
  const cutoff = now - p.acme_account_safety_buffer * 1000;
  if (job.cursor === "") {
    await deleteStaleEabs(db, mount.id, cutoff);
    await deleteExpiredAcmeNonces(db, mount.id, now);
  }
  const size = stepSize(p);
  const accounts = await listAcmeAccountsPage(db, mount.id, job.cursor, size);
  if (accounts.length === 0) return advance(job, "acme");
  const orders = await listAcmeOrdersOf(db, mount.id, accounts.map((a) => a.id));
  const writes = { deleteOrders: [] as string[], revoke: [] as string[], remove: [] as string[] };
  for (const a of accounts) {
    const v = acmeAccountVerdict(a, orders.filter((o) => o.accountId === a.id), now, p.safety_buffer, p.acme_account_safety_buffer);
    writes.deleteOrders.push(...v.deleteOrders);
    if (v.account === "revoke") writes.revoke.push(a.id);
    if (v.account === "delete") writes.remove.push(a.id);
  }
  const done = await applyAcmeTidy(db, mount.id, writes, now, cutoff);
  const c = job.counters;
  const total = (c.acmeAccounts ?? 0) + accounts.length;
  const last = accounts[accounts.length - 1];
  const next: TidyJob = {
    ...job,
    cursor: last ? last.id : job.cursor,
    counters: {
      ...c,
      checked: c.checked + accounts.length,
      acmeAccounts: total,
      acmeOrdersDeleted: (c.acmeOrdersDeleted ?? 0) + done.ordersDeleted,
      acmeAccountsRevoked: (c.acmeAccountsRevoked ?? 0) + done.revoked,
      acmeAccountsDeleted: (c.acmeAccountsDeleted ?? 0) + done.deleted,
    },
    message: `Tidying ACME accounts: checked ${accounts.length} on current page; total accounts checked: ${total}`,
  };
  return accounts.length < size ? advance(next, "acme") : next;
}

/**
 * Runs the job's current step and returns the job as it stands after it. A job whose phase is
 * "done" comes back Finished. Errors propagate; the runner records them as the Error state.
 */
export async function tidyStep(env: Env, mount: MountRow, job: TidyJob, now: number): Promise<TidyJob> {
  const db = openDb(env.DB);
  switch (job.phase) {
    case "certs":
      return certStorePage(env, db, mount, job, now);
    case "revoked":
      return revocationPage(env, db, mount, job, now);
    case "crl":
      return crlRebuild(env, db, mount, job);
    case "issuers":
      return expiredIssuers(env, db, mount, job, now);
    case "acme":
      return acmePage(db, mount, job, now);
    case "done":
      // tidy_move_legacy_ca_bundle has nothing to act on in Lanyard.
      return { ...job, state: "Finished", timeFinished: now, message: null };
  }
}
