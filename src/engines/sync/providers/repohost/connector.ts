/**
 * `repohost` connector (GitHub REST API, Actions secrets): repository or environment Actions secrets. Each write
 * fetches the scope's public key and sends the value as a libsodium sealed box; deletes treat
 * 404 as done. Names must follow the host's rules (checked before any call).
 * Ownership (docs/secrets-sync.md "2. Never delete what Lanyard did not create"): the PUT answers 201 when it created the secret and 204 when it
 * updated one; the host has no tags, so the record in D1 is the only mark. Drift (rule 3): after
 * the PUT the secret's metadata is read for the `updated_at` the write produced (./read.ts).
 */
import { base64ToBytes, bytesToBase64 } from "../../../../core/encoding";
import { str } from "../../destinations/types";
import { ConnectorError, type Connector, type ConnectorContext } from "../../connectors/types";
import { request } from "./client";
import { seal } from "./sealed-box";

/** The host's secret-name rules: [A-Za-z0-9_], not starting with a digit or GITHUB_. */
export function checkSecretName(name: string): string | null {
  if (!/^[A-Za-z0-9_]{1,255}$/.test(name)) return "may contain only letters, digits and underscores";
  if (/^[0-9]/.test(name)) return "must not start with a digit";
  if (/^GITHUB_/i.test(name)) return "must not start with GITHUB_";
  return null;
}

/** The secrets path of the destination: the repository's Actions secrets, or its environment's. */
export function scope(ctx: ConnectorContext): string {
  const c = ctx.dest.connection;
  const repo = `/repos/${encodeURIComponent(str(c, "repository_owner"))}/${encodeURIComponent(str(c, "repository_name"))}`;
  const env = str(c, "environment_name");
  return env ? `${repo}/environments/${encodeURIComponent(env)}/secrets` : `${repo}/actions/secrets`;
}

function validName(name: string): void {
  const why = checkSecretName(name);
  if (why) throw new ConnectorError("client", "InvalidSecretName", `repository host: the secret name "${name}" ${why}`);
}

export const repohostConnector: Connector = {
  async put(ctx, secret) {
    validName(secret.name);
    const keyRes = await request(ctx, "GET", `${scope(ctx)}/public-key`);
    const key = (await keyRes.json()) as { key_id?: unknown; key?: unknown };
    if (typeof key.key !== "string" || typeof key.key_id !== "string") throw new ConnectorError("external", "MalformedResponse", "repository host: unexpected public key answer");
    const sealed = seal(new TextEncoder().encode(secret.value), base64ToBytes(key.key));
    const path = `${scope(ctx)}/${encodeURIComponent(secret.name)}`;
    const res = await request(ctx, "PUT", path, { encrypted_value: bytesToBase64(sealed), key_id: key.key_id });
    await res.body?.cancel();
    // The host never returns a value, so drift is seen by updated_at (docs/secrets-sync.md "3. Drift is detected and repaired"): read the
    // one this write produced. Without it (a failed read) the next reconciliation cannot judge.
    let updatedAt: string | undefined;
    try {
      const meta = (await (await request(ctx, "GET", path)).json()) as { updated_at?: unknown };
      if (typeof meta.updated_at === "string") updatedAt = meta.updated_at;
    } catch (e) {
      if (!(e instanceof ConnectorError)) throw e;
    }
    return { created: res.status === 201, updatedAt };
  },
  async remove(ctx, name) {
    validName(name);
    await request(ctx, "DELETE", `${scope(ctx)}/${encodeURIComponent(name)}`, undefined, [404]);
  },
};
