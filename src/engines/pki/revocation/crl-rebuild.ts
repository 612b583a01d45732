/**
 * Building a mount's CRLs (RFC 5280 §5; docs/pki-revocation-crl.md). `buildMountCrls` does the work and runs only
 * inside the mount's Authority Durable Object, which calls it one build at a time
 * (src/engines/pki/authority/crl-coordinator.ts); everything else asks the Authority through `rebuildCrls` /
 * `rebuildDeltaCrls`, which answer once a build that started after the call has finished.
 *
 * Invariants:
 * - Two builds of a mount never interleave (the coordinator runs them one after another), so the
 *   read-number-write sequence below needs no further locking.
 * - A CRL number is the larger of (the highest number stored for the group, in D1 or in the
 *   Authority's counter) + 1 and the build's clock in Unix milliseconds (`clockNumber`), raised
 *   and stored in the Authority before the CRL is written: a failed write leaves a gap, never a
 *   repeat. Complete and delta CRLs share the sequence (RFC 5280 §5.2.3, §5.2.4). Because the
 *   clock term grows by 1,000 a second and builds of one mount never interleave (each takes more
 *   than the 2 ms a complete build consumes), numbers stay within a few milliseconds of the clock,
 *   so a build after a restore of D1 to an earlier point, or in a new Authority that has lost its
 *   counter, still numbers above everything published before it (docs/pki-revocation-crl.md
 *   "CRL numbers"; Let's Encrypt derives its CRL numbers from time for the same reason).
 * - A complete CRL covers every revocation with sequence ≤ M, where M is read before the entries
 *   (rows are numbered in commit order, so none ≤ M can appear later), and records M as its
 *   max_seq. Its delta lists the revocations above that; a fresh complete build writes an empty
 *   delta next to it (upstream does too). A delta row's max_seq is the highest sequence it covers.
 * - Scopes (docs/pki-revocation-crl.md "Sharded CRLs"; crl-targets.ts): every rule above holds per
 *   (CRL issuer, scope), where the scope is the full CRL or one CRL shard; a build for some shards
 *   touches only their rows, counters and entries, so the full CRL and other shards keep theirs.
 * - Entries are streamed from D1 in pages that are each one index range (crl-targets.ts
 *   fillTargets), so a build's D1 work is linear in its entries, into per-CRL byte chunks
 *   (crl.ts): memory grows with the DER (≈ 27 bytes per entry), not with row objects. Each CRL is
 *   laid out and signed in one buffer, its writer freed, and its base64 made slice by slice; DER
 *   larger than one D1 value is stored in slices (revocation-store.ts).
 */
import type { Db } from "../../../core/db/client";
import { openDb } from "../../../core/db/client";
import { parseDurationSeconds } from "../../../core/duration";
import type { MountRow } from "../../../core/mount-store";
import { base64ToBytes } from "../../../core/encoding";
import { ecdsaSignatureDer, signCertificateList } from "../x509/crl";
import { crlGroups, crlSigner, type CrlGroup } from "./crl-groups";
import { counterKey, fillTargets, planTargets, reportKey, scopesOf, storedNumber, type Target } from "./crl-targets";
import { shardUrl, storedKind } from "./crl-shards";
import { certDerFromPem } from "../ca/issuers";
import { resolveAia } from "../issuance/profile";
import {
  crlBase64Slices,
  deleteCrlsExceptStmts,
  getCrlDer,
  listCrlMeta,
  maxRevokedSeq,
  putCrlStmts,
  runRevocationBatch,
  type CrlKind,
} from "../storage/revocation-store";
import { invalidate } from "../../../core/read-cache";
import { authorityOf } from "../issuance/serials";
import { getAllConfig, listIssuers, listKeys, type ConfigShapes, type CrlConfig, type IssuerRow, type KeyRow } from "../storage/store";
import { isSignedBy, signBytes } from "../x509/x509";

