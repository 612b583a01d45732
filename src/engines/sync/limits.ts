/**
 * Provider limits (issue 15 rule 4): every request a connector sends to a destination's API
 * passes a gate that keeps it under the provider's published limits, and stops everything to
 * that destination while the provider has asked to wait.
 *
 * WHERE THE GATE LIVES. Isolate memory is per isolate and Workers run many, so the gate is a
 * Durable Object (`SyncGate`, ./gate.ts; binding SYNC_GATE): one instance per *limit scope*,
 * named `<type>:<sha256 of the scope>`. A scope is what the provider counts against, so
 * destinations that share it share one gate: cloudone-sm the access key (or role) and region,
 * cloudtwo-kv the vault, cloudthree-sm the project, repohost the token or the app installation,
 * webhost-project the token and team. The object keeps the "paused until" time and the logs of
 * windows longer than MEMORY_WINDOW_MS in its own SQLite storage, so they survive the object
 * being evicted between bursts (an idle object is evicted only after seconds without calls, when
 * shorter windows are empty anyway, so those stay in memory and cost no storage write); the
 * permits in flight are in memory (each expires after PERMIT_TTL_MS, so a crashed caller frees
 * its slot). One object runs one request at a time, so its checks cannot race.
 *
 * WHAT IT ENFORCES, per scope (below each provider's published limit, leaving room for the
 * provider's other clients, such as the applications that read the same secrets):
 *
 * | type | published | Lanyard's cap |
 * |---|---|---|
 * | cloudone-sm | 50 TPS per write operation per region; 10,000 TPS GetSecretValue+DescribeSecret | 10 in flight; 20 writes/s; 100 reads/s |
 * | cloudtwo-kv | 4,000 transactions per 10 s per vault | 10 in flight; 1,000 per 10 s |
 * | cloudthree-sm | per project: 600 writes/min, 600 reads/min, 90,000 accesses/min; per secret 2 AddSecretVersion/s and 120/min | 10 in flight; 300 writes/min, 300 reads/min, 1,000 accesses/min; per secret 1 AddSecretVersion/s and 60/min |
 * | repohost | 100 concurrent requests; 900 points/min (GET 1, others 5); 5,000 requests/h | 10 in flight; 600 points/min; 4,000 requests/h |
 * | webhost-project | 120 requests/min (the API's default) | 5 in flight; 60 requests/min |
 *
 * A request waits in the gate (first come, first served) at most MAX_WAIT_MS; beyond that it
 * fails as a retryable `RateLimited` ConnectorError whose retryAfter is the remaining wait, so
 * the queue brings it back no sooner (./consumer.ts, ./messages.ts backoffSeconds).
 *
 * THROTTLING ANSWERS. A 429, AWS's ThrottlingException (400, no Retry-After), the repository
 * host's 403/429 with `retry-after` or `x-ratelimit-remaining: 0` (a rate limit, not a
 * permission error), Google's RESOURCE_EXHAUSTED (with a RetryInfo delay when given): the gate
 * is paused for the stated time (Retry-After, x-ratelimit-reset, RetryInfo), or, when the
 * provider states none, for the type's THROTTLE_MS doubling on each throttling answer in a row
 * (at most 5 minutes). Any answer with `x-ratelimit-remaining: 0` pauses until its reset. While
 * paused no request to the scope starts; requests already on the wire when the provider
 * answered are not recalled. Token endpoints (other hosts, their own limits, cached tokens) are
 * not gated.
 */
import { sha256Hex } from "../../core/encoding";
import { ConnectorError, type ConnectorContext } from "./connectors/types";
import { str, type DestinationType } from "./destinations/types";
import { trimEndChar } from "../../core/text";

/** Longest a request waits in the gate before failing as RateLimited (retried by the queue). */
export const MAX_WAIT_MS = 15_000;
/** A permit's lifetime: the request timeout (connectors/http.ts) plus slack. */
export const PERMIT_TTL_MS = 15_000;
/** Longest pause after repeated throttling answers that state no wait. */
export const MAX_THROTTLE_MS = 5 * 60_000;
/** Windows up to this long are logged in memory only; longer ones in the gate's storage. */
export const MEMORY_WINDOW_MS = 10_000;

// ---------------------------------------------------------------------------------------------
// The limits

