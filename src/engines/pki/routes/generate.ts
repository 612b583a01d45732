/**
 * CA generation paths (Vault API /pki/root/generate/:type, /pki/intermediate/generate/:type): root/generate, issuers/generate/root,
 * root/rotate, intermediate/generate, issuers/generate/intermediate, root/sign-intermediate,
 * issuer/:ref/sign-intermediate, DELETE root (sudo).
 */
import { route } from "../../../core/route";
import { deleteAllIssuersAndKeys } from "../storage/store";
import { crossSignFields, generateIntermediate, generateRoot, intermediateFields, rootFields, signIntermediate, signIntermediateFields } from "../ca/generate";
import { ctxOf, mountOf } from "./common";

export const generateRoutes = [
  route({
    pattern: "root/generate/:type",
    fields: rootFields,
    handlers: { update: (req) => generateRoot(ctxOf(req), req.fields, (n) => req.has(n as keyof typeof rootFields & string)) },
  }),
  route({
    pattern: "issuers/generate/root/:type",
    fields: rootFields,
    handlers: { update: (req) => generateRoot(ctxOf(req), req.fields, (n) => req.has(n as keyof typeof rootFields & string)) },
  }),
  route({
    pattern: "root/rotate/:type",
    fields: rootFields,
    handlers: { update: (req) => generateRoot(ctxOf(req), req.fields, (n) => req.has(n as keyof typeof rootFields & string), { rotate: true }) },
  }),
  route({
    pattern: "intermediate/generate/:type",
    fields: intermediateFields,
    handlers: { update: (req) => generateIntermediate(ctxOf(req), req.fields, (n) => req.has(n as keyof typeof intermediateFields & string)) },
  }),
  route({
    pattern: "issuers/generate/intermediate/:type",
    fields: intermediateFields,
    handlers: { update: (req) => generateIntermediate(ctxOf(req), req.fields, (n) => req.has(n as keyof typeof intermediateFields & string)) },
  }),
  route({
    // A CSR for an existing key of the mount, to have it cross-signed elsewhere (Vault API /pki/intermediate/cross-sign).
    pattern: "intermediate/cross-sign",
    fields: crossSignFields,
    handlers: {
      update: (req) => generateIntermediate(ctxOf(req), { ...req.fields, type: "existing" }, (n) => req.has(n as keyof typeof crossSignFields & string)),
    },
  }),
  route({
    pattern: "root/sign-intermediate",
    fields: signIntermediateFields,
    handlers: { update: (req) => signIntermediate(ctxOf(req), req.fields, "default") },
  }),
  route({
    pattern: "issuer/:issuer_ref/sign-intermediate",
    fields: signIntermediateFields,
    handlers: { update: (req) => signIntermediate(ctxOf(req), req.fields, req.fields.issuer_ref) },
  }),
  route({
    pattern: "root",
    sudo: ["delete"],
    handlers: {
      // Deletes every issuer and key of the mount; issued certificates stay (Vault API DELETE /pki/root).
      async delete(req) {
        await deleteAllIssuersAndKeys(req.db, mountOf(req).id);
        return {
          data: null,
          warnings: ["DELETE /root deletes all keys and issuers; prefer the new multi-issuer interface (DELETE /issuer/:ref and DELETE /key/:ref) for finer control."],
        };
      },
    },
  }),
];
