/**
 * `webhost-project` connector (reference §2.5): project environment variables. A write is an
 * upsert (`POST /v10/projects/{id}/env?upsert=true`) of an encrypted variable for the
 * destination's deployment environments, checking `failed` even on 201; a delete lists the
 * variables and deletes every one with the key by id (none left counts as done).
 * Ownership (issue 15 rule 2): the upsert answers the same whether it created or updated, so
 * before a name's first write the connector lists the variables: a variable with the key for one
 * of the destination's targets means it was there. The host has no tags.
 */
import { list } from "../../destinations/types";
import { ConnectorError, type Connector, type ConnectorContext } from "../types";
import { errorOf, projectPath, request } from "./client";

interface EnvVar {
  id: string;
  key: string;
  target?: string[];
}

async function listEnvs(ctx: ConnectorContext): Promise<EnvVar[]> {
  const res = (await request(ctx, "GET", projectPath(ctx, "v10"))) as { envs?: EnvVar[] } | null;
  if (!res || !Array.isArray(res.envs)) throw new ConnectorError("external", "MalformedResponse", "web host: unexpected list answer");
  return res.envs;
}

export const webhostConnector: Connector = {
  async put(ctx, secret) {
    const target = list(ctx.dest.connection, "deployment_environments");
    let created = false;
    if (secret.ownership === undefined) {
      created = !(await listEnvs(ctx)).some((e) => e.key === secret.name && (!Array.isArray(e.target) || e.target.some((t) => target.includes(t))));
    }
    const body = { key: secret.name, value: secret.value, type: "encrypted", target };
    type Answer = { created?: { id?: unknown; updatedAt?: unknown } | unknown[]; failed?: { error?: unknown }[] } | null;
    const res = (await request(ctx, "POST", projectPath(ctx, "v10", "?upsert=true"), body)) as Answer;
    const failed = res?.failed?.[0];
    if (failed) throw errorOf(400, failed, new Headers(), "create env");
    const made = Array.isArray(res?.created) ? res?.created[0] : res?.created;
    const rec = typeof made === "object" && made !== null ? (made as { id?: unknown; updatedAt?: unknown }) : {};
    return {
      created,
      version: typeof rec.id === "string" ? rec.id : undefined,
      updatedAt: typeof rec.updatedAt === "number" ? String(rec.updatedAt) : undefined,
    };
  },
  async remove(ctx, name) {
    for (const v of (await listEnvs(ctx)).filter((e) => e.key === name)) {
      try {
        await request(ctx, "DELETE", projectPath(ctx, "v9", `/${encodeURIComponent(v.id)}`));
      } catch (e) {
        if (!(e instanceof ConnectorError && e.code === "not_found")) throw e;
      }
    }
  },
};
