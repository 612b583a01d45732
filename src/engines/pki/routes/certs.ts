/**
 * Certificate reads (Vault API /pki/cert/:serial, /pki/ca): cert/:serial (+ /raw, /raw/pem), cert/ca,
 * cert/ca_chain, ca, ca/pem, ca_chain, certs; and config/urls, config/cluster.
 *
 * The public CA reads (ca, ca/pem, ca_chain, cert/ca, cert/ca_chain and their raw forms) take
 * the issuers from the PKI read model (storage/store.ts loadIssuanceState) and the raw ones go
 * through routes/edge-cache.ts (isolate and Cache API, ETag / Last-Modified / 304): no D1 round
 * trip in steady state, at most CACHE_TTL_MS stale, fresh at once in an isolate that changed them.
 */
import { ApiError, badRequest, notFound } from "../../../core/errors";
import { defineFields } from "../../../core/fields";
import { MAX_URL_BYTES } from "../../../core/limits";
import { aiaUrlFields } from "../fields";
import { route, type Req } from "../../../core/route";
import { base64ToBytes } from "../../../core/encoding";
import { certDerFromPem, chainPems } from "../ca/issuers";
import { normalizeSerial, toPem } from "../x509/pem";
import { getRevoked } from "../storage/revocation-store";
import { revocationData } from "../revocation/revoke";
import { getAllConfig, getCertWithBody, listCertSerials, loadIssuanceState, putConfigStmt, runBatch, type ClusterConfig, type IssuerRow, type UrlsConfig } from "../storage/store";
import { mountOf, notModified, listPage, raw } from "./common";
import { publicAnswer, servePublic } from "./edge-cache";
import { resolveAia } from "../issuance/profile";
import { checkAiaUrls } from "./issuers";

async function defaultIssuer(req: Req): Promise<{ issuer: IssuerRow | null; all: IssuerRow[] }> {
  const { issuers, config } = await loadIssuanceState(req.db, mountOf(req).id, null);
  return { issuer: issuers.find((i) => i.id === config.issuers.default) ?? null, all: issuers };
}

/** The default issuer's certificate (DER or PEM) or chain, raw, through the caches; 204 without one. */
function caRead(req: Req, what: "der" | "pem" | "chain"): Promise<Response> {
  return servePublic(req, {
    key: `ca/${what}`,
    http: true,
    async load() {
      const { issuer, all } = await defaultIssuer(req);
      if (!issuer) return null;
      if (what === "der") return publicAnswer(certDerFromPem(issuer.certificate), "application/pkix-cert", issuer.lastModified);
      if (what === "pem") return publicAnswer(issuer.certificate.trim(), "application/pem-certificate-chain", issuer.lastModified);
      // A chain changes when any issuer of it does: its newest modification.
      const members = all.filter((i) => issuer.caChain.includes(i.id));
      const lastModified = Math.max(issuer.lastModified, ...members.map((i) => i.lastModified));
      // Upstream labels this PEM chain application/pkix-cert (OpenBao path_fetch.go).
      return publicAnswer(chainPems(issuer, all).map((p) => p.trim()).join("\n"), "application/pkix-cert", lastModified);
    },
  });
}

const emptyRevocation = { revocation_time: 0, revocation_time_rfc3339: "" };

/** cert/<rest>: "ca", "ca_chain", or a serial, each optionally followed by /raw or /raw/pem. */
async function readCert(req: Req) {
  const rest = req.params.rest ?? "";
  const m = /^([^/]+)(\/raw(\/pem)?)?$/.exec(rest);
  if (!m) throw notFound([`unsupported path: cert/${rest}`]);
  const [, what = "", rawPart, pemPart] = m;
  if (what === "ca_chain") {
    if (rawPart) throw notFound([`unsupported path: cert/${rest}`]);
    const { issuer, all } = await defaultIssuer(req);
    if (!issuer) throw badRequest("no default issuer currently configured");
    const chain = chainPems(issuer, all).map((p) => p.trim()).join("\n");
    return { data: { certificate: chain, ca_chain: chain, ...emptyRevocation } };
  }
  if (what === "ca") {
    if (rawPart) return caRead(req, pemPart ? "pem" : "der");
    const { issuer } = await defaultIssuer(req);
    const unchanged = issuer ? notModified(req, issuer.lastModified) : null;
    if (unchanged) return unchanged;
    if (!issuer) throw badRequest("no default issuer currently configured");
    return { data: { certificate: issuer.certificate.trim(), ...emptyRevocation } };
  }
  const serial = normalizeSerial(what);
  if (!serial) throw notFound([`unsupported path: cert/${rest}`]);
  const row = await getCertWithBody(req.db, req.env.CERTS, mountOf(req).id, serial);
  if (rawPart) {
    if (!row) return raw(null, "");
    const der = base64ToBytes(row.der);
    return pemPart ? raw(toPem("CERTIFICATE", der), "application/pem-certificate-chain") : raw(der, "application/pkix-cert");
  }
  if (!row) throw notFound();
  // Revocation fields (Vault API /pki/cert/:serial): time and issuer association once revoked.
  const revoked = await getRevoked(req.db, mountOf(req).id, serial);
  const revocation = revoked
    ? { revocation_time: revoked.revocationTime, revocation_time_rfc3339: revocationData(revoked).revocation_time_rfc3339, ...(revoked.issuerId ? { issuer_id: revoked.issuerId } : {}) }
    : emptyRevocation;
  return { data: { certificate: toPem("CERTIFICATE", base64ToBytes(row.der)), ...revocation } };
}

