/**
 * Reading a `webhost-project` variable back (issue 15 rule 3; reference §2.5): the list finds the
 * variables with the key on the destination's targets, and the single-variable read returns each
 * one decrypted. No variable is absent; a target of the destination no longer covered is a
 * change; a variable the host will not decrypt (type `sensitive`) is compared by its updatedAt.
 */
import { list } from "../../destinations/types";
import type { ReadBack } from "../read-back";
import { ConnectorError, type ConnectorContext } from "../types";
import { projectPath, request } from "./client";

interface EnvVar {
  id: string;
  key: string;
  target?: string[];
  updatedAt?: unknown;
}

export async function readWebhost(ctx: ConnectorContext, name: string): Promise<ReadBack> {
  const targets = list(ctx.dest.connection, "deployment_environments");
  const res = (await request(ctx, "GET", projectPath(ctx, "v10"))) as { envs?: EnvVar[] } | null;
  if (!res || !Array.isArray(res.envs)) throw new ConnectorError("external", "MalformedResponse", "web host: unexpected list answer");
  const mine = res.envs.filter((e) => e.key === name && (!Array.isArray(e.target) || e.target.some((t) => targets.includes(t))));
  if (mine.length === 0) return { kind: "absent" };
  const covered = new Set(mine.flatMap((e) => (Array.isArray(e.target) ? e.target : targets)));
  if (!targets.every((t) => covered.has(t))) return { kind: "changed" };
  let value: string | undefined;
  for (const e of mine) {
    const one = (await request(ctx, "GET", projectPath(ctx, "v9", `/${encodeURIComponent(e.id)}`))) as { value?: unknown; decrypted?: unknown; updatedAt?: unknown } | null;
    if (one?.decrypted === false || typeof one?.value !== "string") {
      return typeof one?.updatedAt === "number" ? { kind: "meta", updatedAt: String(one.updatedAt) } : { kind: "changed" };
    }
    if (value !== undefined && value !== one.value) return { kind: "changed" };
    value = one.value;
  }
  return value === undefined ? { kind: "changed" } : { kind: "value", value };
}
