/**
 * Keyless destinations (docs/secrets-sync.md "Keyless destinations"): instead of a stored cloud
 * credential, a destination names the audience of an identity token Lanyard signs itself
 * (src/engines/identity/), which the cloud's token service exchanges for temporary credentials.
 * Vault 2's field names (Vault API: /sys/sync/destinations/:type/:name, `identity_token_audience`,
 * `identity_token_ttl`). What every cloud type shares lives here: the two fields, the either/or
 * rule, and the token itself; each provider's client.ts makes its own exchange and caches its
 * temporary credentials per destination in the provider-token cache (./http.ts), never in D1.
 */
import { parseDurationSeconds } from "../../../core/duration";
import type { FieldSchema } from "../../../core/fields";
import { DEFAULT_TOKEN_TTL_S, destinationIdentityToken, IdentityTokenError, MAX_TOKEN_TTL_S } from "../../identity";
import { invalid, str, type Connection } from "../destinations/types";
import { ConnectorError, type ConnectorContext } from "./types";

/** The fields a federated destination adds to its type's connection fields. */
export const FEDERATION_FIELDS = {
  identity_token_audience: {
    type: "string",
    default: "",
    description: "Audience of the identity token Lanyard signs for this destination; set it to use federation instead of stored credentials.",
  },
  identity_token_ttl: { type: "string", default: "", description: `Lifetime of each identity token (default ${DEFAULT_TOKEN_TTL_S / 60}m, at most ${MAX_TOKEN_TTL_S / 60}m).` },
} as const satisfies FieldSchema;

/** Whether a destination uses federation (it has an identity-token audience). */
export function isFederated(conn: Connection): boolean {
  return str(conn, "identity_token_audience") !== "";
}

const setIn = (conn: Connection, names: readonly string[]) => names.filter((n) => str(conn, n) !== "");

/**
 * The either/or rule: stored credentials (`stored`) and a federation setting (`federation`) are
 * never both set. Returns whether the destination is federated; refuses a mix naming the fields,
 * and checks `identity_token_ttl`.
 */
export function credentialMode(conn: Connection, stored: readonly string[], federation: readonly string[]): "stored" | "federated" {
  const s = setIn(conn, stored);
  const f = setIn(conn, ["identity_token_audience", "identity_token_ttl", ...federation]);
  if (s.length > 0 && f.length > 0) {
    throw invalid(s.join(", "), `cannot be set together with ${f.join(", ")}: a destination holds either stored credentials or a federation setting (identity_token_audience), never both`);
  }
  if (f.length > 0 && !isFederated(conn)) throw invalid("identity_token_audience", `is required with ${f.join(", ")}`);
  const audience = str(conn, "identity_token_audience");
  if (audience.length > 1024 || /\s/.test(audience)) throw invalid("identity_token_audience", "must be at most 1024 characters without white space");
  tokenTtl(conn);
  return f.length > 0 ? "federated" : "stored";
}

/** `identity_token_ttl` in seconds (default DEFAULT_TOKEN_TTL_S); 400 outside 1s..MAX_TOKEN_TTL_S. */
export function tokenTtl(conn: Connection): number {
  const raw = str(conn, "identity_token_ttl");
  if (raw === "") return DEFAULT_TOKEN_TTL_S;
  let secs: number;
  try {
    secs = parseDurationSeconds(raw);
  } catch {
    throw invalid("identity_token_ttl", `"${raw}" is not a duration such as 5m`);
  }
  if (secs < 1 || secs > MAX_TOKEN_TTL_S) throw invalid("identity_token_ttl", `must be between 1s and ${MAX_TOKEN_TTL_S / 60}m`);
  return secs;
}

/** A fresh identity token for the destination; a refusal names the step ("identity token: …"). */
export async function identityToken(ctx: ConnectorContext): Promise<string> {
  const c = ctx.dest.connection;
  try {
    return await destinationIdentityToken(ctx.env, {
      namespaceId: ctx.dest.namespaceId,
      type: ctx.dest.type,
      name: ctx.dest.name,
      audience: str(c, "identity_token_audience"),
      ttlSeconds: tokenTtl(c),
    });
  } catch (e) {
    if (e instanceof IdentityTokenError) throw new ConnectorError("client", "IdentityToken", `identity token: ${e.message}`);
    throw e;
  }
}

/** The cache key of a federated destination's temporary credentials: the destination and its federation setting. */
export function federationCacheParts(ctx: ConnectorContext, ...more: string[]): string[] {
  const c = ctx.dest.connection;
  return ["federated", ctx.dest.namespaceId, ctx.dest.type, ctx.dest.name, String(ctx.dest.createdAt), str(c, "identity_token_audience"), ...more];
}

/**
 * The PATCH hook of a type with both forms: sending one form replaces the other, so a PATCH can
 * switch a destination between stored credentials and federation (as repohost switches between a
 * token and an app). Sending both is left to `credentialMode` to refuse.
 */
export function switchCredentials(stored: readonly string[], federation: readonly string[]) {
  const fed = ["identity_token_audience", "identity_token_ttl", ...federation];
  const clear = (conn: Connection, names: readonly string[]): Connection => ({ ...conn, ...Object.fromEntries(names.map((n) => [n, ""])) });
  return (merged: Connection, sent: ReadonlySet<string>): Connection => {
    const sentStored = stored.some((n) => sent.has(n) && str(merged, n) !== "");
    const sentFederation = sent.has("identity_token_audience") && isFederated(merged);
    if (sentFederation && !stored.some((n) => sent.has(n))) return clear(merged, stored);
    if (sentStored && !fed.some((n) => sent.has(n))) return clear(merged, fed);
    return merged;
  };
}