/** The CRL-number counters the Authority keeps (one per CRL issuer group). */
export interface CrlCounters {
  last(groupId: string): Promise<number>;
  store(groupId: string, n: number): Promise<void>;
}

export interface CrlBuildRequest {
  kind: CrlKind;
  /** Forced builds (crl/rotate, config changes) write an empty CRL while `disable` is set. */
  force: boolean;
  /**
   * Only these CRL shards (a revocation of a certificate in a shard); absent: the full CRLs and
   * every published shard (docs/pki-revocation-crl.md "Sharded CRLs").
   */
  shards?: number[];
}

export interface CrlBuildReport {
  /** What was built: "none" when nothing was (CRLs disabled and not forced). */
  built: CrlKind | "none";
  warnings: string[];
  /** Refusals that left a CRL unchanged (max_crl_entries). */
  errors: string[];
  /** CRL numbers written, by issuer id (a shard's by `<issuer id>/shard/<n>`, crl-targets.ts reportKey). */
  numbers: Record<string, { complete?: number; delta?: number }>;
  maxSeq: number;
}

/**
 * Complete rebuild through the Authority (revocation, tidy, issuer changes): warnings only. The
 * Authority writes the CRLs in its own isolate, so this one's cached public answers (area "pki",
 * routes/edge-cache.ts) are forgotten once it answers: the caller's next CRL read is the new one.
 */
export async function rebuildCrls(env: Env, mount: MountRow, opts: { force?: boolean; shards?: number[] } = {}): Promise<string[]> {
  const req: CrlBuildRequest = { kind: "complete", force: opts.force ?? false };
  if (opts.shards) req.shards = opts.shards;
  const r = await authorityOf(env, mount).crlRebuild(mount, req);
  invalidate("pki");
  return [...r.warnings, ...r.errors];
}

/** Delta rebuild through the Authority (crl/rotate-delta, revocations with delta CRLs); invalidates as rebuildCrls. */
export async function rebuildDeltaCrls(env: Env, mount: MountRow): Promise<CrlBuildReport> {
  const r = await authorityOf(env, mount).crlRebuild(mount, { kind: "delta", force: false });
  invalidate("pki");
  return r;
}

/** Seconds of a config/crl duration string; the default when unparsable (validated on write). */
export function durationOr(value: string, fallback: number): number {
  try {
    return parseDurationSeconds(value);
  } catch {
    return fallback;
  }
}

/** Where an entry goes: its issuer's group, else (issuer gone) the default issuer's group. */
function routeEntries(groups: CrlGroup[], issuers: IssuerRow[]) {
  const groupOf = new Map<string, CrlGroup>();
  for (const g of groups) for (const m of g.members) groupOf.set(m.id, g);
  const known = new Set(issuers.map((i) => i.id));
  const fallback = groups.find((g) => g.hasDefault) ?? null;
  // Issuer certificates are never taken from revocation rows: a revoked issuer goes on its
  // parents' CRLs through the issuer records (upstream augmentWithRevokedIssuers), never its own.
  const issuerSerials = new Set(issuers.map((i) => i.serial));
  return (issuerId: string, serial: string): CrlGroup | null => {
    if (issuerSerials.has(serial)) return null;
    if (known.has(issuerId)) return groupOf.get(issuerId) ?? null;
    return fallback;
  };
}

/** Revoked issuers on the CRLs of the other groups whose key signed them (complete CRLs only). */
async function addRevokedIssuers(issuers: IssuerRow[], targets: Target[]): Promise<void> {
  for (const r of issuers) {
    if (!r.revoked || !r.revocationTime) continue;
    const der = certDerFromPem(r.certificate);
    for (const t of targets) {
      if (t.group.members.some((m) => m.id === r.id)) continue;
      const rep = t.group.representative;
      if (rep.subjectDer !== r.issuerDer) continue;
      if (await isSignedBy(der, base64ToBytes(rep.publicKey))) t.writer.add(r.serial, Math.floor(r.revocationTime / 1000));
    }
  }
}

