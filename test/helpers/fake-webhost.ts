/**
 * A fake of the web host's project environment-variable API (reference §2.5) at the HTTP
 * boundary: bearer tokens, team ownership (`teamId` required for team projects), key rules,
 * upsert semantics, `{created, failed}` answers, delete by id, and `{error:{code,message}}`.
 */
import { FakeThrottle } from "./fake-limits";
import { applyFault, json, type Fault } from "./fake-router";

interface Env {
  id: string;
  key: string;
  value: string;
  type: string;
  target: string[];
  /** Ms since the epoch, as the host reports them. */
  createdAt: number;
  updatedAt: number;
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
  /**
   * Request limits (issue 15 rule 4): over them 429 `rate_limited` with the host's
   * x-ratelimit-limit/remaining/reset headers and Retry-After.
   */
  readonly throttle = new FakeThrottle();

  constructor(readonly token: string) {}

  /** Someone creates the variable in the host's dashboard before Lanyard writes it (issue 15 rule 2). */
  createOutOfBand(project: string, key: string, value: string, target: string[] = ["production", "preview", "development"]): void {
    const p = this.projects.get(project);
    if (!p) throw new Error(`fake-webhost: no project ${project}`);
    const now = Date.now();
    p.envs.push({ id: crypto.randomUUID().replace(/-/g, "").slice(0, 16), key, value, type: "encrypted", target, createdAt: now, updatedAt: now });
  }

  /** Someone changes the variable's value in the host's dashboard, not through Lanyard. */
  editOutOfBand(project: string, key: string, value: string): void {
    const env = this.projects.get(project)?.envs.find((e) => e.key === key);
    if (!env) throw new Error(`fake-webhost: no variable ${key} in ${project}`);
    Object.assign(env, { value, updatedAt: Date.now() });
  }

  /** Someone deletes the variable in the host's dashboard. */
  deleteOutOfBand(project: string, key: string): void {
    const p = this.projects.get(project);
    const before = p?.envs.length ?? 0;
    if (p) p.envs = p.envs.filter((e) => e.key !== key);
    if ((p?.envs.length ?? 0) === before) throw new Error(`fake-webhost: no variable ${key} in ${project}`);
  }

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
    const admission = this.throttle.enter(req, `${req.method} ${url.pathname}`);
    try {
      if (admission.throttled) {
        const reset = String(Math.ceil(Date.now() / 1000) + admission.retryAfter);
        return json({ error: { code: "rate_limited", message: "Rate limit exceeded", limit: { remaining: 0, reset: Number(reset) } } }, 429, {
          "x-ratelimit-limit": "100",
          "x-ratelimit-remaining": "0",
          "x-ratelimit-reset": reset,
          "retry-after": String(admission.retryAfter),
        });
      }
      return await this.envApi(req, url);
    } finally {
      admission.leave();
    }
  }

  private async envApi(req: Request, url: URL): Promise<Response> {
    const m = /^\/v(1|9|10)\/projects\/([^/]+)\/env(?:\/([^/]+))?$/.exec(url.pathname);
    if (!m) return err(404, "not_found", "Not Found");
    const [, , projectId = "", envId] = m;
    const project = this.projects.get(decodeURIComponent(projectId));
    if (!project || project.teamId !== url.searchParams.get("teamId")) return err(404, "not_found", "Project not found");
    if (req.method === "GET" && !envId) return json({ envs: project.envs.map(({ value: _v, ...rest }) => ({ ...rest, value: "encrypted:..." })) });
    if (req.method === "GET" && envId) {
      // One variable, decrypted (the dashboard's "reveal"); encrypted variables are readable.
      const env = project.envs.find((e) => e.id === envId);
      return env ? json({ ...env, decrypted: true }) : err(404, "not_found", "Environment Variable not found");
    }
    if (req.method === "POST" && !envId) {
      const b = (await req.json()) as Partial<Env>;
      if (typeof b.key !== "string" || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(b.key)) return err(400, "invalid_key", "The name of your Environment Variable contains invalid characters.");
      if (typeof b.value !== "string") return err(400, "bad_request", "value is required");
      if (!Array.isArray(b.target) || b.target.length === 0 || !b.target.every((t) => TARGETS.has(t))) return err(400, "bad_request", "target is invalid");
      const existing = project.envs.find((e) => e.key === b.key && e.target.some((t) => b.target?.includes(t)));
      if (existing && url.searchParams.get("upsert") !== "true") {
        return json({ created: [], failed: [{ error: { code: "ENV_ALREADY_EXISTS", message: "A variable with the name already exists", key: b.key } }] }, 201);
      }
      const now = Date.now();
      if (existing) Object.assign(existing, { value: b.value, type: b.type ?? "encrypted", target: b.target, updatedAt: now });
      const env = existing ?? { id: crypto.randomUUID().replace(/-/g, "").slice(0, 16), key: b.key, value: b.value, type: b.type ?? "encrypted", target: b.target, createdAt: now, updatedAt: now };
      if (!existing) project.envs.push(env);
      return json({ created: { id: env.id, key: env.key, target: env.target, type: env.type, createdAt: env.createdAt, updatedAt: env.updatedAt }, failed: [] }, 201);
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