const urlsFields = defineFields({
  ...aiaUrlFields,
  enable_templating: { type: "bool", description: "Expand {{issuer_id}}, {{cluster_path}}, {{cluster_aia_path}}." },
});

const urlKeys = ["issuing_certificates", "crl_distribution_points", "delta_crl_distribution_points", "ocsp_servers"] as const;

/**
 * With templating on, URLs are checked only at issuance; say now if config/cluster cannot fill
 * them (upstream's "issuance may fail" warning, OpenBao path_config_urls.go). Any issuer id fills
 * {{issuer_id}}, so a placeholder stands in for the issuer that will sign.
 */
function templatingWarnings(urls: UrlsConfig, cluster: ClusterConfig): string[] {
  if (!urls.enable_templating) return [];
  try {
    resolveAia("00000000-0000-0000-0000-000000000000", null, urls, cluster);
    return [];
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    return [`issuance may fail: ${e.messages.join("; ")}\n\nConsider setting the cluster-local address if it is not already set.`];
  }
}

export const certRoutes = [
  route({ pattern: "cert/*rest", public: ["read"], handlers: { read: readCert } }),
  route({
    pattern: "ca",
    public: ["read"],
    handlers: { read: (req) => caRead(req, "der") },
  }),
  route({
    pattern: "ca/pem",
    public: ["read"],
    handlers: { read: (req) => caRead(req, "pem") },
  }),
  route({
    pattern: "ca_chain",
    public: ["read"],
    handlers: { read: (req) => caRead(req, "chain") },
  }),
  route({
    pattern: "certs",
    handlers: {
      async list(req) {
        const keys = await listCertSerials(req.db, mountOf(req).id, listPage(req));
        if (keys.length === 0) throw notFound();
        return { data: { keys } };
      },
    },
  }),
  route({
    pattern: "config/urls",
    fields: urlsFields,
    handlers: {
      async read(req) {
        return { data: (await getAllConfig(req.db, mountOf(req).id)).urls };
      },
      async update(req) {
        const mount = mountOf(req);
        const cfg = await getAllConfig(req.db, mount.id);
        const next: UrlsConfig = { ...cfg.urls };
        if (req.has("enable_templating")) next.enable_templating = req.fields.enable_templating ?? false;
        for (const k of urlKeys) {
          if (req.has(k)) next[k] = req.fields[k] ?? [];
          checkAiaUrls(k, next[k], next.enable_templating);
        }
        await runBatch(req.db, [putConfigStmt(req.db, mount.id, "urls", next)]);
        return { data: next, warnings: templatingWarnings(next, cfg.cluster) };
      },
    },
  }),
  route({
    pattern: "config/cluster",
    fields: defineFields({
      path: { type: "string", maxBytes: MAX_URL_BYTES, description: "This mount's URL, e.g. https://pki.example.com/v1/pki." },
      aia_path: { type: "string", maxBytes: MAX_URL_BYTES, description: "URL used for AIA templating." },
    }),
    handlers: {
      async read(req) {
        return { data: (await getAllConfig(req.db, mountOf(req).id)).cluster };
      },
      async update(req) {
        const mount = mountOf(req);
        const cfg = await getAllConfig(req.db, mount.id);
        const next = { ...cfg.cluster };
        for (const k of ["path", "aia_path"] as const) {
          if (!req.has(k)) continue;
          const v = req.fields[k] ?? "";
          if (v !== "") {
            let ok = false;
            try {
              const u = new URL(v);
              ok = u.protocol !== "" && u.host !== "";
            } catch {
              ok = false;
            }
            if (!ok) throw badRequest(`${k}: "${v}" is not a URL with a scheme and a host`);
          }
          next[k] = v;
        }
        await runBatch(req.db, [putConfigStmt(req.db, mount.id, "cluster", next)]);
        return { data: next };
      },
    },
  }),
];