/** One request as the gate sees it. */
export interface GatedRequest {
  method: string;
  url: URL;
  headers: Headers;
}

/** A budget of cost units over a sliding window. */
export interface WindowLimit {
  id: string;
  budget: number;
  windowMs: number;
  /** The request's cost in this window; 0 = not counted. */
  cost(r: GatedRequest): number;
  /** Counted per resource (e.g. per secret): the request's resource; null = not counted. */
  resource?(r: GatedRequest): string | null;
}

export interface ProviderLimits {
  /** Requests in flight at once per scope. */
  concurrency: number;
  windows: WindowLimit[];
  /** Pause after a throttling answer that states no wait (doubled for each one in a row). */
  throttleMs: number;
}

const all = () => 1;
const isRead = (r: GatedRequest) => r.method === "GET" || r.method === "HEAD";
const awsOp = (r: GatedRequest) => (r.headers.get("x-amz-target") ?? "").replace(/^secretsmanager\./, "");
const awsRead = (r: GatedRequest) => /^(Get|Describe|List|BatchGet)/.test(awsOp(r));
const gcpAccess = (r: GatedRequest) => r.method === "GET" && r.url.pathname.endsWith(":access");
const gcpAddVersion = (r: GatedRequest) => (r.method === "POST" && r.url.pathname.endsWith(":addVersion") ? r.url.pathname.replace(/:addVersion$/, "") : null);

export const DEFAULT_LIMITS: Readonly<Record<DestinationType, ProviderLimits>> = {
  "cloudone-sm": {
    concurrency: 10,
    windows: [
      { id: "writes", budget: 20, windowMs: 1000, cost: (r) => (awsRead(r) ? 0 : 1) },
      { id: "reads", budget: 100, windowMs: 1000, cost: (r) => (awsRead(r) ? 1 : 0) },
    ],
    throttleMs: 2000,
  },
  "cloudtwo-kv": { concurrency: 10, windows: [{ id: "all", budget: 1000, windowMs: 10_000, cost: all }], throttleMs: 10_000 },
  "cloudthree-sm": {
    concurrency: 10,
    windows: [
      { id: "writes", budget: 300, windowMs: 60_000, cost: (r) => (isRead(r) ? 0 : 1) },
      { id: "reads", budget: 300, windowMs: 60_000, cost: (r) => (isRead(r) && !gcpAccess(r) ? 1 : 0) },
      { id: "access", budget: 1000, windowMs: 60_000, cost: (r) => (gcpAccess(r) ? 1 : 0) },
      { id: "version-s", budget: 1, windowMs: 1000, cost: all, resource: gcpAddVersion },
      { id: "version-min", budget: 60, windowMs: 60_000, cost: all, resource: gcpAddVersion },
    ],
    throttleMs: 2000,
  },
  repohost: {
    concurrency: 10,
    windows: [
      { id: "points", budget: 600, windowMs: 60_000, cost: (r) => (isRead(r) ? 1 : 5) },
      { id: "hour", budget: 4000, windowMs: 3_600_000, cost: all },
    ],
    throttleMs: 60_000,
  },
  "webhost-project": { concurrency: 5, windows: [{ id: "minute", budget: 60, windowMs: 60_000, cost: all }], throttleMs: 60_000 },
};

const overrides = new Map<DestinationType, ProviderLimits>();

/**
 * Replaces a type's limits in this isolate (null restores the defaults). For tests, which run
 * bursts against fakes with limits of their own and cannot wait minutes for the real budgets.
 */
export function overrideLimits(type: DestinationType, limits: ProviderLimits | null): void {
  if (limits) overrides.set(type, limits);
  else overrides.delete(type);
}

export function limitsOf(type: DestinationType): ProviderLimits {
  return overrides.get(type) ?? DEFAULT_LIMITS[type];
}

/** What one request is charged in each window it counts in (sent to the gate). */
export interface WindowCharge {
  key: string;
  budget: number;
  windowMs: number;
  cost: number;
  /** A per-resource window: a request blocked only here does not hold up the ones behind it. */
  resource: boolean;
}

