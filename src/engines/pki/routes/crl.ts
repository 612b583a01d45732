/**
 * CRL endpoints (Vault API /pki/crl, /pki/issuer/:issuer_ref/crl; docs/pki-revocation-crl.md):
 * crl, crl/pem, crl/delta, crl/delta/pem, cert/crl, cert/delta-crl, issuer/:ref/crl(/pem|/der),
 * issuer/:ref/crl/delta(/pem|/der); crl/rotate, crl/rotate-delta; config/crl. Lanyard adds the
 * CRL shard paths (crl/shard/:shard…, issuer/:ref/crl/shard/:shard…; docs/pki-revocation-crl.md
 * "Sharded CRLs"), served the same way.
 * Reads never build, except an issuer's first CRL (crl-rebuild.ts crlFor); builds run in the
 * mount's Authority.
 *
 * Caching (docs/pki-revocation-crl.md "Caching", routes/edge-cache.ts): the raw shapes (DER, PEM)
 * are served from the isolate or the Cache API with ETag, Last-Modified and Cache-Control, and
 * 304 on If-None-Match / If-Modified-Since; the JSON shapes from the isolate's copy of the same
 * CRL. Either is at most CACHE_TTL_MS old, and forgotten at once in an isolate that revokes,
 * rebuilds (the Authority's answer) or changes config/crl or an issuer.
 */
import { badRequest, notFound } from "../../../core/errors";
import { defineFields } from "../../../core/fields";
import { issuerRefField } from "../fields";
import { route, type Reply, type Req } from "../../../core/route";
import { applyCrlConfigUpdate, crlConfigFields, crlConfigNeedsRebuild, crlConfigView, fullCrlConfig } from "../revocation/crl-config";
import { crlFor, rebuildCrls, rebuildDeltaCrls, rebuildWarnings } from "../revocation/crl-rebuild";
import { invalidate, ReadCache } from "../../../core/read-cache";
import { resolveIssuerIn } from "../ca/issuers";
import { toPem } from "../x509/pem";
import type { CrlKind, StoredCrl } from "../storage/revocation-store";
import { authorityOf } from "../issuance/serials";
import { getConfig, loadIssuanceState, putConfigStmt, runBatch, type IssuerRow } from "../storage/store";
import { mountOf, notModified } from "./common";
import { CRL_ENTRIES, MAX_CACHED_CRL_BYTES, cachedValue, publicAnswer, servePublic, type PublicAnswer } from "./edge-cache";

type Shape = "der" | "pem" | "pem-newline" | "json-crl" | "json-certificate";

const PEM_LABEL = "X509 CRL";

/** The issuer a CRL read names (null: no default issuer), from the PKI read model. */
async function issuerFor(req: Req, ref: string | null): Promise<IssuerRow | null> {
  const { issuers, config } = await loadIssuanceState(req.db, mountOf(req).id, null);
  if (ref === null) return issuers.find((i) => i.id === config.issuers.default) ?? null;
  return resolveIssuerIn(issuers, config.issuers, ref);
}

interface CrlRead {
  issuer: IssuerRow | null;
  crl: StoredCrl | null;
}

/**
 * The issuer and its stored CRL per mount, reference and kind (the JSON shapes read this), under
 * the same caps as the rendered CRLs (edge-cache.ts): CRL_ENTRIES, none over MAX_CACHED_CRL_BYTES.
 */
const crlReads = new ReadCache<CrlRead>("pki.crlReads", "pki", CRL_ENTRIES);

async function readCrl(req: Req, ref: string | null, kind: CrlKind, shard: number | null): Promise<CrlRead> {
  const mount = mountOf(req);
  return cachedValue(
    crlReads,
    `${mount.id}\n${ref ?? ""}\n${kind}\n${shard ?? ""}`,
    async () => {
      const issuer = await issuerFor(req, ref);
      return { issuer, crl: issuer ? await crlFor(req.env, req.db, mount, issuer, kind, shard) : null };
    },
    (r) => (r.crl?.der.length ?? 0) <= MAX_CACHED_CRL_BYTES,
  );
}

/** Renaming the issuer invalidates cached CRLs too (as upstream's Last-Modified does). */
const lastModifiedOf = (r: CrlRead): number => (r.crl ? Math.max(r.crl.row.thisUpdate, r.issuer?.lastModified ?? 0) : 0);

const RAW_TYPES = { der: "application/pkix-crl", pem: "application/x-pem-file", "pem-newline": "application/x-pem-file" } as const;

