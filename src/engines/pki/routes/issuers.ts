/**
 * issuers, issuer/:ref (+ json/der/pem), config/issuers, root/replace, imports
 * (issuers/import/bundle|cert, config/ca, intermediate/set-signed) — Vault API /pki/issuer/:issuer_ref, /pki/issuers/import/bundle.
 */
import { badRequest, notFound } from "../../../core/errors";
import { defineFields } from "../../../core/fields";
import { ALL_USAGES } from "../defaults";
import { aiaUrlFields, cssUnset, issuerRefField } from "../fields";
import { route, type Req } from "../../../core/route";
import { privateKeyFacts, publicKeyFacts, toPkcs8 } from "../x509/asn1";
import { base64ToBytes } from "../../../core/encoding";
import { DerError } from "../x509/der";
import {
  certDerFromPem,
  checkObjectName,
  importIssuersAndKeys,
  issuerView,
  rebuildChains,
  resolveIssuerIn,
  chainPems,
} from "../ca/issuers";
import { checkKeySize } from "../x509/keytypes";
import { PemError, decodePemBlocks } from "../x509/pem";
import {
  deleteIssuerStmt,
  getAllConfig,
  listIssuers,
  listRoles,
  loadIssuanceState,
  putConfigStmt,
  runBatch,
  updateIssuerStmt,
  type IssuerRow,
  type Stmt,
} from "../storage/store";
import { mountOf, notModified, paginate } from "./common";
import { publicAnswer, servePublic } from "./edge-cache";
import type { IssuerAia } from "../storage/rows";
import { parseCertificate } from "../x509/x509";
import { hasPlaceholder } from "../../../core/text";

const REVOCATION_ALGORITHMS = [
  "SHA256WithRSA",
  "SHA384WithRSA",
  "SHA512WithRSA",
  "ECDSAWithSHA256",
  "ECDSAWithSHA384",
  "ECDSAWithSHA512",
  "SHA256WithRSAPSS",
  "SHA384WithRSAPSS",
  "SHA512WithRSAPSS",
  "Ed25519",
];

async function load(req: Req) {
  const mount = mountOf(req);
  const [issuers, cfg] = await Promise.all([listIssuers(req.db, mount.id), getAllConfig(req.db, mount.id)]);
  return { mount, issuers, cfg };
}

/**
 * The public reads' `:ref` (issuer/:ref/json|der|pem): from the PKI read model, no D1 round trip
 * in steady state (storage/store.ts loadIssuanceState); an unknown issuer is a 400 as below.
 */
async function publicIssuer(req: Req, ref: string) {
  const { issuers, config } = await loadIssuanceState(req.db, mountOf(req).id, null);
  return { issuers, issuer: resolveIssuerIn(issuers, config.issuers, ref) };
}

/** issuer/:ref/der and /pem through routes/edge-cache.ts (isolate, Cache API, ETag, 304). */
function issuerRaw(req: Req, ref: string, form: "der" | "pem"): Promise<Response> {
  return servePublic(req, {
    key: `issuer/${encodeURIComponent(ref)}/${form}`,
    http: true,
    async load() {
      const { issuer } = await publicIssuer(req, ref);
      return form === "der"
        ? publicAnswer(certDerFromPem(issuer.certificate), "application/pkix-cert", issuer.lastModified)
        : publicAnswer(issuer.certificate, "application/pem-certificate-chain", issuer.lastModified);
    },
  });
}

/** Resolves `:ref`; an unknown issuer is a 400 (upstream answers 500, OpenBao path_fetch_issuers.go). */
async function loadIssuer(req: Req, ref: string) {
  const ctx = await load(req);
  return { ...ctx, issuer: resolveIssuerIn(ctx.issuers, ctx.cfg.issuers, ref) };
}

