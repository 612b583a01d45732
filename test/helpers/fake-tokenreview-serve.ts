/**
 * Serves a FakeTokenReview (./fake-tokenreview.ts) over real HTTP on 127.0.0.1, for e2e runs
 * (hvac's `client.auth.kubernetes.login` against the Worker started by wrangler, which calls this
 * server as its kubernetes_host: plain http:// to a loopback host is allowed in development).
 * Node only (node:http), hence apart from the fake, which the Workers-pool tests import.
 *
 * The fake's `down` modes over the wire: "status" answers 503; "connection" destroys the socket
 * without an answer; "timeout" never answers (the Worker gives up after its 10 s timeout).
 * `GET /__fake/state` shows what the fake holds.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { FakeTokenReview } from "./fake-tokenreview";

export interface ServedTokenReview {
  /** The value for kubernetes_host. */
  url: string;
  close(): Promise<void>;
}

async function toRequest(req: IncomingMessage, port: number): Promise<Request> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
  const body = Buffer.concat(chunks);
  const hasBody = body.length > 0 && req.method !== "GET" && req.method !== "HEAD";
  return new Request(`http://127.0.0.1:${port}${req.url ?? "/"}`, { method: req.method, headers, body: hasBody ? body : undefined });
}

export async function serveTokenReview(fake: FakeTokenReview, port = 0): Promise<ServedTokenReview> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      if (req.url === "/__fake/state") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(fake.state(), null, 2));
        return;
      }
      if (fake.down === "connection") {
        req.socket.destroy();
        return;
      }
      if (fake.down === "timeout") return;
      try {
        const r = await fake.handle(await toRequest(req, (server.address() as AddressInfo).port));
        res.writeHead(r.status, { "content-type": r.headers.get("content-type") ?? "application/json" });
        res.end(Buffer.from(await r.arrayBuffer()));
      } catch (e) {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: String(e) }));
      }
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve());
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