function freshestUrls(rep: IssuerRow, cfg: ConfigShapes, warnings: string[]): string[] {
  try {
    return resolveAia(rep.id, rep.aia, cfg.urls, cfg.cluster).deltaCrlDistributionPoints;
  } catch (e) {
    warnings.push(`issuer ${rep.id}: delta CRL distribution points left out of the Freshest CRL extension: ${e instanceof Error ? e.message : String(e)}`);
    return [];
  }
}

type CrlParams = Omit<Parameters<typeof signCertificateList>[0], "algorithm" | "issuer" | "authorityKeyId">;

/** Signs one CRL; returns its base64 slices as stored (revocation-store.ts crlBase64Slices). Releases the writer. */
async function signCrl(env: Env, group: CrlGroup, keys: Map<string, KeyRow>, warnings: string[], params: CrlParams): Promise<string[]> {
  const key = keys.get(group.representative.keyId);
  if (!key) throw new Error(`key ${group.representative.keyId} of issuer ${group.representative.id} is missing`);
  const s = await crlSigner(env, group, key, warnings);
  // signBytes, not crypto.subtle: EC P-224 keys are signed in software (x509.ts Signer).
  const der = await signCertificateList({ ...params, algorithm: s.algorithm, issuer: s.issuerName, authorityKeyId: s.facts.ski }, async (tbs) => {
    const raw = await signBytes(s.signer, tbs);
    return s.algorithm.family === "ec" ? ecdsaSignatureDer(raw) : raw;
  });
  return crlBase64Slices(der);
}

type CrlMetaRow = Awaited<ReturnType<typeof listCrlMeta>>[number];

/** What signing one build's CRLs needs. */
interface SignRun {
  env: Env;
  db: Db;
  mountId: string;
  kind: CrlKind;
  cfg: ConfigShapes;
  keys: Map<string, KeyRow>;
  metas: CrlMetaRow[];
  counters: CrlCounters;
  report: CrlBuildReport;
  thisUpdate: Date;
  nextUpdate: Date;
  maxSeq: number;
  /** The build's clock in Unix milliseconds: the least CRL number it may use (`nextCrlNumber`). */
  now: number;
}

/**
 * The next CRL number of a group: above every number stored for it, and never below the clock
 * (Unix milliseconds), so numbers keep growing across restores of D1 (invariants above). RFC 5280
 * §5.2.3 allows up to 20 octets; the clock needs 6 for millennia.
 */
export function nextCrlNumber(stored: number, now: number): number {
  return Math.max(stored + 1, Math.floor(now));
}

/**
 * Signs one target's CRLs (a complete one with its fresh empty delta, or a delta) and stores them
 * for every member issuer. Over max_crl_entries, the target gets an error and keeps its old CRLs.
 * A shard's CRLs carry its Issuing Distribution Point (critical, RFC 5280 §5.2.5), the delta the
 * same one as its base (§5.2.4).
 */