/** AIA URLs must have a scheme and a host and, without templating, no {{…}} (Vault API /pki/config/urls). */
export function checkAiaUrls(field: string, urls: string[], templating: boolean): void {
  for (const u of urls) {
    let ok = false;
    if (templating && hasPlaceholder(u)) ok = true;
    else {
      try {
        const parsed = new URL(u);
        ok = parsed.protocol !== "" && parsed.host !== "" && !/\{\{|\}\}/.test(u);
      } catch {
        ok = false;
      }
    }
    if (!ok) throw badRequest(`invalid URL found in Authority Information Access (AIA) parameter ${field}: ${u}`);
  }
}

// Without defaults: an update (PATCH especially) changes only what the client sent.
const issuerFields = defineFields({
  ...issuerRefField,
  issuer_name: { type: "string", description: "Name of the issuer." },
  leaf_not_after_behavior: { type: "string", description: "err, truncate or permit." },
  usage: cssUnset("issuing-certificates, crl-signing, ocsp-signing, read-only."),
  revocation_signature_algorithm: { type: "string", description: "Signature algorithm of CRLs and OCSP responses." },
  manual_chain: cssUnset("Chain override: self first."),
  ...aiaUrlFields,
  enable_aia_url_templating: { type: "bool", description: "Expand {{issuer_id}} and cluster templates." },
});

/** `usage`: the known names only; no issuing on a revoked issuer, no CRL signing without CRLSign. */
function checkUsage(list: string[], issuer: IssuerRow): string[] {
  const bad = list.filter((u) => !["issuing-certificates", "crl-signing", "ocsp-signing", "read-only"].includes(u));
  if (bad.length > 0) throw badRequest(`Unable to parse specified usages: unknown usage: ${bad.join(", ")}`);
  const usage = ALL_USAGES.filter((u) => list.includes(u));
  if (usage.includes("issuing-certificates") && issuer.revoked) throw badRequest("Unable to set issuing-certificates usage on a revoked issuer");
  if (usage.includes("crl-signing") && !issuer.usage.includes("crl-signing")) {
    const ku = parseCertificate(certDerFromPem(issuer.certificate)).keyUsage;
    if (ku && !ku.includes(6)) throw badRequest("Unable to set crl-signing usage: the issuer certificate lacks the CRLSign key usage");
  }
  return usage;
}

/** `revocation_signature_algorithm`: a known name (any case; "" is automatic) that suits the key. */
async function checkRevocationAlgorithm(v: string, issuer: IssuerRow): Promise<string> {
  const lower = v.toLowerCase() === "pureed25519" ? "ed25519" : v.toLowerCase();
  const hit = v === "" ? "" : REVOCATION_ALGORITHMS.find((a) => a.toLowerCase() === lower);
  if (hit === undefined) throw badRequest(`Unknown signature algorithm: ${v}`);
  if (hit !== "") {
    // The algorithm must suit the issuer's key (upstream fails later, with a 500).
    const { type } = await publicKeyFacts(base64ToBytes(issuer.publicKey));
    const family = hit.includes("RSA") ? "rsa" : hit.startsWith("ECDSA") ? "ec" : "ed25519";
    if (family !== type) throw badRequest(`revocation_signature_algorithm: ${hit} cannot be used with this issuer's ${type} key`);
  }
  return hit;
}

