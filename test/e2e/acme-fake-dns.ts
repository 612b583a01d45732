/**
 * A tiny authoritative-looking DNS server for the dns-01 e2e test: TXT records set over HTTP
 * (by lego's `exec` DNS provider script), answered over UDP (lego's own propagation check) and
 * TCP (Lanyard's Vault-style `host:port` dns_resolver, DNS over TCP) on one port, and over DNS
 * over HTTPS (RFC 8484 POST) at `<http>/dns-query`. Messages are built with Lanyard's own DNS wire
 * codec (src/engines/pki/acme/validate-dns-wire.ts), which the unit tests check byte for byte.
 */
import { createSocket } from "node:dgram";
import { createServer as createHttpServer } from "node:http";
import { createServer as createTcpServer, type AddressInfo } from "node:net";
import { DNS_CLASS_IN, DNS_TYPE, decodeDnsMessage, encodeDnsMessage, encodeTxtRdata, frameTcp, unframeTcp } from "../../src/engines/pki/acme/validate-dns-wire";

export interface FakeDns {
  /** `127.0.0.1:<port>`: UDP and TCP. */
  resolver: string;
  /** The DoH URL (plain http on loopback: Lanyard allows it in development only). */
  doh: string;
  /** Base URL of the record API: `PUT <api>/txt/<fqdn>` (body: value) adds, `DELETE` removes all. */
  api: string;
  /** Questions asked, per transport, as `<transport> <name>/<type>`. */
  asked: string[];
  close(): Promise<void>;
}

export async function startFakeDns(): Promise<FakeDns> {
  const txt = new Map<string, string[]>();
  const asked: string[] = [];
  const norm = (n: string) => n.replace(/\.$/, "").toLowerCase();
  const answer = (query: Uint8Array, transport: string): Uint8Array => {
    const q = decodeDnsMessage(query);
    const question = q.questions[0];
    if (question) asked.push(`${transport} ${question.name}/${question.type}`);
    const values = question && question.type === DNS_TYPE.TXT ? (txt.get(norm(question.name)) ?? []) : [];
    const answers = values.map((v) => ({ name: question?.name ?? "", type: DNS_TYPE.TXT, class: DNS_CLASS_IN, ttl: 1, rdata: encodeTxtRdata([v]) }));
    return encodeDnsMessage({ id: q.id, response: true, rcode: question && txt.has(norm(question.name)) ? 0 : 3, questions: q.questions, answers });
  };

  const tcp = createTcpServer((c) => {
    let buf = Buffer.alloc(0);
    c.on("data", (d) => {
      buf = Buffer.concat([buf, d]);
      const msg = unframeTcp(buf);
      if (msg) c.end(Buffer.from(frameTcp(answer(msg, "tcp"))));
    });
    c.on("error", () => undefined);
  });
  await new Promise<void>((r) => tcp.listen(0, "127.0.0.1", r));
  const port = (tcp.address() as AddressInfo).port;
  const udp = createSocket("udp4");
  udp.on("message", (msg, rinfo) => {
    try {
      udp.send(answer(msg, "udp"), rinfo.port, rinfo.address);
    } catch {
      // Not a DNS message: ignore it, as a server would.
    }
  });
  await new Promise<void>((r) => udp.bind(port, "127.0.0.1", r));

  const http = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const rec = /^\/txt\/([^/?]+)$/.exec(req.url ?? "");
      if (rec) {
        const name = norm(decodeURIComponent(rec[1] ?? ""));
        if (req.method === "PUT") txt.set(name, [...(txt.get(name) ?? []), body.toString().trim()]);
        else if (req.method === "DELETE") txt.delete(name);
        res.end();
        return;
      }
      if (req.url === "/dns-query" && req.method === "POST" && req.headers["content-type"] === "application/dns-message") {
        res.writeHead(200, { "content-type": "application/dns-message" });
        res.end(Buffer.from(answer(body, "doh")));
        return;
      }
      res.statusCode = 404;
      res.end();
    });
  });
  await new Promise<void>((r) => http.listen(0, "127.0.0.1", r));
  const httpBase = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  return {
    resolver: `127.0.0.1:${port}`,
    doh: `${httpBase}/dns-query`,
    api: httpBase,
    asked,
    close: async () => {
      http.closeAllConnections();
      await Promise.all([new Promise((r) => tcp.close(r)), new Promise((r) => udp.close(() => r(null))), new Promise((r) => http.close(r))]);
    },
  };
}
