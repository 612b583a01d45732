/**
 * A fake of the web host's project environment-variable API (reference §2.5) at the HTTP
 * boundary: bearer tokens, team ownership (`teamId` required for team projects), key rules,
 * upsert semantics, `{created, failed}` answers, delete by id, and `{error:{code,message}}`.
 */
import { applyFault, json, type Fault } from "./fake-router";

interface Env {
  id: string;
  key: string;
  value: string;
  type: string;
  target: string[];
}

interface Project {
  teamId: string | null;
  envs: Env[];
}

const err = (status: number, code: string, message: string) => json({ error: { code, message } }, status);
const TARGETS = new Set(["production", "preview", "development"]);

export class FakeWebhost {
  readonly projects = new Map<string, Project>();
  readonly faults: Fault[] = [];
  readonly calls: string[] = [];

  constructor(readonly token: string) {}

  addProject(id: string, teamId: string | null = null): void {
    this.projects.set(id, { teamId, envs: [] });
  }

  value(project: string, key: string): string | undefined {
    return this.projects.get(project)?.envs.find((e) => e.key === key)?.value;
  }

  async handle(req: Request): Promise<Response> {
    const faulted = applyFault(this.faults);
    if (faulted) return faulted;
    if (req.headers.get("authorization") !== `Bearer ${this.token}`) return err(403, "forbidden", "Not authorized");
    const url = new URL(req.url);
    this.calls.push(`${req.method} ${url.pathname}`);
    const m = /^\/v(9|10)\/projects\/([^/]+)\/env(?:\/([^/]+))?$/.exec(url.pathname);
    if (!m) return err(404, "not_found", "Not Found");
    const [, , projectId = "", envId] = m;
    const project = this.projects.get(decodeURIComponent(projectId));
    if (!project || project.teamId !== url.searchParams.get("teamId")) return err(404, "not_found", "Project not found");
    if (req.method === "GET" && !envId) return json({ envs: project.envs.map(({ value: _v, ...rest }) => ({ ...rest, value: "encrypted:..." })) });
    if (req.method === "POST" && !envId) {
      const b = (await req.json()) as Partial<Env>;
      if (typeof b.key !== "string" || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(b.key)) return err(400, "invalid_key", "The name of your Environment Variable contains invalid characters.");
      if (typeof b.value !== "string") return err(400, "bad_request", "value is required");
      if (!Array.isArray(b.target) || b.target.length === 0 || !b.target.every((t) => TARGETS.has(t))) return err(400, "bad_request", "target is invalid");
      const existing = project.envs.find((e) => e.key === b.key && e.target.some((t) => b.target?.includes(t)));
      if (existing && url.searchParams.get("upsert") !== "true") {
        return json({ created: [], failed: [{ error: { code: "ENV_ALREADY_EXISTS", message: "A variable with the name already exists", key: b.key } }] }, 201);
      }
      if (existing) Object.assign(existing, { value: b.value, type: b.type ?? "encrypted", target: b.target });
      const env = existing ?? { id: crypto.randomUUID().replace(/-/g, "").slice(0, 16), key: b.key, value: b.value, type: b.type ?? "encrypted", target: b.target };
      if (!existing) project.envs.push(env);
      return json({ created: { id: env.id, key: env.key, target: env.target, type: env.type }, failed: [] }, 201);
    }
    if (req.method === "DELETE" && envId) {
      const i = project.envs.findIndex((e) => e.id === envId);
      if (i < 0) return err(404, "not_found", "Environment Variable not found");
      const [removed] = project.envs.splice(i, 1);
      return json(removed ? { id: removed.id, key: removed.key } : {});
    }
    return err(405, "method_not_allowed", "Method not allowed");
  }
}

export const WEBHOST_HOSTS = ["api.vercel.com"];