async function signAndStore(run: SignRun, t: Target): Promise<void> {
  const { env, db, kind, cfg, keys, counters, report, thisUpdate, nextUpdate, maxSeq } = run;
  const g = t.group;
  const limit = cfg.crl.max_crl_entries;
  if (limit > 0 && t.writer.count > limit) {
    const what = t.shard === null ? "" : ` (CRL shard ${t.shard})`;
    report.errors.push(`error building CRL: revocation list size (${t.writer.count}) exceeds configured maximum (${limit}) for issuer ${g.representative.id}${what}`);
    return;
  }
  const revoked = t.writer;
  const key = counterKey(t);
  const stored = Math.max(await counters.last(key), storedNumber(run.metas, g, t.shard));
  const meta = (k: CrlKind, number: number, seq: number) => ({ kind: storedKind(k, t.shard), number, maxSeq: seq, thisUpdate: thisUpdate.getTime(), nextUpdate: nextUpdate.getTime() });
  const rows: { kind: CrlKind; number: number; b64: string[] }[] = [];
  const scope = t.idp === null ? {} : { issuingDistributionPoint: { urls: t.idp, onlyUserCerts: true } };
  const number = nextCrlNumber(stored, run.now);
  if (kind === "complete") {
    // RFC 5280 §5.2.4: the delta names the complete CRL it updates; it lists nothing yet.
    await counters.store(key, number + 1);
    const fresh = freshestUrls(g.representative, cfg, report.warnings).map((u) => (t.shard === null ? u : shardUrl(u, t.shard)));
    const b64 = await signCrl(env, g, keys, report.warnings, { thisUpdate, nextUpdate, revoked, crlNumber: number, freshestCrlUrls: fresh, ...scope });
    const deltaB64 = await signCrl(env, g, keys, report.warnings, { thisUpdate, nextUpdate, revoked: null, crlNumber: number + 1, deltaOf: number, ...scope });
    rows.push({ kind: "complete", number, b64 }, { kind: "delta", number: number + 1, b64: deltaB64 });
  } else {
    await counters.store(key, number);
    const b64 = await signCrl(env, g, keys, report.warnings, { thisUpdate, nextUpdate, revoked, crlNumber: number, deltaOf: t.completeNumber, ...scope });
    rows.push({ kind: "delta", number, b64 });
  }
  const stmts = g.members.flatMap((m) => rows.flatMap((r) => putCrlStmts(db, { mountId: run.mountId, issuerId: m.id, ...meta(r.kind, r.number, maxSeq) }, r.b64)));
  await runRevocationBatch(db, stmts);
  for (const m of g.members) {
    const rk = reportKey(m.id, t.shard);
    for (const r of rows) report.numbers[rk] = { ...report.numbers[rk], [r.kind]: r.number };
  }
}

/**
 * Builds and stores the mount's complete CRLs (each with a fresh, empty delta) or its delta CRLs:
 * every scope (the full CRLs and each published shard), or only the shards `req.shards` names.
 * Runs inside the Authority only (see the invariants above).
 */
export async function buildMountCrls(env: Env, mount: MountRow, req: CrlBuildRequest, counters: CrlCounters, now = Date.now()): Promise<CrlBuildReport> {
  const db = openDb(env.DB);
  const [issuers, keyRows, cfg, metas] = await Promise.all([listIssuers(db, mount.id), listKeys(db, mount.id), getAllConfig(db, mount.id), listCrlMeta(db, mount.id)]);
  const report: CrlBuildReport = { built: "none", warnings: [], errors: [], numbers: {}, maxSeq: 0 };
  const crlCfg = cfg.crl;
  // Upstream: with the CRL disabled only a forced build writes (an empty CRL); deltas never.
  if (crlCfg.disable && (!req.force || req.kind === "delta")) return report;
  const { groups, warnings } = await crlGroups(issuers, cfg.issuers.default);
  report.warnings.push(...warnings);
  const keys = new Map(keyRows.map((k) => [k.id, k]));

  // A CRL issuer or shard without a complete CRL yet: a delta needs a base, so the build is complete.
  const { kind, targets } = planTargets(groups, scopesOf(req.shards, crlCfg.published_shards), metas, req.kind, cfg, report.warnings);
  const maxSeq = await maxRevokedSeq(db, mount.id);
  report.maxSeq = maxSeq;
  if (!crlCfg.disable) {
    await fillTargets(db, mount.id, kind, targets, maxSeq, routeEntries(groups, issuers));
    // Revoked issuers are CA certificates: the full CRLs only (a shard holds end-entity certificates).
    if (kind === "complete") await addRevokedIssuers(issuers, targets.filter((t) => t.shard === null));
  }

  const thisUpdate = new Date(Math.floor(now / 1000) * 1000);
  const nextUpdate = new Date(thisUpdate.getTime() + durationOr(crlCfg.expiry, 72 * 3600) * 1000);
  const run: SignRun = { env, db, mountId: mount.id, kind, cfg, keys, metas, counters, report, thisUpdate, nextUpdate, maxSeq, now };
  // Shards first, full CRLs last: each target's entries are freed once it is signed, so the full
  // CRL (the largest) is laid out and encoded when the shards' bytes are gone (crl.ts).
  for (const t of [...targets.filter((x) => x.shard !== null), ...targets.filter((x) => x.shard === null)]) await signAndStore(run, t);
  // CRLs of deleted issuers go (upstream removes CRLs no issuer points at any more).
  if (kind === "complete" && req.shards === undefined) await runRevocationBatch(db, deleteCrlsExceptStmts(db, mount.id, issuers.map((i) => i.id)));
  report.built = kind;
  return report;
}

