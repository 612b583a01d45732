/**
 * `webhost-project` connector (reference §2.5): project environment variables. A write is an
 * upsert (`POST /v10/projects/{id}/env?upsert=true`) of an encrypted variable for the
 * destination's deployment environments, checking `failed` even on 201; a delete lists the
 * variables and deletes every one with the key by id (none left counts as done).
 */
import { list } from "../../destinations/types";
import { ConnectorError, type Connector } from "../types";
import { errorOf, projectPath, request } from "./client";

interface EnvVar {
  id: string;
  key: string;
}

export const webhostConnector: Connector = {
  async put(ctx, secret) {
    const body = { key: secret.name, value: secret.value, type: "encrypted", target: list(ctx.dest.connection, "deployment_environments") };
    const res = (await request(ctx, "POST", projectPath(ctx, "v10", "?upsert=true"), body)) as { failed?: { error?: unknown }[] } | null;
    const failed = res?.failed?.[0];
    if (failed) throw errorOf(400, failed, new Headers(), "create env");
  },
  async remove(ctx, name) {
    const res = (await request(ctx, "GET", projectPath(ctx, "v10"))) as { envs?: EnvVar[] } | null;
    if (!res || !Array.isArray(res.envs)) throw new ConnectorError("external", "MalformedResponse", "web host: unexpected list answer");
    for (const v of res.envs.filter((e) => e.key === name)) {
      try {
        await request(ctx, "DELETE", projectPath(ctx, "v9", `/${encodeURIComponent(v.id)}`));
      } catch (e) {
        if (!(e instanceof ConnectorError && e.code === "not_found")) throw e;
      }
    }
  },
};
