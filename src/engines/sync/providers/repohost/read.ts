/**
 * Reading a `repohost` secret back (docs/secrets-sync.md "3. Drift is detected and repaired"; GitHub REST API, Actions secrets): the host never returns a
 * secret's value, only its metadata (`GET …/secrets/{name}`: name, created_at, updated_at), so
 * drift is a changed `updated_at` (Lanyard records the one its own write produced, ./index.ts).
 * 404 is absent. The host keeps whole seconds: an edit in the same second as Lanyard's write
 * shows the same `updated_at` and is not seen.
 */
import type { ReadBack } from "../../connectors/read-back";
import type { ConnectorContext } from "../../connectors/types";
import { request } from "./client";
import { scope } from "./connector";

export async function readRepohost(ctx: ConnectorContext, name: string): Promise<ReadBack> {
  const res = await request(ctx, "GET", `${scope(ctx)}/${encodeURIComponent(name)}`, undefined, [404]);
  if (res.status === 404) {
    await res.body?.cancel();
    return { kind: "absent" };
  }
  const b = (await res.json()) as { updated_at?: unknown };
  return typeof b.updated_at === "string" ? { kind: "meta", updatedAt: b.updated_at } : { kind: "changed" };
}
