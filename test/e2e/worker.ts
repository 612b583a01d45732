/**
 * Starts the Worker as the e2e suite runs it: the D1 migrations applied with wrangler's CLI to a
 * throwaway local persistence directory, the bundle built once with `wrangler deploy --dry-run`
 * (what `wrangler deploy` would upload: minified, as configured), then served on a free loopback
 * port by wrangler's programmatic API with the given variables. Used by the global setup (the
 * suite's shared Worker) and by tests that need an instance of their own (a fresh database, other
 * variables).
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { unstable_startWorker } from "wrangler";

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, "../..");

export interface StartedWorker {
  /** Base URL without a trailing slash (http://127.0.0.1:<port>). */
  url: string;
  dispose(): Promise<void>;
}

export async function startLanyardWorker(vars: Record<string, string>): Promise<StartedWorker> {
  const dir = await mkdtemp(path.join(tmpdir(), "lanyard-e2e-"));
  const env = { ...process.env, WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false", WRANGLER_HIDE_BANNER: "true" };
  const wrangler = path.join(ROOT, "node_modules/.bin/wrangler");
  await run(wrangler, ["d1", "migrations", "apply", "DB", "--local", "--persist-to", dir], { cwd: ROOT, env });
  process.env.WRANGLER_SEND_METRICS = "false";
  process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
  // The Worker is started once for the whole run: never reload it because a file changed.
  process.env.WRANGLER_CI_DISABLE_CONFIG_WATCHING = "true";
  // Bundle once and run that bundle, with the runner's module root at the bundle's own directory:
  // the dev runner watches its module root (else the whole project) whatever dev.watch says, and
  // the Workers-pool tests running beside this project write under .wrangler/, which reloaded the
  // Worker mid-request ("Your worker restarted mid-request") once in a CI run.
  const buildDir = path.join(dir, "build");
  await run(wrangler, ["deploy", "--dry-run", "--outdir", buildDir, "-c", path.join(ROOT, "wrangler.toml")], { cwd: ROOT, env });
  const worker = await unstable_startWorker({
    config: path.join(ROOT, "wrangler.toml"),
    entrypoint: path.join(buildDir, "index.js"),
    build: { bundle: false, moduleRoot: buildDir },
    bindings: Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, { type: "plain_text" as const, value: v }])),
    dev: { persist: dir, server: { hostname: "127.0.0.1", port: 0 }, inspector: false, watch: false, logLevel: "warn" },
  });
  const dispose = async () => {
    await worker.dispose();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await worker.ready;
    const url = (await worker.url).toString().replace(/\/$/, "");
    // A Worker that failed to build still "starts"; fail here with a clear message instead of
    // letting every test time out.
    const health = await fetch(`${url}/v1/sys/health`, { signal: AbortSignal.timeout(30_000) }).catch((e: unknown) => e);
    if (!(health instanceof Response) || health.status !== 200) {
      throw new Error(`e2e: the Worker did not become healthy at ${url}: ${health instanceof Response ? `${health.status} ${await health.text()}` : String(health)}`);
    }
    return { url, dispose };
  } catch (e) {
    await dispose();
    throw e;
  }
}
