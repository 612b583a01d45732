/**
 * The identity engine's one face: Lanyard as an OIDC issuer of its own identity tokens (Vault's
 * plugin identity tokens; Vault API: /identity/oidc/plugins/.well-known/*, /identity/oidc/config).
 * It serves no mount: its routes are the built-in `identity/` backend (src/app/backends.ts). It
 * adds the key rotation cron job, declares the sealed private keys to the seal check, and hands
 * secrets sync `destinationIdentityToken` (the JWT a keyless destination presents to its cloud).
 */
import { loadConfig } from "../../core/config";
import { openDb } from "../../core/db/client";
import type { Engine } from "../../core/engine";
import { rotateIssuerKeys } from "./keys";
import { deleteNamespaceIdentity } from "./store";

export { identityRoutes } from "./routes";
export { destinationIdentityToken, IdentityTokenError, type DestinationIdentity } from "./issuer";
export { DEFAULT_TOKEN_TTL_S, MAX_TOKEN_TTL_S, rotateIssuerKeys, signIdentityToken } from "./keys";

export const identityEngine = {
  name: "identity",
  cron: [{ name: "identity-key-rotate", run: async (env) => void (await rotateIssuerKeys(openDb(env.DB), loadConfig(env).seal, Date.now())) }],
  sealedColumns: [{ table: "identity_keys", column: "sealed_private_key" }],
  purgeNamespace: (db, namespaceId) => deleteNamespaceIdentity(db, namespaceId),
} satisfies Engine;
