/**
 * The web host's variables of one key (Vercel REST API, project environment variables): a key may have several variables, each on
 * its own deployment environments (targets), and each with its own maker. Lanyard records the
 * ids of the variables it created under a name (the write's `version`, "ids:<id>,<id>"), so that
 * it deletes those and nothing else (docs/secrets-sync.md "Ownership").
 */
import { list } from "../../destinations/types";
import type { Ownership } from "../../external-store";
import { ConnectorError, type ConnectorContext } from "../../connectors/types";
import { projectPath, request } from "./client";

export interface EnvVar {
  id: string;
  key: string;
  target?: unknown;
  updatedAt?: unknown;
}

const IDS = "ids:";

/** The targets of a variable: the host answers an array, or one target as a string. */
export function targetsOf(e: EnvVar): string[] {
  if (Array.isArray(e.target)) return e.target.filter((t): t is string => typeof t === "string");
  return typeof e.target === "string" ? [e.target] : [];
}

/** The destination's deployment environments. */
export const wantedTargets = (ctx: ConnectorContext): string[] => list(ctx.dest.connection, "deployment_environments");

/** The variables with the key, from the project's list. */
export async function variablesOf(ctx: ConnectorContext, key: string): Promise<EnvVar[]> {
  const res = (await request(ctx, "GET", projectPath(ctx, "v10"))) as { envs?: unknown } | null;
  if (!res || !Array.isArray(res.envs)) throw new ConnectorError("external", "MalformedResponse", "web host: unexpected list answer");
  return (res.envs as EnvVar[]).filter((e) => typeof e === "object" && e !== null && e.key === key && typeof e.id === "string");
}

export const recordIds = (ids: string[]): string => `${IDS}${ids.join(",")}`;

/**
 * The ids of the variables Lanyard created under a name, from its record. A record written
 * before ids were kept holds the one id the upsert answered: Lanyard's own only when it created
 * the name; for a name it found, that id is the variable it found, never deleted.
 */
export function ownedIds(ownership: Ownership | undefined, version: string | undefined): string[] | null {
  if (version === undefined || version === "") return null;
  if (version.startsWith(IDS)) return version.slice(IDS.length).split(",").filter((x) => x !== "");
  return ownership === "created_by_lanyard" ? [version] : [];
}
