/**
 * Certificate metadata reads (Vault Enterprise "Read certificate metadata", "List certificate
 * metadata"): GET cert-metadata/:serial and LIST cert-metadata. Authenticated (unlike cert/).
 */
import { notFound } from "../../../core/errors";
import { route } from "../../../core/route";
import { openMetadata } from "../issuance/cert-metadata";
import { getMetadataRow, listMetadataSerials } from "../storage/metadata-store";
import { normalizeSerial } from "../x509/pem";
import { mountOf, paginate } from "./common";

export const certMetadataRoutes = [
  route({
    pattern: "cert-metadata",
    handlers: {
      async list(req) {
        const keys = paginate(await listMetadataSerials(req.db, mountOf(req).id), req);
        if (keys.length === 0) throw notFound();
        return { data: { keys } };
      },
    },
  }),
  route({
    // Serials carry colons, which the generic name segment does not match.
    pattern: "cert-metadata/*serial",
    handlers: {
      async read(req) {
        const serial = normalizeSerial(req.params.serial ?? "");
        if (!serial) throw notFound([`unsupported path: cert-metadata/${req.params.serial ?? ""}`]);
        const mount = mountOf(req);
        const row = await getMetadataRow(req.db, mount.id, serial);
        if (!row) throw notFound();
        const opened = await openMetadata(req.env, mount.id, serial, row.metadata);
        return {
          data: {
            issuer_id: row.issuerId,
            role: opened.role,
            serial_number: row.serial,
            // Vault's sample shows the certificate's notAfter as an RFC 3339 time here.
            expiration: new Date(row.notAfter * 1000).toISOString().replace(".000Z", "Z"),
            cert_metadata: opened.cert_metadata,
          },
        };
      },
    },
  }),
];
