/**
 * The certificate profile (RFC 5280 §4.2): which extensions a leaf or CA certificate
 * gets, and the AIA / CRL distribution point URLs (Vault API /pki/config/urls). Pure functions returning DER.
 */
import { badRequest } from "../../../core/errors";
import {
  KEY_USAGE_BITS,
  aiaExtension,
  akiExtension,
  basicConstraintsExtension,
  certificatePoliciesExtension,
  distributionPointsExtension,
  extKeyUsageExtension,
  keyUsageExtension,
  nameConstraintsExtension,
  sanExtension,
  sanIsEmpty,
  skiExtension,
  type ExtensionDer,
  type PolicyIdentifier,
  type SanSpec,
} from "../x509/asn1";
import type { Role } from "../policy/roles";
import type { ClusterConfig, IssuerRow, UrlsConfig } from "../storage/store";
import { hasPlaceholder } from "../../../core/text";

export const EKU_OIDS: Record<string, string> = {
  any: "2.5.29.37.0",
  serverauth: "1.3.6.1.5.5.7.3.1",
  clientauth: "1.3.6.1.5.5.7.3.2",
  codesigning: "1.3.6.1.5.5.7.3.3",
  emailprotection: "1.3.6.1.5.5.7.3.4",
  ipsecendsystem: "1.3.6.1.5.5.7.3.5",
  ipsectunnel: "1.3.6.1.5.5.7.3.6",
  ipsecuser: "1.3.6.1.5.5.7.3.7",
  timestamping: "1.3.6.1.5.5.7.3.8",
  ocspsigning: "1.3.6.1.5.5.7.3.9",
  microsoftservergatedcrypto: "1.3.6.1.4.1.311.10.3.3",
  netscapeservergatedcrypto: "2.16.840.1.113730.4.1",
};

/** Key usage names (case-insensitive, unknown names ignored as upstream does) → bit positions. */
export function keyUsageBits(names: string[]): number[] {
  const bits = new Set<number>();
  for (const n of names) {
    const b = KEY_USAGE_BITS[n.trim().toLowerCase().replace(/^keyusage/, "")];
    if (b !== undefined) bits.add(b);
  }
  return [...bits].sort((a, b) => a - b);
}

/** EKU OIDs: the role flags, then ext_key_usage names, then ext_key_usage_oids (deduplicated). */
export function extKeyUsageOids(role: Pick<Role, "server_flag" | "client_flag" | "code_signing_flag" | "email_protection_flag" | "ext_key_usage" | "ext_key_usage_oids">): string[] {
  const out: string[] = [];
  const add = (o: string | undefined) => {
    if (o && !out.includes(o)) out.push(o);
  };
  if (role.server_flag) add(EKU_OIDS.serverauth);
  if (role.client_flag) add(EKU_OIDS.clientauth);
  if (role.code_signing_flag) add(EKU_OIDS.codesigning);
  if (role.email_protection_flag) add(EKU_OIDS.emailprotection);
  for (const n of role.ext_key_usage) add(EKU_OIDS[n.trim().toLowerCase().replace(/^extkeyusage/, "")]);
  for (const o of role.ext_key_usage_oids) add(o);
  return out;
}

export interface AiaUrls {
  issuingCertificates: string[];
  crlDistributionPoints: string[];
  deltaCrlDistributionPoints: string[];
  ocspServers: string[];
}

/**
 * The URLs a certificate signed by `issuerId` carries (Vault API /pki/config/urls): the issuer's own set when any of
 * it is configured, else the mount's; templates expanded. A template that cannot be filled
 * fails the issuance with 400 (upstream 500s).
 */
export function resolveAia(issuerId: string, issuerAia: IssuerRow["aia"], urls: UrlsConfig, cluster: ClusterConfig): AiaUrls {
  const own =
    issuerAia &&
    (issuerAia.issuing_certificates.length > 0 || issuerAia.crl_distribution_points.length > 0 || issuerAia.ocsp_servers.length > 0);
  const src = own
    ? { ...issuerAia, enable_templating: issuerAia.enable_aia_url_templating }
    : urls;
  const t = { on: src.enable_templating, issuerId, cluster };
  return {
    issuingCertificates: expandUrls(src.issuing_certificates, t),
    crlDistributionPoints: expandUrls(src.crl_distribution_points, t),
    deltaCrlDistributionPoints: expandUrls(src.delta_crl_distribution_points, t),
    ocspServers: expandUrls(src.ocsp_servers, t),
  };
}

/** AIA URL templates filled ({{issuer_id}}, {{cluster_path}}, {{cluster_aia_path}}); a module-level function, not a closure per issue. */
function expandUrls(list: string[], t: { on: boolean; issuerId: string; cluster: ClusterConfig }): string[] {
  if (!t.on || list.length === 0) return list.slice();
  const { issuerId, cluster } = t;
  return list.map((u) => {
    const out = u
      .replaceAll("{{issuer_id}}", issuerId)
      .replaceAll("{{cluster_path}}", cluster.path)
      .replaceAll("{{cluster_aia_path}}", cluster.aia_path);
    if (hasPlaceholder(out) || (u.includes("{{cluster_path}}") && !cluster.path) || (u.includes("{{cluster_aia_path}}") && !cluster.aia_path)) {
      throw badRequest(`unable to fetch AIA URL information: template in "${u}" cannot be filled from config/cluster`);
    }
    return out;
  });
}

