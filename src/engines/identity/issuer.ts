/**
 * The issuer of a namespace and the identity tokens secrets sync asks for. Vault names the plugin
 * issuer `<issuer setting>/v1/<namespace path>identity/oidc/plugins` (Vault API:
 * /identity/oidc/config `issuer`, /identity/oidc/plugins/.well-known/openid-configuration); a
 * namespace without its own setting uses the root namespace's (the deployment's public URL), and a
 * token is refused while neither is set: the clouds fetch the key set from that URL, so it must
 * be the address they reach.
 */
import { getNamespaceById } from "../../auth/namespace-store";
import { loadConfig } from "../../core/config";
import { openDb, type Db } from "../../core/db/client";
import { ROOT_NAMESPACE, type NamespaceRef } from "../../core/mount-store";
import { trimEndChar } from "../../core/text";
import { signIdentityToken } from "./keys";
import { getIssuerSetting } from "./store";

/** The issuer's path under a base URL: Vault's plugin-identity issuer path of the namespace. */
export function issuerPath(ns: NamespaceRef): string {
  return `/v1/${ns.path}identity/oidc/plugins`;
}

/** The namespace's own setting, else the root namespace's; null when neither is set. */
export async function issuerBase(db: Db, ns: NamespaceRef): Promise<string | null> {
  const own = await getIssuerSetting(db, ns.id);
  if (own !== null || ns.id === ROOT_NAMESPACE.id) return own;
  return getIssuerSetting(db, ROOT_NAMESPACE.id);
}

/** The `iss` of the namespace's tokens, or null when no issuer is set. */
export async function issuerUrl(db: Db, ns: NamespaceRef): Promise<string | null> {
  const base = await issuerBase(db, ns);
  return base === null ? null : `${trimEndChar(base, "/")}${issuerPath(ns)}`;
}

/** Why an identity token cannot be made (the caller names the step in its error). */
export class IdentityTokenError extends Error {}

export interface DestinationIdentity {
  namespaceId: string;
  /** The destination's type and name, in `sub`. */
  type: string;
  name: string;
  audience: string;
  ttlSeconds: number;
}

/**
 * A fresh identity token for a sync destination: `sub` is
 * `plugin-identity:<namespace id>:sync:<type>:<name>` (Vault's plugin-identity subject form,
 * `plugin-identity:<namespace id>:<class>:<accessor>`, with the destination in place of a mount),
 * `aud` the destination's `identity_token_audience`.
 */
export async function destinationIdentityToken(env: Env, d: DestinationIdentity): Promise<string> {
  const db = openDb(env.DB);
  const ns = await getNamespaceById(db, d.namespaceId);
  if (!ns) throw new IdentityTokenError("the destination's namespace no longer exists");
  const iss = await issuerUrl(db, ns);
  if (iss === null) throw new IdentityTokenError("no issuer is set: write identity/oidc/config issuer=<the public URL of this service>");
  return signIdentityToken(db, loadConfig(env).seal, {
    issuer: iss,
    subject: `plugin-identity:${ns.id}:sync:${d.type}:${d.name}`,
    audience: d.audience,
    ttlSeconds: d.ttlSeconds,
    lanyard: { namespace_id: ns.id, namespace_path: ns.path, destination_type: d.type, destination_name: d.name },
  });
}
