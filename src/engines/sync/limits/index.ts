/**
 * Provider limits (docs/secrets-sync.md "4. Provider limits are respected"): every request a
 * connector sends to a destination's API passes a gate that keeps it under the provider's
 * published limits, and stops everything to that destination while the provider has asked to
 * wait.
 *
 * WHERE THE GATE LIVES. Isolate memory is per isolate and Workers run many, so the gate is a
 * Durable Object (`SyncGate`, ../gate.ts; binding SYNC_GATE): one instance per *limit scope*,
 * named `<type>:<sha256 of the scope>`. A scope is what the provider counts against (each
 * provider's limits.ts `scope`), so destinations that share it share one gate: cloudone-sm the
 * access key (or role) and region, cloudtwo-kv the vault, cloudthree-sm the project, repohost
 * the token or the app installation, webhost-project the token and team. The object keeps the
 * "paused until" time and the logs of windows longer than MEMORY_WINDOW_MS in its own SQLite
 * storage, so they survive the object being evicted between bursts (an idle object is evicted
 * only after seconds without calls, when shorter windows are empty anyway, so those stay in
 * memory and cost no storage write); the permits in flight are in memory (each expires after
 * PERMIT_TTL_MS, so a crashed caller frees its slot). One object runs one request at a time, so
 * its checks cannot race (./gate-state.ts).
 *
 * WHAT IT ENFORCES, per scope: each provider's limits.ts (../providers/<type>/limits.ts) states
 * the provider's published limits and Lanyard's caps below them, which leave room for the
 * provider's other clients, such as the applications that read the same secrets.
 *
 * A request waits in the gate (first come, first served) at most MAX_WAIT_MS; beyond that it
 * fails as a retryable `RateLimited` ConnectorError whose retryAfter is the remaining wait, so
 * the queue brings it back no sooner (../consumer.ts, ../messages.ts backoffSeconds).
 *
 * THROTTLING ANSWERS (./throttle.ts). A 429, AWS's ThrottlingException (400, no Retry-After),
 * the repository host's 403/429 with `retry-after` or `x-ratelimit-remaining: 0` (a rate limit,
 * not a permission error), Google's RESOURCE_EXHAUSTED (with a RetryInfo delay when given): the
 * gate is paused for the stated time (Retry-After, x-ratelimit-reset, RetryInfo), or, when the
 * provider states none, for the provider's `throttleMs` doubling on each throttling answer in a
 * row (at most MAX_THROTTLE_MS, 5 minutes). Any answer with `x-ratelimit-remaining: 0` pauses
 * until its reset. While paused no request to the scope starts; requests already on the wire
 * when the provider answered are not recalled. Token endpoints (other hosts, their own limits,
 * cached tokens) are not gated.
 */
import { sha256Hex } from "../../../core/encoding";
import { ConnectorError, type ConnectorContext } from "../connectors/types";
import type { DestinationRecord } from "../store";
import type { AcquireArgs, AcquireResult, ReleaseArgs } from "./gate-state";
import { throttleOf } from "./throttle";
import type { GatedRequest, LimitBudget, ProviderLimits, WindowCharge } from "./types";

/** Longest a request waits in the gate before failing as RateLimited (retried by the queue). */
const MAX_WAIT_MS = 15_000;

const overrides = new Map<string, LimitBudget>();

/**
 * Replaces a type's caps in this isolate (null restores the provider's). For tests, which run
 * bursts against fakes with limits of their own and cannot wait minutes for the real budgets.
 */
export function overrideLimits(type: string, limits: LimitBudget | null): void {
  if (limits) overrides.set(type, limits);
  else overrides.delete(type);
}

export function chargesOf(limits: LimitBudget, r: GatedRequest): WindowCharge[] {
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
export async function gateName(limits: Pick<ProviderLimits, "scope">, dest: DestinationRecord): Promise<string> {
  return `${dest.type}:${await sha256Hex([dest.namespaceId, ...limits.scope(dest.connection)].join("\u0000"))}`;
}

/** The gate's RPC face (../gate.ts SyncGate), as the caller uses it. */
interface GateStub {
  acquire(args: AcquireArgs): Promise<AcquireResult>;
  release(args: ReleaseArgs): Promise<void>;
}

/** The gate of a destination, or null where the runtime has no SYNC_GATE binding (plain Node unit tests). */
async function gateOf(ctx: ConnectorContext): Promise<GateStub | null> {
  const ns = (ctx.env as Partial<Env>).SYNC_GATE;
  if (!ns) return null;
  return ns.get(ns.idFromName(await gateName(ctx.limits, ctx.dest))) as unknown as GateStub;
}

/**
 * Sends one provider request through the destination's gate: waits for a permit (or fails as
 * RateLimited, retryable after the remaining wait), sends, and reports the answer, so a
 * throttling answer pauses every request to the scope. `provider` names it in errors.
 */
export async function gatedFetch(ctx: ConnectorContext, provider: string, req: GatedRequest, run: () => Promise<Response>): Promise<Response> {
  const gate = await gateOf(ctx);
  if (!gate) return run();
  const budget = overrides.get(ctx.dest.type) ?? ctx.limits;
  const got = await gate.acquire({ concurrency: budget.concurrency, charges: chargesOf(budget, req), maxWaitMs: MAX_WAIT_MS });
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
    const throttle = res ? await throttleOf(ctx.limits, res) : null;
    await gate.release({ permit: got.permit, throttle, throttleMs: budget.throttleMs });
  }
}
