/**
 * CRL endpoints (pki-engine.md §6.1, content types and newlines §1.6, public paths §1.5):
 * crl, crl/pem, crl/delta, crl/delta/pem, cert/crl, cert/delta-crl, issuer/:ref/crl(/pem|/der),
 * issuer/:ref/crl/delta(/pem|/der); crl/rotate, crl/rotate-delta; config/crl (§6.3).
 * Reads never build, except an issuer's first CRL (crl-rebuild.ts crlFor); builds run in the
 * mount's Authority.
 */
import { badRequest } from "../../../core/errors";
import { defineFields } from "../../../core/fields";
import { issuerRefField } from "../fields";
import { route, type Reply, type Req } from "../../../core/route";
import { applyCrlConfigUpdate, crlConfigFields, crlConfigNeedsRebuild, crlConfigView, fullCrlConfig } from "../revocation/crl-config";
import { crlFor, rebuildCrls, rebuildDeltaCrls, rebuildWarnings } from "../revocation/crl-rebuild";
import { resolveIssuerIn } from "../ca/issuers";
import { toPem } from "../x509/pem";
import type { CrlKind, StoredCrl } from "../storage/revocation-store";
import { authorityOf } from "../issuance/serials";
import { getAllConfig, getConfig, listIssuers, putConfigStmt, runBatch, type IssuerRow } from "../storage/store";
import { mountOf, notModified, raw, withLastModified } from "./common";

type Shape = "der" | "pem" | "pem-newline" | "json-crl" | "json-certificate";

const PEM_LABEL = "X509 CRL";

async function issuerFor(req: Req, ref: string | null): Promise<IssuerRow | null> {
  const mount = mountOf(req);
  const [issuers, cfg] = await Promise.all([listIssuers(req.db, mount.id), getAllConfig(req.db, mount.id)]);
  if (ref === null) return issuers.find((i) => i.id === cfg.issuers.default) ?? null;
  return resolveIssuerIn(issuers, cfg.issuers, ref);
}

/** Renders a CRL in one of the §1.6 shapes; raw shapes answer 204 when there is none. */
function render(req: Req, issuer: IssuerRow | null, crl: StoredCrl | null, shape: Shape): Reply {
  // Renaming the issuer invalidates cached CRLs too (§1.6).
  const lastModified = crl ? Math.max(crl.row.thisUpdate, issuer?.lastModified ?? 0) : 0;
  const unchanged = crl ? notModified(req, lastModified) : null;
  if (unchanged) return unchanged;
  const pem = crl ? toPem(PEM_LABEL, crl.der) : "";
  switch (shape) {
    case "der":
      return withLastModified(raw(crl ? crl.der : null, "application/pkix-crl"), lastModified);
    case "pem":
      return withLastModified(raw(pem || null, "application/x-pem-file"), lastModified);
    case "pem-newline":
      return withLastModified(raw(pem ? `${pem}\n` : null, "application/x-pem-file"), lastModified);
    case "json-crl":
      return { data: { crl: pem } };
    case "json-certificate":
      return { data: { certificate: pem, revocation_time: 0, revocation_time_rfc3339: "" } };
  }
}

/** A CRL of the default issuer (ref null) or of `issuer/:ref`. */
async function serve(req: Req, ref: string | null, kind: CrlKind, shape: Shape): Promise<Reply> {
  const issuer = await issuerFor(req, ref);
  if (!issuer) {
    if (shape === "json-certificate") throw badRequest("no default issuer currently configured");
    return shape === "json-crl" ? { data: { crl: "" } } : raw(null, "");
  }
  const crl = await crlFor(req.env, req.db, mountOf(req), issuer, kind);
  return render(req, issuer, crl, shape);
}

const refField = defineFields(issuerRefField);

const defaultCrl = (pattern: string, kind: CrlKind, shape: Shape) =>
  route({ pattern, public: ["read"], handlers: { read: (req) => serve(req, null, kind, shape) } });

const issuerCrl = (pattern: string, kind: CrlKind, shape: Shape) =>
  route({ pattern, fields: refField, public: ["read"], handlers: { read: (req) => serve(req as Req, req.fields.ref, kind, shape) } });

export const crlRoutes = [
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
    handlers: {
      async read(req) {
        const mount = mountOf(req);
        // A forced build: with config/crl disable it publishes an empty CRL (§6.2).
        const r = await authorityOf(req.env, mount).crlRebuild(mount, { kind: "complete", force: true });
        if (r.errors.length > 0) throw badRequest(`Error during CRL building: ${r.errors.join("; ")}`);
        return { data: { success: true }, warnings: rebuildWarnings(r.warnings) };
      },
    },
  }),
  route({
    pattern: "crl/rotate-delta",
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
        const warnings = crlConfigNeedsRebuild(before, next) ? rebuildWarnings(await rebuildCrls(req.env, mount, { force: true })) : [];
        return { data: crlConfigView(next), warnings };
      },
    },
  }),
];