export const NO_AIA: AiaUrls = { issuingCertificates: [], crlDistributionPoints: [], deltaCrlDistributionPoints: [], ocspServers: [] };

function aiaExtensions(aia: AiaUrls): ExtensionDer[] {
  return [
    aiaExtension(aia.issuingCertificates, aia.ocspServers),
    distributionPointsExtension(aia.crlDistributionPoints, "crl"),
    distributionPointsExtension(aia.deltaCrlDistributionPoints, "delta"),
  ].filter((e): e is ExtensionDer => e !== null);
}

export function policyList(role: Pick<Role, "policy_identifiers">): PolicyIdentifier[] {
  return role.policy_identifiers.map((p) => (typeof p === "string" ? { oid: p } : p));
}

export interface LeafProfile {
  role: Role;
  sans: SanSpec;
  subjectEmpty: boolean;
  ski: Uint8Array;
  issuerSki: Uint8Array;
  aia: AiaUrls;
}

/** The extensions of a leaf that depend on its role alone. */
interface RoleExtensions {
  keyUsage: ExtensionDer | null;
  extKeyUsage: ExtensionDer | null;
  basicConstraints: ExtensionDer | null;
  policies: ExtensionDer | null;
}

/**
 * Role extensions by role object. Roles come from the per-isolate read model, one object per
 * stored version, and are never changed once decoded (a changed role is a new object), so the
 * object is the key; a WeakMap lets an entry go with its role. The ExtensionDer values are
 * shared and never written to (the certificate encoder copies them).
 */
const roleExtensionCache = new WeakMap<Role, RoleExtensions>();

function roleExtensions(role: Role): RoleExtensions {
  const hit = roleExtensionCache.get(role);
  if (hit) return hit;
  const exts: RoleExtensions = {
    keyUsage: keyUsageExtension(keyUsageBits(role.key_usage)),
    extKeyUsage: extKeyUsageExtension(extKeyUsageOids(role)),
    basicConstraints: role.basic_constraints_valid_for_non_ca ? basicConstraintsExtension(false) : null,
    policies: certificatePoliciesExtension(policyList(role)),
  };
  roleExtensionCache.set(role, exts);
  return exts;
}

/** Extensions of a leaf certificate, in the order Go's x509 package writes them. */
export function leafExtensions(p: LeafProfile): ExtensionDer[] {
  const r = roleExtensions(p.role);
  const exts: (ExtensionDer | null)[] = [
    r.keyUsage,
    r.extKeyUsage,
    r.basicConstraints,
    skiExtension(p.ski),
    akiExtension(p.issuerSki),
    ...aiaExtensions(p.aia),
    sanIsEmpty(p.sans) ? null : sanExtension(p.sans, p.subjectEmpty),
    r.policies,
  ];
  return exts.filter((e): e is ExtensionDer => e !== null);
}

export interface CaProfile {
  sans: SanSpec;
  subjectEmpty: boolean;
  ski: Uint8Array;
  /** The signer's SKI; equal to `ski` for a self-signed root. */
  issuerSki: Uint8Array;
  maxPathLength: number;
  keyUsage: string[];
  /**
   * Root generation honours only DigitalSignature from `keyUsage` (upstream's CA certificates
   * always get CertSign and CRLSign); sign-intermediate adds every requested usage to CertSign and
   * CRLSign (Vault API /pki/root/sign-intermediate, key_usage), plus `extraKeyUsageBits` (the CSR's, with use_csr_values).
   */
  additiveKeyUsage?: boolean;
  extraKeyUsageBits?: number[];
  extKeyUsage: string[];
  extKeyUsageOids: string[];
  permittedDnsDomains: string[];
  aia: AiaUrls;
}

/**
 * Extensions of a CA certificate (RFC 5280 §4.2.1.3, §4.2.1.9): CertSign and CRLSign always, DigitalSignature only
 * when requested; CA:true with the path length when one is set (RFC 5280 §4.2.1.9).
 */
export function caExtensions(p: CaProfile): ExtensionDer[] {
  const requested = keyUsageBits(p.keyUsage);
  const bits = p.additiveKeyUsage
    ? [...new Set([5, 6, ...requested, ...(p.extraKeyUsageBits ?? [])])].sort((a, b) => a - b)
    : requested.includes(0)
      ? [0, 5, 6]
      : [5, 6];
  const eku = extKeyUsageOids({
    server_flag: false,
    client_flag: false,
    code_signing_flag: false,
    email_protection_flag: false,
    ext_key_usage: p.extKeyUsage,
    ext_key_usage_oids: p.extKeyUsageOids,
  });
  const exts: (ExtensionDer | null)[] = [
    keyUsageExtension(bits),
    extKeyUsageExtension(eku),
    basicConstraintsExtension(true, p.maxPathLength >= 0 ? p.maxPathLength : undefined),
    skiExtension(p.ski),
    akiExtension(p.issuerSki),
    ...aiaExtensions(p.aia),
    sanIsEmpty(p.sans) ? null : sanExtension(p.sans, p.subjectEmpty),
    nameConstraintsExtension(p.permittedDnsDomains),
  ];
  return exts.filter((e): e is ExtensionDer => e !== null);
}
