/**
 * Starts the Worker once for the whole e2e project (./worker.ts: migrations applied to a
 * throwaway local persistence directory, the deploy bundle served on a free port), with the fake
 * providers and the ACME http-01 relay it talks to. Test files get the base URL through
 * `inject("baseUrl")`.
 */
import type { TestProject } from "vitest/node";
import { startFakeServers } from "../helpers/fake-http";
import { startHttp01Relay } from "./acme-http01-relay";
import { E2E_ROOT_TOKEN, E2E_SEAL_KEY } from "./env";
import { startLanyardWorker } from "./worker";

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
  // The five fake providers over HTTP on free ports; the Worker's endpoint vars point at them, so
  // e2e tests can sync to them (GET <endpoint>/__fake/state shows what each holds).
  const fakes = await startFakeServers(0);
  const relay = await startHttp01Relay();
  let worker: Awaited<ReturnType<typeof startLanyardWorker>>;
  try {
    worker = await startLanyardWorker({
      ENVIRONMENT: "development",
      ROOT_TOKEN: E2E_ROOT_TOKEN,
      SEAL_KEY: E2E_SEAL_KEY,
      ...fakes.endpoints,
      ACME_HTTP01_TARGET: relay.target,
    });
  } catch (e) {
    await fakes.close();
    await relay.close();
    throw e;
  }
  project.provide("baseUrl", worker.url);
  project.provide("fakeEndpoints", fakes.endpoints);
  project.provide("http01Relay", relay.url);
  return async () => {
    await worker.dispose();
    await fakes.close();
    await relay.close();
  };
}
