/**
 * revoke, revoke-with-key, issuer/:ref/revoke and LIST certs/revoked (Vault API /pki/revoke,
 * /pki/revoke-with-key, /pki/issuer/:issuer_ref/revoke, /pki/certs/revoked). Logic in ../revoke.ts.
 */
import { notFound } from "../../../core/errors";
import { defineFields } from "../../../core/fields";
import { issuerRefField } from "../fields";
import { route } from "../../../core/route";
import { listRevokedSerials } from "../storage/revocation-store";
import { revokeCertificate, revokeIssuer } from "../revocation/revoke";
import { ctxOf, listPage, mountOf } from "./common";

const target = {
  serial_number: { type: "string", description: "Serial number of the certificate, colon- or hyphen-separated hex." },
  certificate: { type: "string", description: "The certificate (PEM); it must be signed by an issuer of this mount." },
} as const;

const revokeFields = defineFields(target);
const revokeWithKeyFields = defineFields({
  ...target,
  private_key: { type: "string", description: "PEM private key of the certificate (proof of possession)." },
});

export const revokeRoutes = [
  route({
    pattern: "revoke",
    fields: revokeFields,
    handlers: {
      update: (req) =>
        revokeCertificate(ctxOf(req), {
          serialNumber: req.has("serial_number") ? req.fields.serial_number : undefined,
          certificate: req.has("certificate") ? req.fields.certificate : undefined,
          privateKey: undefined,
          withKey: false,
        }),
    },
  }),
  route({
    pattern: "revoke-with-key",
    fields: revokeWithKeyFields,
    handlers: {
      update: (req) =>
        revokeCertificate(ctxOf(req), {
          serialNumber: req.has("serial_number") ? req.fields.serial_number : undefined,
          certificate: req.has("certificate") ? req.fields.certificate : undefined,
          privateKey: req.has("private_key") ? req.fields.private_key : undefined,
          withKey: true,
        }),
    },
  }),
  route({
    pattern: "issuer/:ref/revoke",
    fields: defineFields(issuerRefField),
    handlers: { update: (req) => revokeIssuer(ctxOf(req), req.fields.ref) },
  }),
  route({
    pattern: "certs/revoked",
    handlers: {
      async list(req) {
        const keys = await listRevokedSerials(req.db, mountOf(req).id, listPage(req));
        if (keys.length === 0) throw notFound();
        return { data: { keys } };
      },
    },
  }),
];
