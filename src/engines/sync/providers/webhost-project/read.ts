/**
 * Reading a `webhost-project` variable back (docs/secrets-sync.md "3. Drift is detected and repaired"; Vercel REST API, project environment variables): the list finds the
 * variables with the key on the destination's targets, and the decrypted read of one variable
 * (`GET /v1/projects/{id}/env/{envId}`, the only version the host documents for it: another
 * answers 404, which failed the whole check, so no drift of the association was ever repaired)
 * returns each one. No variable is absent; a target of the destination no longer covered is a
 * change; a variable the host will not decrypt (type `sensitive`) is compared by its updatedAt.
 */
import type { ReadBack } from "../../connectors/read-back";
import type { ConnectorContext } from "../../connectors/types";
import { projectPath, request } from "./client";
import { targetsOf, variablesOf, wantedTargets } from "./variables";

export async function readWebhost(ctx: ConnectorContext, name: string): Promise<ReadBack> {
  const targets = wantedTargets(ctx);
  const mine = (await variablesOf(ctx, name)).filter((e) => targetsOf(e).some((t) => targets.includes(t)));
  if (mine.length === 0) return { kind: "absent" };
  const covered = new Set(mine.flatMap(targetsOf));
  if (!targets.every((t) => covered.has(t))) return { kind: "changed" };
  let value: string | undefined;
  for (const e of mine) {
    const one = (await request(ctx, "GET", projectPath(ctx, "v1", `/${encodeURIComponent(e.id)}`))) as { value?: unknown; decrypted?: unknown; updatedAt?: unknown } | null;
    if (one?.decrypted === false || typeof one?.value !== "string") {
      return typeof one?.updatedAt === "number" ? { kind: "meta", updatedAt: String(one.updatedAt) } : { kind: "changed" };
    }
    if (value !== undefined && value !== one.value) return { kind: "changed" };
    value = one.value;
  }
  return value === undefined ? { kind: "changed" } : { kind: "value", value };
}