async function writeIssuer(req: Req<typeof issuerFields>, patch: boolean) {
  const { mount, issuers, issuer, cfg } = await loadIssuer(req as Req, req.fields.ref);
  const f = req.fields;
  const given = (n: keyof typeof issuerFields & string) => req.has(n);
  const warnings: string[] = [];
  const next: IssuerRow = { ...issuer };

  if (given("issuer_name") || !patch) {
    const name = f.issuer_name ?? "";
    if (name !== "") checkObjectName("issuer", name);
    else if (!patch && given("issuer_name")) throw badRequest("expected non-empty issuer name");
    if (name !== "" && issuers.some((i) => i.id !== issuer.id && i.name === name)) throw badRequest("issuer name already in use");
    if (name !== issuer.name && issuer.name !== "") {
      const n = (await listRoles(req.db, mount.id)).filter((r) => r.role.issuer_ref === issuer.name).length;
      if (n > 0) warnings.push(`${n} roles reference ${issuer.name}; they will no longer resolve to this issuer`);
    }
    next.name = name;
  }
  if (given("leaf_not_after_behavior") || !patch) {
    const b = f.leaf_not_after_behavior ?? "err";
    if (!["err", "truncate", "permit"].includes(b)) {
      throw badRequest("Unknown value for field `leaf_not_after_behavior`. Possible values are `err`, `truncate`, and `permit`.");
    }
    next.leafNotAfterBehavior = b;
  }
  if (given("usage") || !patch) next.usage = checkUsage(f.usage ?? [...ALL_USAGES, "read-only"], issuer);
  if (given("revocation_signature_algorithm") || !patch) {
    next.revocationSignatureAlgorithm = await checkRevocationAlgorithm((f.revocation_signature_algorithm ?? "").trim(), issuer);
  }
  if (given("manual_chain") || !patch) {
    const refs = f.manual_chain ?? [];
    if (refs.length === 0) next.manualChain = null;
    else {
      const first = refs[0] ?? "";
      if (first !== "self" && resolveIssuerIn(issuers, cfg.issuers, first).id !== issuer.id) {
        throw badRequest(`expected first cert in chain to be a self-reference, but was: ${first}`);
      }
      next.manualChain = refs.map((r, i) => (i === 0 ? issuer.id : resolveIssuerIn(issuers, cfg.issuers, r).id));
    }
  }
  const aiaKeys = ["issuing_certificates", "crl_distribution_points", "delta_crl_distribution_points", "ocsp_servers"] as const;
  if (aiaKeys.some((k) => given(k)) || given("enable_aia_url_templating") || !patch) {
    const templating = f.enable_aia_url_templating ?? (patch ? (issuer.aia?.enable_aia_url_templating ?? false) : false);
    const aia: IssuerAia = {
      issuing_certificates: [],
      crl_distribution_points: [],
      delta_crl_distribution_points: [],
      ocsp_servers: [],
      enable_aia_url_templating: templating,
    };
    for (const k of aiaKeys) {
      aia[k] = given(k) ? (f[k] ?? []) : patch ? (issuer.aia?.[k] ?? []) : [];
      checkAiaUrls(k, aia[k], templating);
    }
    const empty = aiaKeys.every((k) => aia[k].length === 0) && !templating;
    next.aia = empty ? null : aia;
  }
  const changed = JSON.stringify(next) !== JSON.stringify(issuer);
  if (changed) next.lastModified = Date.now();
  const all = issuers.map((i) => (i.id === issuer.id ? next : i));
  const stmts: Stmt[] = [updateIssuerStmt(req.db, mount.id, issuer.id, { ...next })];
  if (JSON.stringify(next.manualChain) !== JSON.stringify(issuer.manualChain)) stmts.push(...(await rebuildChains(req.db, mount.id, all)));
  await runBatch(req.db, stmts);
  return { data: issuerView(next, all), warnings };
}

// -- import -----------------------------------------------------------------------------------

const importFields = defineFields({
  pem_bundle: { type: "string", description: "PEM certificates (and, where allowed, keys).", default: "" },
  certificate: { type: "string", description: "PEM certificate(s) (intermediate/set-signed).", default: "" },
});

