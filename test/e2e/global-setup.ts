/**
 * Starts the Worker once for the whole e2e project: applies the D1 migrations to a throwaway
 * local persistence directory with wrangler's CLI, then starts the Worker on a free port with
 * wrangler's programmatic API. Test files get the base URL through `inject("baseUrl")`.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import type { TestProject } from "vitest/node";
import { unstable_startWorker } from "wrangler";
import { startFakeServers } from "../helpers/fake-http";
import { startHttp01Relay } from "./acme-http01-relay";
import { E2E_ROOT_TOKEN, E2E_SEAL_KEY } from "./env";

const run = promisify(execFile);

declare module "vitest" {
  export interface ProvidedContext {
    baseUrl: string;
    /** The Worker's *_ENDPOINT vars: the fake providers (test/helpers/fake-http.ts) it syncs to. */
    fakeEndpoints: Record<string, string>;
    /** The ACME http-01 relay (./acme-http01-relay.ts): the Worker's ACME_HTTP01_TARGET. */
    http01Relay: string;
  }
}

export default async function setup(project: TestProject) {
  const root = path.resolve(import.meta.dirname, "../..");
  const dir = await mkdtemp(path.join(tmpdir(), "lanyard-e2e-"));
  const env = { ...process.env, WRANGLER_SEND_METRICS: "false", CLOUDFLARE_CF_FETCH_ENABLED: "false", WRANGLER_HIDE_BANNER: "true" };
  await run(path.join(root, "node_modules/.bin/wrangler"), ["d1", "migrations", "apply", "DB", "--local", "--persist-to", dir], { cwd: root, env });
  process.env.WRANGLER_SEND_METRICS = "false";
  process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
  // The Worker is started once for the whole run: never reload it because a file changed.
  process.env.WRANGLER_CI_DISABLE_CONFIG_WATCHING = "true";
  // Bundle once and run that bundle, with the runner's module root at the bundle's own directory:
  // the dev runner watches its module root (else the whole project) whatever dev.watch says, and
  // the Workers-pool tests running beside this project write under .wrangler/, which reloaded the
  // Worker mid-request ("Your worker restarted mid-request") once in a CI run.
  const buildDir = path.join(dir, "build");
  // The five fake providers over HTTP on free ports; the Worker's endpoint vars point at them, so
  // e2e tests can sync to them (GET <endpoint>/__fake/state shows what each holds).
  const fakes = await startFakeServers(0);
  const relay = await startHttp01Relay();
  const endpointBindings = Object.fromEntries(Object.entries(fakes.endpoints).map(([k, v]) => [k, { type: "plain_text" as const, value: v }]));
  await run(path.join(root, "node_modules/.bin/wrangler"), ["deploy", "--dry-run", "--outdir", buildDir, "-c", path.join(root, "wrangler.toml")], { cwd: root, env });
  const worker = await unstable_startWorker({
    config: path.join(root, "wrangler.toml"),
    entrypoint: path.join(buildDir, "index.js"),
    build: { bundle: false, moduleRoot: buildDir },
    bindings: {
      ENVIRONMENT: { type: "plain_text", value: "development" },
      ROOT_TOKEN: { type: "plain_text", value: E2E_ROOT_TOKEN },
      SEAL_KEY: { type: "plain_text", value: E2E_SEAL_KEY },
      ...endpointBindings,
      ACME_HTTP01_TARGET: { type: "plain_text", value: relay.target },
    },
    dev: { persist: dir, server: { hostname: "127.0.0.1", port: 0 }, inspector: false, watch: false, logLevel: "warn" },
  });
  await worker.ready;
  const base = (await worker.url).toString().replace(/\/$/, "");
  // A Worker that failed to build still "starts"; fail here with a clear message instead of
  // letting every test time out.
  const health = await fetch(`${base}/v1/sys/health`, { signal: AbortSignal.timeout(30_000) }).catch((e: unknown) => e);
  if (!(health instanceof Response) || health.status !== 200) {
    await worker.dispose();
    await fakes.close();
    await relay.close();
    throw new Error(`e2e: the Worker did not become healthy at ${base}: ${health instanceof Response ? health.status : String(health)}`);
  }
  project.provide("baseUrl", base);
  project.provide("fakeEndpoints", fakes.endpoints);
  project.provide("http01Relay", relay.url);
  return async () => {
    await worker.dispose();
    await fakes.close();
    await relay.close();
    await rm(dir, { recursive: true, force: true });
  };
}