async function rawAnswer(r: CrlRead, shape: keyof typeof RAW_TYPES): Promise<PublicAnswer | null> {
  if (!r.crl) return null;
  const body = shape === "der" ? r.crl.der : shape === "pem" ? toPem(PEM_LABEL, r.crl.der) : `${toPem(PEM_LABEL, r.crl.der)}\n`;
  return publicAnswer(body, RAW_TYPES[shape], lastModifiedOf(r));
}

/** A CRL of the default issuer (ref null) or of `issuer/:ref`, as DER, PEM or JSON; `shard`: that CRL shard's. */
async function serve(req: Req, ref: string | null, kind: CrlKind, shape: Shape, shard: number | null = null): Promise<Reply> {
  if (shape === "der" || shape === "pem" || shape === "pem-newline") {
    return servePublic(req, {
      key: `crl/${encodeURIComponent(ref ?? "")}/${kind}/${shape}${shard === null ? "" : `/shard/${shard}`}`,
      size: "crl",
      http: true,
      async load() {
        const r = await readCrl(req, ref, kind, shard);
        // No issuer: 204 with no content type (raw(null)); an issuer without a CRL: 204 too.
        return rawAnswer(r, shape);
      },
    });
  }
  const r = await readCrl(req, ref, kind, shard);
  if (!r.issuer) {
    if (shape === "json-certificate") throw badRequest("no default issuer currently configured");
    return { data: { crl: "" } };
  }
  const unchanged = r.crl ? notModified(req, lastModifiedOf(r)) : null;
  if (unchanged) return unchanged;
  const pem = r.crl ? toPem(PEM_LABEL, r.crl.der) : "";
  if (shape === "json-crl") return { data: { crl: pem } };
  return { data: { certificate: pem, revocation_time: 0, revocation_time_rfc3339: "" } };
}

const refField = defineFields(issuerRefField);

const defaultCrl = (pattern: string, kind: CrlKind, shape: Shape) =>
  route({ pattern, public: ["read"], handlers: { read: (req) => serve(req, null, kind, shape) } });

const issuerCrl = (pattern: string, kind: CrlKind, shape: Shape) =>
  route({ pattern, fields: refField, public: ["read"], handlers: { read: (req) => serve(req as Req, req.fields.ref, kind, shape) } });

const SHARD_SPEC = { shard: { type: "string", description: "CRL shard number (docs/pki-revocation-crl.md \"Sharded CRLs\").", required: true } } as const;
const shardField = defineFields(SHARD_SPEC);
const issuerShardFields = defineFields({ ...issuerRefField, ...SHARD_SPEC });

/**
 * The shard a URL names: 400 when it is not a number, 404 when the mount publishes no such shard
 * (config/crl published_shards; a mount with one shard publishes none).
 */
async function shardOfPath(req: Req, given: string): Promise<number> {
  if (!/^(0|[1-9][0-9]{0,5})$/.test(given)) throw badRequest(`shard: "${given}" is not a CRL shard number`);
  const n = Number(given);
  const { config } = await loadIssuanceState(req.db, mountOf(req).id, null);
  if (config.crl.published_shards <= 1 || n >= config.crl.published_shards) throw notFound([`CRL shard ${n} is not published by this mount`]);
  return n;
}

const defaultShardCrl = (pattern: string, kind: CrlKind, shape: Shape) =>
  route({ pattern, fields: shardField, public: ["read"], handlers: { read: async (req) => serve(req as Req, null, kind, shape, await shardOfPath(req as Req, req.fields.shard)) } });

const issuerShardCrl = (pattern: string, kind: CrlKind, shape: Shape) =>
  route({
    pattern,
    fields: issuerShardFields,
    public: ["read"],
    handlers: { read: async (req) => serve(req as Req, req.fields.ref, kind, shape, await shardOfPath(req as Req, req.fields.shard)) },
  });

/**
 * Shard paths: every CRL path below with `/shard/<n>` appended (the URL a sharded certificate's
 * CDP names is whichever CRL path the operator configured plus that suffix, crl-shards.ts), and
 * the `crl/shard/<n>/pem|delta|…` forms.
 */
