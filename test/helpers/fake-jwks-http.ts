/**
 * The fake issuer of ./fake-jwks.ts served over real HTTP from Node, for e2e tests (hvac's JWT
 * helpers against a Worker started by wrangler) and manual runs. It listens on 127.0.0.1, so
 * the Worker in development may call it over plain http (src/core/outbound-url.ts: loopback).
 *
 *   const issuer = await serveFakeJwks([await generateKey("RS256")]);
 *   // config: { oidc_discovery_url: issuer.url } or { jwks_url: `${issuer.url}/keys` }
 *   await issuer.close();
 */
import type { Server } from "node:http";
import { serveFake } from "./fake-http";
import { FakeJwks } from "./fake-jwks";
import type { TestKey } from "./jwt-issuer";

export interface ServedJwks {
  fake: FakeJwks;
  /** The issuer and discovery URL, e.g. http://127.0.0.1:41234 */
  url: string;
  /** The JWKS URL. */
  jwksUrl: string;
  close(): Promise<void>;
}

/** Serves a fake issuer with `keys` on `port` (0 picks a free one). */
export async function serveFakeJwks(keys: TestKey[], port = 0): Promise<ServedJwks> {
  const fake = new FakeJwks(keys);
  const { server, port: actual }: { server: Server; port: number } = await serveFake(port, fake, () => fake.state());
  const url = `http://127.0.0.1:${actual}`;
  return {
    fake,
    url,
    jwksUrl: `${url}${fake.jwksPath}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
