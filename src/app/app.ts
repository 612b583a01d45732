/**
 * The root Hono app: request id, configuration check, the /v1 pipeline, the console at /ui/
 * (./console.ts) and error rendering.
 * Everything under /v1/ goes through one dispatcher so that authentication and the ACL check run
 * in one place (src/app/dispatch.ts).
 */
import { Hono } from "hono";
import { loadConfig, refuseWhileSealed, serviceProblem } from "../core/config";
import { openDb } from "../core/db/client";
import { benchEnv, d1RoundTrips, r2Calls } from "../core/db/bench-d1";
import { dispatch } from "./dispatch";
import { refreshInBackground } from "../core/read-cache";
import { errorReply, errorResponse } from "../core/envelope";
import { healthResponse, leaderResponse, sealStatusResponse } from "./sys/status";
import { serveConsole } from "./console";

type AppEnv = { Bindings: Env; Variables: { requestId: string } };

export const app = new Hono<AppEnv>();

app.use("*", async (c, next) => {
  c.set("requestId", crypto.randomUUID());
  await next();
});

// Readiness answers even when unconfigured or sealed, so an operator can see why the service
// refuses. Vault's unauthenticated status paths (src/app/sys/status.ts); HEAD is served by the GET route.
app.get("/v1/sys/health", async (c) => healthResponse(new URL(c.req.url), await serviceProblem(c.env), c.get("requestId")));
app.get("/v1/sys/seal-status", async (c) => sealStatusResponse(await serviceProblem(c.env), c.get("requestId")));
app.get("/v1/sys/leader", (c) => leaderResponse(c.get("requestId")));

// An unsupported verb on an existing path is 405 (docs/http-conventions.md "Answers"), also for these paths.
for (const p of ["health", "seal-status", "leader"]) {
  app.all(`/v1/sys/${p}`, (c) => errorResponse(405, [`unsupported operation: ${c.req.method} sys/${p}`], c.get("requestId")));
}

app.all("/v1/*", async (c) => {
  // Benchmarks only (development only, src/core/db/bench-d1.ts): D1 delayed and counted.
  const env = benchEnv(c.env);
  const cfg = loadConfig(env);
  // Sealed (no configured key opens the data): 503 with the reason, before anything is read or written.
  await refuseWhileSealed(env, cfg.seal);
  // The request's D1 round trips, answered in X-Lanyard-D1 to the bench's probes that ask
  // (X-Lanyard-Count-D1). Only those: re-wrapping an answer to add a header costs the loaded
  // requests measurable CPU (a CRL's body pumped through a second Response).
  const before = env !== c.env && c.req.raw.headers.has("x-lanyard-count-d1") ? d1RoundTrips() : undefined;
  const r2Before = r2Calls();
  const db = openDb(env.DB);
  const waitUntil = (p: Promise<unknown>) => c.executionCtx.waitUntil(p);
  let res: Response;
  let trips = 0;
  try {
    res = await dispatch(c.req.raw, { db, env, rootToken: cfg.rootToken, maxBodyBytes: cfg.maxBodyBytes, requestId: c.get("requestId"), waitUntil });
    if (before !== undefined) trips = d1RoundTrips() - before;
  } finally {
    // The read caches' early re-reads this request queued, after its answer (src/core/read-cache.ts);
    // on the binding itself: no request waits for them, so the bench instrument leaves them out.
    refreshInBackground(env === c.env ? db : openDb(c.env.DB), waitUntil);
  }
  if (before === undefined) return res;
  const counted = new Response(res.body, res);
  counted.headers.set("x-lanyard-d1", String(trips));
  counted.headers.set("x-lanyard-r2", String(r2Calls() - r2Before));
  return counted;
});

// The operator's console (docs/console.md): static files with a strict CSP, a client of /v1 only.
app.all("/ui", (c) => serveConsole(c.req.raw, c.env.ASSETS));
app.all("/ui/*", (c) => serveConsole(c.req.raw, c.env.ASSETS));

app.notFound((c) => errorResponse(404, ["unsupported path: paths start with /v1/"], c.get("requestId")));

// The one table from errors to answers (src/core/envelope.ts `errorAnswer`), shared with the audit trail.
app.onError((err, c) => errorReply(err, c.get("requestId") ?? ""));
