/**
 * Requests to the web host's REST API (Vercel REST API, project environment variables) through WEBHOST_ENDPOINT when set: bearer
 * token, `teamId` on every call when the destination has a team, failures (`{error:{code,
 * message}}`) turned into ConnectorErrors.
 */
import { envVar, str, type EndpointVar } from "../../destinations/types";
import { bearerRequest, clip, kindOf, parseRetryAfter } from "../../connectors/http";
import { ConnectorError, type ConnectorContext } from "../../connectors/types";
import { trimEndChar } from "../../../../core/text";

/** The operator variable that sends every call of this provider to another host (development only). */
export const ENDPOINT_VAR = "WEBHOST_ENDPOINT" satisfies EndpointVar;

const PROVIDER = "web host";

export function apiBase(env: Env): string {
  return trimEndChar(envVar(env, ENDPOINT_VAR) ?? "https://api.vercel.com", "/");
}

/**
 * A path of the project's variables. Each route answers under the version Vercel's REST API
 * reference documents for it ("Projects"): list and create `v10`, the decrypted read of one
 * variable `v1`, edit and delete `v9`; another version is an unknown route (404).
 */
export function projectPath(ctx: ConnectorContext, version: "v1" | "v9" | "v10", rest = ""): string {
  const team = str(ctx.dest.connection, "team_id");
  const [p, query = ""] = rest.split("?");
  const qs = [query, team ? `teamId=${encodeURIComponent(team)}` : ""].filter((x) => x !== "").join("&");
  return `/${version}/projects/${encodeURIComponent(str(ctx.dest.connection, "project_id"))}/env${p ?? ""}${qs ? `?${qs}` : ""}`;
}

export function errorOf(status: number, body: unknown, headers: Headers, what: string): ConnectorError {
  const e = typeof body === "object" && body !== null ? (body as { error?: { code?: unknown; message?: unknown } }).error : undefined;
  const code = typeof e?.code === "string" ? e.code : `HTTP${status}`;
  const message = typeof e?.message === "string" ? e.message : code;
  return new ConnectorError(kindOf(status), code, `${PROVIDER} ${what}: ${clip(message)}`, parseRetryAfter(headers.get("retry-after")));
}

/** One call; returns the parsed JSON body (or null) of a 2xx answer, throws otherwise. */
export async function request(ctx: ConnectorContext, method: string, path: string, body?: unknown): Promise<unknown> {
  const res = await bearerRequest({
    provider: PROVIDER,
    method,
    url: `${apiBase(ctx.env)}${path}`,
    body,
    token: str(ctx.dest.connection, "access_token"),
    error: async (res) => errorOf(res.status, await jsonOrNull(res), res.headers, `${method} env`),
    ctx,
  });
  return jsonOrNull(res);
}

/** The JSON body of an answer; null when it is empty or not JSON. */
async function jsonOrNull(res: Response): Promise<unknown> {
  const text = await res.text();
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}
