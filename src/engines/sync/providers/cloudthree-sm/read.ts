/**
 * Reading a `cloudthree-sm` secret back (docs/secrets-sync.md "3. Drift is detected and repaired"; Google Secret Manager API): the latest version's
 * payload (`versions/latest:access`). 404 (the secret or every version gone) is absent; 400
 * FAILED_PRECONDITION (the latest version disabled or destroyed out of band) is a change the
 * repair answers with a new version.
 */
import { base64ToBytes } from "../../../../core/encoding";
import type { ReadBack } from "../../connectors/read-back";
import type { ConnectorContext } from "../../connectors/types";
import { request } from "./client";

export async function readCloudthree(ctx: ConnectorContext, name: string): Promise<ReadBack> {
  const res = await request(ctx, "GET", `/secrets/${encodeURIComponent(name)}/versions/latest:access`, undefined, [400, 404]);
  if (res.status === 404 || res.status === 400) {
    await res.body?.cancel();
    return res.status === 404 ? { kind: "absent" } : { kind: "changed" };
  }
  const b = (await res.json()) as { payload?: { data?: unknown } };
  if (typeof b.payload?.data !== "string") return { kind: "changed" };
  return { kind: "value", value: new TextDecoder().decode(base64ToBytes(b.payload.data)) };
}