async function importPem(req: Req<typeof importFields>, allowKeys: boolean, field: "pem_bundle" | "certificate") {
  const text = field === "pem_bundle" ? req.fields.pem_bundle : req.fields.certificate;
  const other = field === "pem_bundle" ? req.fields.certificate : req.fields.pem_bundle;
  if (text === "" && other === "") throw badRequest("'pem_bundle' and 'certificate' parameters were empty");
  if (text !== "" && other !== "") throw badRequest("'pem_bundle' and 'certificate' parameters were both provided");
  const input = text || other;
  // The field the data came in, for error messages.
  const given = text !== "" ? field : field === "pem_bundle" ? "certificate" : "pem_bundle";
  if (input.length < 75) {
    throw badRequest("provided data for import was too short; perhaps a path was passed to the API rather than the contents of a PEM file");
  }
  let blocks;
  try {
    blocks = decodePemBlocks(input);
  } catch (e) {
    throw badRequest(e instanceof PemError ? e.message : "invalid PEM data");
  }
  if (blocks.length === 0) throw badRequest("error when parsing block 0: invalid PEM data");
  const certs: Uint8Array<ArrayBuffer>[] = [];
  const keys: Uint8Array<ArrayBuffer>[] = [];
  for (const b of blocks) {
    if (b.label === "CERTIFICATE" || b.label === "X509 CERTIFICATE") certs.push(b.der);
    else if (["CRL", "X509 CRL", "EC PARAMS", "EC PARAMETERS"].includes(b.label)) continue;
    else {
      if (!allowKeys) throw badRequest("private keys found in the PEM bundle but not allowed by the path; use /issuers/import/bundle");
      let pkcs8;
      let facts;
      try {
        pkcs8 = toPkcs8(b.label, b.der);
        facts = privateKeyFacts(pkcs8);
      } catch (e) {
        throw badRequest(`unable to parse private key: ${e instanceof DerError ? e.message : String(e)}`);
      }
      checkKeySize(given, facts);
      keys.push(pkcs8);
    }
  }
  const mount = mountOf(req as Req);
  const r = await importIssuersAndKeys(req.db, req.env, mount.id, { certs, keys });
  const cfg = await getAllConfig(req.db, mount.id);
  const warnings = [...r.warnings];
  if (cfg.urls.issuing_certificates.length + cfg.urls.crl_distribution_points.length + cfg.urls.ocsp_servers.length === 0) {
    warnings.push("This mount hasn't configured any authority information access (AIA) fields; this may make it harder for systems to find missing certificates in the chain or to validate revocation status of certificates. Consider updating /config/urls or the newly generated issuer with this information.");
  }
  const orNull = (xs: string[]) => (xs.length > 0 ? xs : null);
  return {
    data: {
      imported_issuers: orNull(r.importedIssuers),
      imported_keys: orNull(r.importedKeys),
      existing_issuers: orNull(r.existingIssuers),
      existing_keys: orNull(r.existingKeys),
      mapping: r.mapping,
    },
    warnings,
  };
}

// -- defaults ---------------------------------------------------------------------------------

const defaultFields = defineFields({
  default: { type: "string", description: "Issuer to make the default." },
  default_follows_latest_issuer: { type: "bool", description: "New issuers become the default." },
});

async function writeDefault(req: Req<typeof defaultFields>, fallback: string | null) {
  const { mount, issuers, cfg } = await load(req as Req);
  const ref = (req.fields.default ?? fallback ?? "").trim();
  if (ref === "" || ref.toLowerCase() === "default") throw badRequest("Invalid issuer specification; must be non-empty and can't be 'default'.");
  let issuer: IssuerRow;
  try {
    issuer = resolveIssuerIn(issuers, cfg.issuers, ref);
  } catch (e) {
    throw badRequest(`Error resolving issuer reference: ${e instanceof Error ? e.message : String(e)}`);
  }
  const next = {
    default: issuer.id,
    default_follows_latest_issuer: req.fields.default_follows_latest_issuer ?? cfg.issuers.default_follows_latest_issuer,
  };
  const now = Date.now();
  const stmts: Stmt[] = [putConfigStmt(req.db, mount.id, "issuers", next)];
  if (next.default !== cfg.issuers.default) {
    for (const id of [next.default, cfg.issuers.default]) if (id) stmts.push(updateIssuerStmt(req.db, mount.id, id, { lastModified: now }));
  }
  await runBatch(req.db, stmts);
  const warnings = issuer.keyId === "" ? [`Issuer ${issuer.id} has no key; issuance with the default issuer will fail.`] : [];
  return { data: next, warnings };
}

