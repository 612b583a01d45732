/**
 * Reading a `cloudtwo-kv` secret back (docs/secrets-sync.md "3. Drift is detected and repaired"; Azure Key Vault REST API): GET /secrets/{name}
 * returns the latest version's value. 404 (deleted, soft-deleted or purged) is absent; the repair
 * then recovers a soft-deleted secret before writing (./index.ts).
 */
import type { ReadBack } from "../../connectors/read-back";
import type { ConnectorContext } from "../../connectors/types";
import { request } from "./client";

export async function readCloudtwo(ctx: ConnectorContext, name: string): Promise<ReadBack> {
  const res = await request(ctx, "GET", `/secrets/${encodeURIComponent(name)}`, undefined, [404]);
  if (res.status === 404) {
    await res.body?.cancel();
    return { kind: "absent" };
  }
  const b = (await res.json()) as { value?: unknown };
  return typeof b.value === "string" ? { kind: "value", value: b.value } : { kind: "changed" };
}