export function chargesOf(limits: ProviderLimits, r: GatedRequest): WindowCharge[] {
  const out: WindowCharge[] = [];
  for (const w of limits.windows) {
    const cost = w.cost(r);
    if (cost <= 0) continue;
    if (w.resource) {
      const res = w.resource(r);
      if (res !== null) out.push({ key: `${w.id}\u0000${res}`, budget: w.budget, windowMs: w.windowMs, cost, resource: true });
    } else {
      out.push({ key: w.id, budget: w.budget, windowMs: w.windowMs, cost, resource: false });
    }
  }
  return out;
}

/** The gate's name for a destination: its type and a digest of its limit scope (never a secret in clear). */
export async function gateName(dest: ConnectorContext["dest"]): Promise<string> {
  const c = dest.connection;
  let scope: string[];
  switch (dest.type) {
    case "cloudone-sm":
      scope = [str(c, "access_key_id"), str(c, "role_arn"), str(c, "region") || "us-east-1"];
      break;
    case "cloudtwo-kv":
      scope = [trimEndChar(str(c, "key_vault_uri").toLowerCase(), "/")];
      break;
    case "cloudthree-sm":
      scope = [str(c, "project_id") || projectOfCredentials(str(c, "credentials"))];
      break;
    case "repohost":
      scope = str(c, "access_token") ? ["token", str(c, "access_token")] : ["app", str(c, "app_name"), str(c, "installation_id")];
      break;
    case "webhost-project":
      scope = [str(c, "access_token"), str(c, "team_id")];
      break;
  }
  return `${dest.type}:${await sha256Hex([dest.namespaceId, ...scope].join("\u0000"))}`;
}

function projectOfCredentials(json: string): string {
  try {
    const v: unknown = JSON.parse(json);
    const p = typeof v === "object" && v !== null ? (v as { project_id?: unknown }).project_id : undefined;
    return typeof p === "string" ? p : json;
  } catch {
    return json;
  }
}

// ---------------------------------------------------------------------------------------------
// Reading the provider's answers

/** Seconds from a Retry-After header (delta-seconds or an HTTP date); undefined when absent. */
export function parseRetryAfter(h: string | null, now = Date.now()): number | undefined {
  if (h === null || h.trim() === "") return undefined;
  const n = Number(h.trim());
  if (Number.isFinite(n) && n >= 0) return Math.ceil(n);
  const at = Date.parse(h);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}

/** A pause the provider asked for: `waitMs`, and whether it said how long (`stated`). */
export interface Throttle {
  waitMs: number;
  stated: boolean;
}

/** Ms until an `x-ratelimit-reset` (epoch seconds), when present. */
function resetWait(h: Headers, now: number): number | undefined {
  const reset = Number(h.get("x-ratelimit-reset") ?? "");
  return Number.isFinite(reset) && reset > 0 ? Math.max(0, reset * 1000 - now) : undefined;
}

const AWS_THROTTLING = new Set(["ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded"]);

async function bodyText(res: Response): Promise<string> {
  try {
    return await res.clone().text();
  } catch {
    return "";
  }
}

/** Google's RetryInfo delay ("30s", "1.5s") in a RESOURCE_EXHAUSTED answer, in ms. */
function googleRetryDelay(text: string): number | undefined {
  const m = /"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"/.exec(text);
  return m ? Math.ceil(Number(m[1]) * 1000) : undefined;
}

/**
 * Whether an answer is the provider asking to slow down, and for how long; null otherwise.
 * Reads a copy of the body only where the provider puts the signal there (AWS 400s, Google 429s).
 */
export async function throttleOf(type: DestinationType, res: Response, now = Date.now()): Promise<Throttle | null> {
  const h = res.headers;
  const retryAfter = parseRetryAfter(h.get("retry-after"), now);
  const reset = resetWait(h, now);
  const stated = (ms: number | undefined): Throttle | null => (ms === undefined ? null : { waitMs: ms, stated: true });
  let throttled = res.status === 429;
  let googleDelay: number | undefined;
  if (type === "repohost" && res.status === 403) throttled = retryAfter !== undefined || h.get("x-ratelimit-remaining") === "0";
  if (type === "cloudone-sm" && res.status === 400) {
    const header = (h.get("x-amzn-errortype") ?? "").split(":")[0] ?? "";
    let code = header.slice(header.indexOf("#") + 1);
    if (!AWS_THROTTLING.has(code)) {
      const m = /"__type"\s*:\s*"([^"]*)"/.exec(await bodyText(res));
      code = (m?.[1] ?? "").slice((m?.[1] ?? "").indexOf("#") + 1).split(":")[0] ?? "";
    }
    throttled = AWS_THROTTLING.has(code);
  }
  if (type === "cloudthree-sm" && res.status === 429) googleDelay = googleRetryDelay(await bodyText(res));
  if (!throttled) {
    // A quota used up by this very answer: the next request would be refused until the reset.
    return h.get("x-ratelimit-remaining") === "0" ? stated(reset) : null;
  }
  return stated(retryAfter !== undefined ? retryAfter * 1000 : undefined) ?? stated(reset) ?? stated(googleDelay) ?? { waitMs: 0, stated: false };
}