/**
 * The stored CRL of an issuer (`shard` null: its full CRL, else that CRL shard), building the
 * mount's CRLs first when the issuer has no full CRL yet (new issuer). A missing shard of an issuer
 * that has its full CRL is not built on a read (no CRL distribution points: none is ever built).
 */
export async function crlFor(env: Env, db: Db, mount: MountRow, issuer: IssuerRow, kind: CrlKind, shard: number | null = null) {
  const found = await getCrlDer(db, mount.id, issuer.id, storedKind(kind, shard));
  if (found || issuer.keyId === "" || !issuer.usage.includes("crl-signing")) return found;
  if (shard !== null) {
    if (await getCrlDer(db, mount.id, issuer.id, "complete")) return null;
    await rebuildCrls(env, mount, { force: true });
    return getCrlDer(db, mount.id, issuer.id, storedKind(kind, shard));
  }
  // Forced, so that a mount with CRLs disabled still publishes its (empty) CRL, as upstream
  // does from root generation on.
  await rebuildCrls(env, mount, { force: true });
  return getCrlDer(db, mount.id, issuer.id, kind);
}

/**
 * The auto_rebuild schedule (Vault API /pki/config/crl), checked by the cron every minute: a complete
 * build when an issuer that may sign CRLs has none yet or a CRL is within the grace period of its
 * nextUpdate; with enable_delta, a delta build every delta_rebuild_interval when revocations
 * arrived since the last delta.
 */
export async function autoRebuildDue(db: Db, mount: MountRow, crl: CrlConfig, now = Date.now()): Promise<CrlKind | null> {
  const [metas, issuers, maxSeq] = await Promise.all([listCrlMeta(db, mount.id), listIssuers(db, mount.id), maxRevokedSeq(db, mount.id)]);
  const completes = metas.filter((m) => m.kind === "complete");
  const grace = durationOr(crl.auto_rebuild_grace_period, 12 * 3600) * 1000;
  const signers = issuers.filter((i) => i.keyId !== "" && i.usage.includes("crl-signing"));
  if (signers.some((i) => !completes.some((c) => c.issuerId === i.id))) return "complete";
  if (completes.some((c) => now > c.nextUpdate - grace)) return "complete";
  if (!crl.enable_delta) return null;
  const deltas = metas.filter((m) => m.kind === "delta");
  const lastDelta = Math.max(0, ...deltas.map((d) => d.thisUpdate));
  const covered = Math.min(...deltas.map((d) => d.maxSeq), maxSeq);
  const interval = durationOr(crl.delta_rebuild_interval, 15 * 60) * 1000;
  return maxSeq > covered && now - lastDelta >= interval ? "delta" : null;
}

/** "Warning N during CRL rebuild: …" as upstream words them. */
export function rebuildWarnings(warnings: string[]): string[] {
  return warnings.map((w, i) => `Warning ${i + 1} during CRL rebuild: ${w}`);
}
