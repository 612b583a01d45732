/**
 * A fake of the web host's project environment-variable API (Vercel REST API, project environment variables; Vercel's REST API
 * reference, "Projects": list `GET /v10/projects/{idOrName}/env`, create `POST /v10/…/env`,
 * decrypted read `GET /v1/…/env/{id}`, edit `PATCH /v9/…/env/{id}`, delete `DELETE /v9/…/env/{id}`)
 * at the HTTP boundary: each route answers only under its documented version (any other is a
 * 404, as an unknown route is), bearer tokens, team ownership (`teamId` required for team
 * projects), key rules, at most one variable of a key per target (a create or edit that would
 * make two answers a conflict), upsert semantics, `{created, failed}` answers, and
 * `{error:{code,message}}`. Several variables may share a key on different targets, as on the host.
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
   * Request limits (docs/secrets-sync.md "4. Provider limits are respected"): over them 429 `rate_limited` with the host's
   * x-ratelimit-limit/remaining/reset headers and Retry-After.
   */
  readonly throttle = new FakeThrottle();

  constructor(readonly token: string) {}

  /** Someone creates the variable in the host's dashboard before Lanyard writes it (docs/secrets-sync.md "2. Never delete what Lanyard did not create"). */
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

  /**
   * Someone deletes the variable in the host's dashboard: every variable with the key, or (with
   * `target`) only the one variable of the key on that target, as the dashboard deletes by id.
   */
  deleteOutOfBand(project: string, key: string, target?: string): void {
    const p = this.projects.get(project);
    const before = p?.envs.length ?? 0;
    if (p) p.envs = p.envs.filter((e) => e.key !== key || (target !== undefined && !e.target.includes(target)));
    if ((p?.envs.length ?? 0) === before) throw new Error(`fake-webhost: no variable ${key} in ${project}`);
  }

  /** The variables with the key (every target), as the host holds them. */
  variables(project: string, key: string): { id: string; value: string; target: string[] }[] {
    return (this.projects.get(project)?.envs ?? []).filter((e) => e.key === key).map((e) => ({ id: e.id, value: e.value, target: [...e.target] }));
  }

  addProject(id: string, teamId: string | null = null): void {
    this.projects.set(id, { teamId, envs: [] });
  }

  /** The value of the key's first variable, or (with `target`) of its variable on that target. */
  value(project: string, key: string, target?: string): string | undefined {
    return this.projects.get(project)?.envs.find((e) => e.key === key && (target === undefined || e.target.includes(target)))?.value;
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
    const [, version, projectId = "", envId] = m;
    // Each route exists under the version the host documents; any other is an unknown route.
    const route = `${req.method} v${version} ${envId ? "one" : "all"}`;
    if (!["GET v10 all", "POST v10 all", "GET v1 one", "PATCH v9 one", "DELETE v9 one"].includes(route)) return err(404, "not_found", "Not Found");
    const project = this.projects.get(decodeURIComponent(projectId));
    if (!project || project.teamId !== url.searchParams.get("teamId")) return err(404, "not_found", "Project not found");
    if (req.method === "GET" && !envId) return json({ envs: project.envs.map(({ value: _v, ...rest }) => ({ ...rest, value: "encrypted:..." })) });
    const env = envId ? project.envs.find((e) => e.id === envId) : undefined;
    if (envId && !env) return err(404, "not_found", "Environment Variable not found");
    if (req.method === "GET" && env) return json({ ...env, decrypted: true }); // the dashboard's "reveal"
    if (req.method === "POST") return this.create(project, req, url);
    if (req.method === "PATCH" && env) {
      const b = (await req.json()) as Partial<Env>;
      if (b.value !== undefined && typeof b.value !== "string") return err(400, "bad_request", "value is invalid");
      if (b.target !== undefined && !validTargets(b.target)) return err(400, "bad_request", "target is invalid");
      const target = b.target ?? env.target;
      if (project.envs.some((e) => e !== env && e.key === env.key && e.target.some((t) => target.includes(t)))) {
        return err(400, "ENV_CONFLICT", "A variable with the same name already exists for one of the targets");
      }
      Object.assign(env, { value: b.value ?? env.value, type: b.type ?? env.type, target: [...target], updatedAt: Date.now() });
      return json({ id: env.id, key: env.key, target: env.target, type: env.type, createdAt: env.createdAt, updatedAt: env.updatedAt });
    }
    if (req.method === "DELETE" && env) {
      project.envs.splice(project.envs.indexOf(env), 1);
      return json({ id: env.id, key: env.key });
    }
    return err(404, "not_found", "Not Found");
  }

  private async create(project: Project, req: Request, url: URL): Promise<Response> {
    const b = (await req.json()) as Partial<Env>;
    if (typeof b.key !== "string" || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(b.key)) return err(400, "invalid_key", "The name of your Environment Variable contains invalid characters.");
    if (typeof b.value !== "string") return err(400, "bad_request", "value is required");
    if (!validTargets(b.target)) return err(400, "bad_request", "target is invalid");
    const target = b.target;
    const existing = project.envs.find((e) => e.key === b.key && e.target.some((t) => target.includes(t)));
    if (existing && url.searchParams.get("upsert") !== "true") {
      return json({ created: [], failed: [{ error: { code: "ENV_ALREADY_EXISTS", message: "A variable with the name already exists", key: b.key } }] }, 201);
    }
    const now = Date.now();
    if (existing) Object.assign(existing, { value: b.value, type: b.type ?? "encrypted", target, updatedAt: now });
    const env = existing ?? { id: crypto.randomUUID().replace(/-/g, "").slice(0, 16), key: b.key, value: b.value, type: b.type ?? "encrypted", target, createdAt: now, updatedAt: now };
    if (!existing) project.envs.push(env);
    return json({ created: { id: env.id, key: env.key, target: env.target, type: env.type, createdAt: env.createdAt, updatedAt: env.updatedAt }, failed: [] }, 201);
  }
}

const validTargets = (t: unknown): t is string[] => Array.isArray(t) && t.length > 0 && t.every((x) => typeof x === "string" && TARGETS.has(x));

export const WEBHOST_HOSTS = ["api.vercel.com"];