// ---------------------------------------------------------------------------------------------
// The gate's state (pure; ./gate.ts keeps it in a Durable Object)

export interface AcquireArgs {
  concurrency: number;
  charges: WindowCharge[];
  maxWaitMs: number;
}

export type AcquireResult = { ok: true; permit: string } | { ok: false; waitMs: number; reason: "paused" | "budget" };

export interface ReleaseArgs {
  permit: string;
  throttle: Throttle | null;
  /** The type's pause for a throttling answer that states no wait. */
  throttleMs: number;
}

/** Where the gate keeps its window logs and its pause (SQLite in the Durable Object, memory in unit tests). */
export interface GateStore {
  /** Sum of the costs recorded under `key` after `since`. */
  used(key: string, since: number): number;
  /** The entries under `key` after `since`, oldest first. */
  entries(key: string, since: number): { at: number; cost: number }[];
  add(key: string, at: number, cost: number, expires: number): void;
  /** Forgets entries that expired before `now`. */
  prune(now: number): void;
  getNumber(name: "paused_until" | "throttles"): number;
  setNumber(name: "paused_until" | "throttles", v: number): void;
}

export type Check = { ok: true } | { ok: false; at: number; reason: "paused" | "busy" | "budget" | "resource" };

export class GateState {
  private readonly inFlight = new Map<string, number>();
  private readonly memory = new MemoryGateStore();
  private grants = 0;

  /** `store` keeps the pause and the logs of windows longer than MEMORY_WINDOW_MS. */
  constructor(private readonly store: GateStore) {}

  private logOf(windowMs: number): GateStore {
    return windowMs > MEMORY_WINDOW_MS ? this.store : this.memory;
  }

  private expire(now: number): void {
    for (const [p, until] of this.inFlight) if (until <= now) this.inFlight.delete(p);
  }

  pausedUntil(): number {
    return this.store.getNumber("paused_until");
  }

  /** Earliest expiry of a permit in flight (when a "busy" check may change without a release). */
  nextExpiry(): number | undefined {
    let min: number | undefined;
    for (const t of this.inFlight.values()) min = min === undefined ? t : Math.min(min, t);
    return min;
  }

  /** Whether a request could start now; if not, when it could at the earliest and why. */
  check(args: AcquireArgs, now: number): Check {
    this.expire(now);
    const paused = this.pausedUntil();
    if (now < paused) return { ok: false, at: paused, reason: "paused" };
    if (this.inFlight.size >= args.concurrency) return { ok: false, at: this.nextExpiry() ?? now, reason: "busy" };
    let at = 0;
    let resourceOnly = true;
    for (const c of args.charges) {
      const cost = Math.min(c.cost, c.budget);
      const since = now - c.windowMs;
      const log = this.logOf(c.windowMs);
      const used = log.used(c.key, since);
      if (used + cost <= c.budget) continue;
      let excess = used + cost - c.budget;
      let free = now + c.windowMs;
      for (const e of log.entries(c.key, since)) {
        excess -= e.cost;
        if (excess <= 0) {
          free = e.at + c.windowMs;
          break;
        }
      }
      at = Math.max(at, free);
      if (!c.resource) resourceOnly = false;
    }
    return at > 0 ? { ok: false, at, reason: resourceOnly ? "resource" : "budget" } : { ok: true };
  }

