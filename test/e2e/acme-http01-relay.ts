/**
 * The e2e Worker's ACME_HTTP01_TARGET: one local HTTP server every http-01 validation connects
 * to (src/engines/pki/acme/validate-challenge.ts), which forwards each request by its Host
 * header to the port a test registered for that name, where the real client (lego, certbot)
 * runs its standalone challenge server. So test files running in parallel each get their own
 * client port, and the client sees the request exactly as sent, `Host: <identifier>` included.
 *
 * Registration (from a test): `PUT <relay>/__relay/<host>` with the port as the body; `DELETE`
 * removes it. A request for an unregistered host answers 502.
 */
import { createServer, request, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface Http01Relay {
  /** The relay's base URL (http://127.0.0.1:<port>). */
  url: string;
  /** `host:port`, the value for ACME_HTTP01_TARGET. */
  target: string;
  close(): Promise<void>;
}

function forward(req: IncomingMessage, res: ServerResponse, port: number): void {
  const out = request({ host: "127.0.0.1", port, method: req.method, path: req.url, headers: req.headers }, (up) => {
    res.writeHead(up.statusCode ?? 502, up.headers);
    up.pipe(res);
  });
  out.on("error", (e) => {
    res.writeHead(502, { "content-type": "text/plain" });
    res.end(`relay: ${e.message}`);
  });
  req.pipe(out);
}

export async function startHttp01Relay(): Promise<Http01Relay> {
  const routes = new Map<string, number>();
  const server = createServer((req, res) => {
    const admin = /^\/__relay\/([^/?]+)$/.exec(req.url ?? "");
    if (admin) {
      const host = decodeURIComponent(admin[1] ?? "").toLowerCase();
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        if (req.method === "PUT" && /^\d+$/.test(body.trim())) routes.set(host, Number(body.trim()));
        else if (req.method === "DELETE") routes.delete(host);
        else res.statusCode = 400;
        res.end();
      });
      return;
    }
    const host = (req.headers.host ?? "").replace(/:\d+$/, "").toLowerCase();
    const port = routes.get(host);
    if (port === undefined) {
      res.writeHead(502, { "content-type": "text/plain" });
      res.end(`relay: no client registered for ${host}`);
      return;
    }
    forward(req, res, port);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    target: `127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
