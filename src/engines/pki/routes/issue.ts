/** issue/:role, sign/:role and their per-issuer forms (Vault API /pki/issue/:name, /pki/sign/:name). */
import { badRequest } from "../../../core/errors";
import { defineFields } from "../../../core/fields";
import { css, csrField, formatField, nameFields, notAfterField, privateKeyFormatField, removeRootsField } from "../fields";
import { route, type Req } from "../../../core/route";
import { checkFormat, checkPrivateKeyFormat } from "../issuance/format";
import { issueLeaf } from "../issuance/issue";
import { registerLease } from "../../../core/leases";
import { certLeaseData } from "../revocation/lease";
import { ctxOf } from "./common";
import type { CertificateResponse } from "../issuance/pipeline";
import type { Role } from "../policy/roles";
import { nameRequestFrom } from "../policy/policy";
import { loadIssuanceState } from "../storage/store";

const issueFields = defineFields({
  role: { type: "string", description: "Role name.", required: true },
  issuer_ref: { type: "string", description: "Issuer (per-issuer paths)." },
  ...nameFields,
  ttl: { type: "duration", description: "Requested TTL (at most the role's max_ttl).", default: 0 },
  ...formatField,
  ...privateKeyFormatField,
  ...notAfterField,
  ...removeRootsField,
  user_ids: css("User ID subject attributes."),
  cert_metadata: { type: "string", description: "Base64 metadata stored (sealed) with the certificate; read it at cert-metadata/:serial.", default: "" },
});

const signFields = defineFields({
  ...issueFields,
  ...csrField,
});

function handler(kind: "issue" | "sign") {
  return async (req: Req<typeof signFields>) => {
    const f = req.fields;
    const ctx = ctxOf(req as Req);
    // Role, issuers, keys and configuration: the isolate's PKI read model, else one D1 batch.
    const state = await loadIssuanceState(req.db, ctx.mount.id, f.role);
    const role = state.role;
    if (!role) throw badRequest(`unknown role: ${f.role}`);
    const issued = await issueLeaf(ctx, state, {
      role,
      issuerRef: f.issuer_ref ?? role.issuer_ref,
      names: nameRequestFrom(f, f.user_ids),
      ttl: f.ttl,
      notAfter: f.not_after,
      format: checkFormat(f.format),
      privateKeyFormat: checkPrivateKeyFormat(f.private_key_format),
      removeRootsFromChain: f.remove_roots_from_chain,
      csr: kind === "sign" ? (f.csr ?? "") : undefined,
      roleName: f.role,
      // Present-but-empty counts (upstream checks the field's presence, not its value).
      certMetadata: req.has("cert_metadata") ? f.cert_metadata : null,
    });
    return withCertLease(req as Req, role, issued);
  };
}

/**
 * generate_lease (stored roles keep it false under no_store, roles.ts): a Vault lease
 * `<request path>/<id>` running to the certificate's notAfter (upstream path_issue_sign.go), for
 * issue, sign and sign-verbatim with a role, and their issuer/:ref forms.
 */
export async function withCertLease(
  req: Req,
  role: Pick<Role, "generate_lease" | "no_store"> | null,
  issued: { data: CertificateResponse; warnings: string[] },
): Promise<{ data: CertificateResponse; warnings: string[]; topLevel?: Record<string, unknown> }> {
  if (!role || !role.generate_lease || role.no_store) return issued;
  const lease = await registerLease(req.db, {
    ns: req.ns,
    mount: ctxOf(req).mount,
    requestPath: req.path,
    validUntil: Number(issued.data.expiration) * 1000,
    internalData: certLeaseData(issued.data.serial_number),
  });
  return { ...issued, warnings: [...issued.warnings, ...lease.warnings], topLevel: lease.topLevel };
}

export const issueRoutes = [
  route({ pattern: "issue/:role", fields: issueFields, handlers: { update: handler("issue") } }),
  route({ pattern: "issuer/:issuer_ref/issue/:role", fields: issueFields, handlers: { update: handler("issue") } }),
  route({ pattern: "sign/:role", fields: signFields, handlers: { update: handler("sign") } }),
  route({ pattern: "issuer/:issuer_ref/sign/:role", fields: signFields, handlers: { update: handler("sign") } }),
];
