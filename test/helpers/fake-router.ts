/**
 * Routes the Worker's outbound fetches to fake providers (test/helpers/fake-*.ts) while a test
 * runs. The Worker under test runs in the same isolate as the tests in the Workers pool, so
 * replacing the global fetch reaches the connectors; nothing else is intercepted (any other URL
 * fails loudly, so a connector cannot reach the real internet from a test).
 */
import { vi } from "vitest";

export interface FakeProvider {
  handle(req: Request): Promise<Response>;
}

export interface FakeRoute {
  /** Host names (exact) or, with a leading ".", suffixes this fake answers. */
  hosts: string[];
  fake: FakeProvider;
}

/** A failure a fake injects instead of answering normally. */
export type Fault = { kind: "status"; status: number; body?: unknown; headers?: Record<string, string> } | { kind: "timeout" };

/** Takes the next fault of a fake, or null; shared helper for the fakes. */
export function applyFault(faults: Fault[]): Response | null {
  const f = faults.shift();
  if (!f) return null;
  if (f.kind === "timeout") throw new DOMException("The operation was aborted due to timeout", "TimeoutError");
  return new Response(f.body === undefined ? "" : JSON.stringify(f.body), { status: f.status, headers: { "content-type": "application/json", ...f.headers } });
}

export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
}

const hostMatches = (host: string, pattern: string): boolean => (pattern.startsWith(".") ? host.endsWith(pattern) : host === pattern);

/** Installs the routes; returns the uninstall function. */
export function installFakes(routes: FakeRoute[]): () => void {
  const stub = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const req = new Request(input, init);
    const host = new URL(req.url).hostname;
    const route = routes.find((r) => r.hosts.some((h) => hostMatches(host, h)));
    if (!route) throw new TypeError(`fake-router: no fake for ${new URL(req.url).origin}`);
    return route.fake.handle(req);
  };
  vi.stubGlobal("fetch", stub);
  return () => vi.unstubAllGlobals();
}
