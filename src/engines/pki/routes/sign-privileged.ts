/**
 * The privileged signing paths (Vault API /pki/root/sign-self-issued, /pki/sign-verbatim):
 * root/sign-self-issued (sudo, as upstream's root paths), issuer/:ref/sign-self-issued (no sudo), sign-verbatim(/:role) and
 * issuer/:ref/sign-verbatim(/:role). Domain logic: src/engines/pki/issuance/sign-self-issued.ts, sign-verbatim.ts.
 */
import { route, type Req } from "../../../core/route";
import { signSelfIssued, signSelfIssuedFields } from "../issuance/sign-self-issued";
import { signVerbatim, signVerbatimFields } from "../issuance/sign-verbatim";
import { ctxOf } from "./common";
import { withCertLease } from "./issue";

function verbatim(perIssuer: boolean) {
  return async (req: Req<typeof signVerbatimFields>) => {
    const f = req.fields;
    const { role, ...out } = await signVerbatim(ctxOf(req as Req), f, {
      pathIssuer: perIssuer ? (f.issuer_ref ?? "default") : null,
      roleName: f.role ?? f.name ?? "",
      // Present-but-empty counts (upstream checks the field's presence, not its value).
      certMetadata: req.has("cert_metadata") ? f.cert_metadata : null,
    });
    // The path's role wins over the body's `name`; say so rather than drop it without a word
    // (the same courtesy as Vault's warning when a body key collides with a path capture).
    if (f.role && f.name && f.name !== f.role) {
      out.warnings = [...out.warnings, `name: the role "${f.role}" in the path was used; the body's name "${f.name}" was ignored`];
    }
    // The role's generate_lease takes effect here too (Vault API /pki/sign-verbatim/:role).
    return withCertLease(req as Req, role, out);
  };
}

export const signPrivilegedRoutes = [
  route({
    pattern: "root/sign-self-issued",
    fields: signSelfIssuedFields,
    sudo: ["update"],
    handlers: { update: (req) => signSelfIssued(ctxOf(req), req.fields, "default") },
  }),
  route({
    pattern: "issuer/:issuer_ref/sign-self-issued",
    fields: signSelfIssuedFields,
    handlers: { update: (req) => signSelfIssued(ctxOf(req), req.fields, req.fields.issuer_ref) },
  }),
  route({ pattern: "sign-verbatim/:role?", fields: signVerbatimFields, handlers: { update: verbatim(false) } }),
  route({ pattern: "issuer/:issuer_ref/sign-verbatim/:role?", fields: signVerbatimFields, handlers: { update: verbatim(true) } }),
];
