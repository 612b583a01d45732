/**
 * `cloudthree-sm` connector (Google Secret Manager API): add a version to the secret; when it does not
 * exist (404), create it (automatic replication, the ownership and custom labels) and add the
 * version. Unsync deletes the secret with all its versions (404 is done).
 * Ownership (docs/secrets-sync.md "2. Never delete what Lanyard did not create"): the secret Lanyard creates carries the label
 * `lanyard-managed=true` and counts as created; an addVersion that succeeds, or a create that
 * answers 409 (made meanwhile by someone else), means it was already there.
 */
import { bytesToBase64 } from "../../../../core/encoding";
import { ConnectorError, MANAGED_TAG, MANAGED_VALUE, type Connector, type ConnectorContext, type PutResult } from "../../connectors/types";
import { request } from "./client";

/** Labels cannot contain ":" and must start with a lower-case letter (Google Secret Manager API). */
const OWNERSHIP_LABEL = "hashicorp-vault";

function labels(ctx: ConnectorContext): Record<string, string> {
  const out: Record<string, string> = { [OWNERSHIP_LABEL]: "", [MANAGED_TAG]: MANAGED_VALUE };
  for (const [k, v] of Object.entries(ctx.dest.options.customTags)) out[k] = v;
  return out;
}

function checkName(name: string): void {
  if (!/^[A-Za-z0-9_-]{1,255}$/.test(name)) throw new ConnectorError("client", "INVALID_ARGUMENT", `secret manager: the secret id "${name}" must be 1-255 letters, digits, _ or -`);
}

function payload(value: string) {
  return { payload: { data: bytesToBase64(new TextEncoder().encode(value)) } };
}

/** The version number (last segment of the version's name) of an addVersion answer. */
async function written(res: Response, created: boolean): Promise<PutResult> {
  const b = (await res.json().catch(() => null)) as { name?: unknown } | null;
  return { created, version: typeof b?.name === "string" ? b.name.split("/").pop() : undefined };
}

export const cloudthreeConnector: Connector = {
  async put(ctx, secret) {
    checkName(secret.name);
    const id = encodeURIComponent(secret.name);
    const res = await request(ctx, "POST", `/secrets/${id}:addVersion`, payload(secret.value), [404]);
    if (res.status !== 404) return written(res, false);
    const made = await request(ctx, "POST", `/secrets?secretId=${id}`, { replication: { automatic: {} }, labels: labels(ctx) }, [409]);
    return written(await request(ctx, "POST", `/secrets/${id}:addVersion`, payload(secret.value)), made.status !== 409);
  },
  async remove(ctx, name) {
    checkName(name);
    await request(ctx, "DELETE", `/secrets/${encodeURIComponent(name)}`, undefined, [404]);
  },
};