export const issuerRoutes = [
  route({
    pattern: "issuers",
    public: ["list"],
    handlers: {
      async list(req) {
        const { issuers, cfg } = await load(req);
        const keys = paginate(issuers.map((i) => i.id), req);
        if (keys.length === 0) throw notFound();
        const info: Record<string, unknown> = {};
        for (const id of keys) {
          const i = issuers.find((x) => x.id === id);
          if (i) info[id] = { issuer_name: i.name, is_default: cfg.issuers.default === i.id, serial_number: i.serial, key_id: i.keyId };
        }
        return { data: { keys, key_info: info } };
      },
    },
  }),
  route({
    pattern: "issuer/:ref/json",
    fields: defineFields(issuerRefField),
    public: ["read"],
    handlers: {
      async read(req) {
        const { issuer, issuers } = await publicIssuer(req, req.fields.ref);
        const unchanged = notModified(req, issuer.lastModified);
        if (unchanged) return unchanged;
        return { data: { certificate: issuer.certificate, ca_chain: chainPems(issuer, issuers), issuer_id: issuer.id, issuer_name: issuer.name } };
      },
    },
  }),
  route({
    pattern: "issuer/:ref/der",
    fields: defineFields(issuerRefField),
    public: ["read"],
    handlers: {
      read: (req) => issuerRaw(req, req.fields.ref, "der"),
    },
  }),
  route({
    pattern: "issuer/:ref/pem",
    fields: defineFields(issuerRefField),
    public: ["read"],
    handlers: {
      read: (req) => issuerRaw(req, req.fields.ref, "pem"),
    },
  }),
  route({
    pattern: "issuer/:ref",
    fields: issuerFields,
    handlers: {
      async read(req) {
        const { issuer, issuers } = await loadIssuer(req, req.fields.ref);
        return { data: issuerView(issuer, issuers) };
      },
      update: (req) => writeIssuer(req, false),
      patch: (req) => writeIssuer(req, true),
      async delete(req) {
        const { mount, issuers, cfg } = await load(req);
        let issuer: IssuerRow;
        try {
          issuer = resolveIssuerIn(issuers, cfg.issuers, req.fields.ref);
        } catch {
          return { data: null };
        }
        const warnings: string[] = [];
        const rest = issuers.filter((i) => i.id !== issuer.id);
        for (const i of rest) {
          if (i.manualChain?.includes(issuer.id)) i.manualChain = null;
        }
        const stmts: Stmt[] = [deleteIssuerStmt(req.db, mount.id, issuer.id)];
        if (cfg.issuers.default === issuer.id) {
          stmts.push(putConfigStmt(req.db, mount.id, "issuers", { ...cfg.issuers, default: "" }));
          warnings.push(
            `Deleted issuer ${issuer.id} (via issuer_ref ${req.fields.ref}); this was configured as the default issuer. Operations without an explicit issuer will not work until a new default is configured.`,
          );
        }
        stmts.push(...(await rebuildChains(req.db, mount.id, rest)));
        await runBatch(req.db, stmts);
        return { data: null, warnings };
      },
    },
  }),
  route({
    pattern: "config/issuers",
    fields: defaultFields,
    handlers: {
      async read(req) {
        const { cfg } = await load(req);
        return { data: cfg.issuers };
      },
      update: (req) => writeDefault(req, null),
    },
  }),
  route({ pattern: "root/replace", fields: defaultFields, handlers: { update: (req) => writeDefault(req, "next") } }),
  route({ pattern: "issuers/import/bundle", fields: importFields, handlers: { update: (req) => importPem(req, true, "pem_bundle") } }),
  route({ pattern: "config/ca", fields: importFields, handlers: { update: (req) => importPem(req, true, "pem_bundle") } }),
  route({ pattern: "issuers/import/cert", fields: importFields, handlers: { update: (req) => importPem(req, false, "pem_bundle") } }),
  route({ pattern: "intermediate/set-signed", fields: importFields, handlers: { update: (req) => importPem(req, false, "certificate") } }),
];