const shardRoutes = [
  defaultShardCrl("crl/shard/:shard", "complete", "der"),
  defaultShardCrl("crl/shard/:shard/pem", "complete", "pem"),
  defaultShardCrl("crl/shard/:shard/delta", "delta", "der"),
  defaultShardCrl("crl/shard/:shard/delta/pem", "delta", "pem"),
  defaultShardCrl("crl/delta/shard/:shard", "delta", "der"),
  defaultShardCrl("crl/pem/shard/:shard", "complete", "pem"),
  defaultShardCrl("crl/delta/pem/shard/:shard", "delta", "pem"),
  defaultShardCrl("cert/crl/shard/:shard", "complete", "json-certificate"),
  defaultShardCrl("cert/delta-crl/shard/:shard", "delta", "json-certificate"),
  issuerShardCrl("issuer/:ref/crl/pem/shard/:shard", "complete", "pem-newline"),
  issuerShardCrl("issuer/:ref/crl/delta/shard/:shard", "delta", "json-crl"),
  issuerShardCrl("issuer/:ref/crl/delta/pem/shard/:shard", "delta", "pem-newline"),
  issuerShardCrl("issuer/:ref/crl/shard/:shard", "complete", "json-crl"),
  issuerShardCrl("issuer/:ref/crl/shard/:shard/pem", "complete", "pem-newline"),
  issuerShardCrl("issuer/:ref/crl/shard/:shard/der", "complete", "der"),
  issuerShardCrl("issuer/:ref/crl/shard/:shard/delta", "delta", "json-crl"),
  issuerShardCrl("issuer/:ref/crl/shard/:shard/delta/pem", "delta", "pem-newline"),
  issuerShardCrl("issuer/:ref/crl/shard/:shard/delta/der", "delta", "der"),
  issuerShardCrl("issuer/:ref/crl/der/shard/:shard", "complete", "der"),
  issuerShardCrl("issuer/:ref/crl/delta/der/shard/:shard", "delta", "der"),
];

export const crlRoutes = [
  ...shardRoutes,
  defaultCrl("crl", "complete", "der"),
  defaultCrl("crl/pem", "complete", "pem"),
  defaultCrl("crl/delta", "delta", "der"),
  defaultCrl("crl/delta/pem", "delta", "pem"),
  defaultCrl("cert/crl", "complete", "json-certificate"),
  defaultCrl("cert/delta-crl", "delta", "json-certificate"),
  issuerCrl("issuer/:ref/crl", "complete", "json-crl"),
  issuerCrl("issuer/:ref/crl/pem", "complete", "pem-newline"),
  issuerCrl("issuer/:ref/crl/der", "complete", "der"),
  issuerCrl("issuer/:ref/crl/delta", "delta", "json-crl"),
  issuerCrl("issuer/:ref/crl/delta/pem", "delta", "pem-newline"),
  issuerCrl("issuer/:ref/crl/delta/der", "delta", "der"),
  route({
    pattern: "crl/rotate",
    readChangesState: true,
    handlers: {
      async read(req) {
        const mount = mountOf(req);
        // A forced build: with config/crl disable it publishes an empty CRL (as upstream).
        const r = await authorityOf(req.env, mount).crlRebuild(mount, { kind: "complete", force: true });
        // The Authority wrote the CRLs in its own isolate: forget this one's copies.
        invalidate("pki");
        if (r.errors.length > 0) throw badRequest(`Error during CRL building: ${r.errors.join("; ")}`);
        return { data: { success: true }, warnings: rebuildWarnings(r.warnings) };
      },
    },
  }),
  route({
    pattern: "crl/rotate-delta",
    readChangesState: true,
    handlers: {
      async read(req) {
        const mount = mountOf(req);
        const cfg = await getConfig(req.db, mount.id, "crl");
        if (!cfg.enable_delta) return { data: { success: true }, warnings: ["requested rebuild of delta CRL when delta CRL is not enabled; this is a no-op"] };
        const r = await rebuildDeltaCrls(req.env, mount);
        if (r.errors.length > 0) throw badRequest(`Error during delta CRL building: ${r.errors.join("; ")}`);
        return { data: { success: true }, warnings: rebuildWarnings(r.warnings) };
      },
    },
  }),
  route({
    pattern: "config/crl",
    fields: crlConfigFields,
    handlers: {
      async read(req) {
        return { data: crlConfigView(fullCrlConfig(await getConfig(req.db, mountOf(req).id, "crl"))) };
      },
      async update(req) {
        const mount = mountOf(req);
        const before = fullCrlConfig(await getConfig(req.db, mount.id, "crl"));
        const next = applyCrlConfigUpdate(before, req.fields, req.has);
        await runBatch(req.db, [putConfigStmt(req.db, mount.id, "crl", next)]);
        // OCSP and CRL answers depend on config/crl (ocsp_disable, ocsp_expiry, disable…).
        invalidate("pki");
        const warnings = crlConfigNeedsRebuild(before, next) ? rebuildWarnings(await rebuildCrls(req.env, mount, { force: true })) : [];
        return { data: crlConfigView(next), warnings };
      },
    },
  }),
];