  /** Starts a request (after a successful check): a permit, and its costs in the logs. */
  grant(args: AcquireArgs, now: number): string {
    const permit = crypto.randomUUID();
    this.inFlight.set(permit, now + PERMIT_TTL_MS);
    for (const c of args.charges) this.logOf(c.windowMs).add(c.key, now, Math.min(c.cost, c.budget), now + c.windowMs);
    if (++this.grants % 100 === 0) {
      this.store.prune(now);
      this.memory.prune(now);
    }
    return permit;
  }

  /** Ends a request; a throttling answer pauses the scope. Returns the pause's end (0 = none). */
  release(args: ReleaseArgs, now: number): number {
    this.inFlight.delete(args.permit);
    const t = args.throttle;
    if (!t) {
      if (this.store.getNumber("throttles") !== 0) this.store.setNumber("throttles", 0);
      return 0;
    }
    const inARow = this.store.getNumber("throttles") + 1;
    this.store.setNumber("throttles", inARow);
    const wait = t.stated ? t.waitMs : Math.min(args.throttleMs * 2 ** Math.min(inARow - 1, 20), MAX_THROTTLE_MS);
    const until = Math.max(this.pausedUntil(), now + wait);
    this.store.setNumber("paused_until", until);
    return until;
  }
}

/** A GateStore in memory (unit tests). */
export class MemoryGateStore implements GateStore {
  private readonly logs = new Map<string, { at: number; cost: number; expires: number }[]>();
  private readonly numbers = new Map<string, number>();

  used(key: string, since: number): number {
    return this.entries(key, since).reduce((s, e) => s + e.cost, 0);
  }
  entries(key: string, since: number): { at: number; cost: number }[] {
    return (this.logs.get(key) ?? []).filter((e) => e.at > since);
  }
  add(key: string, at: number, cost: number, expires: number): void {
    const log = this.logs.get(key) ?? [];
    log.push({ at, cost, expires });
    this.logs.set(key, log);
  }
  prune(now: number): void {
    for (const [k, log] of this.logs) {
      const kept = log.filter((e) => e.expires > now);
      if (kept.length === 0) this.logs.delete(k);
      else this.logs.set(k, kept);
    }
  }
  getNumber(name: "paused_until" | "throttles"): number {
    return this.numbers.get(name) ?? 0;
  }
  setNumber(name: "paused_until" | "throttles", v: number): void {
    this.numbers.set(name, v);
  }
}

// ---------------------------------------------------------------------------------------------
// The caller's side

/** The gate's RPC face (./gate.ts SyncGate), as the caller uses it. */
export interface GateStub {
  acquire(args: AcquireArgs): Promise<AcquireResult>;
  release(args: ReleaseArgs): Promise<void>;
}

/** The gate of a destination, or null where the runtime has no SYNC_GATE binding (plain Node unit tests). */
async function gateOf(ctx: ConnectorContext): Promise<GateStub | null> {
  const ns = (ctx.env as Partial<Env>).SYNC_GATE;
  if (!ns) return null;
  return ns.get(ns.idFromName(await gateName(ctx.dest))) as unknown as GateStub;
}

/**
 * Sends one provider request through the destination's gate: waits for a permit (or fails as
 * RateLimited, retryable after the remaining wait), sends, and reports the answer, so a
 * throttling answer pauses every request to the scope. `provider` names it in errors.
 */
export async function gatedFetch(ctx: ConnectorContext, provider: string, req: GatedRequest, run: () => Promise<Response>): Promise<Response> {
  const gate = await gateOf(ctx);
  if (!gate) return run();
  const limits = limitsOf(ctx.dest.type);
  const got = await gate.acquire({ concurrency: limits.concurrency, charges: chargesOf(limits, req), maxWaitMs: MAX_WAIT_MS });
  if (!got.ok) {
    const seconds = Math.max(1, Math.ceil(got.waitMs / 1000));
    const why =
      got.reason === "paused"
        ? `the provider asked to slow down; no request to this destination for ${seconds} s`
        : `this destination's request budget is in use; next request in about ${seconds} s`;
    throw new ConnectorError("external", "RateLimited", `${provider}: ${why}`, seconds);
  }
  let res: Response | null = null;
  try {
    res = await run();
    return res;
  } finally {
    const throttle = res ? await throttleOf(ctx.dest.type, res) : null;
    await gate.release({ permit: got.permit, throttle, throttleMs: limits.throttleMs });
  }
}
