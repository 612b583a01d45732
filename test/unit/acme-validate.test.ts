/**
 * ACME challenge validation end to end in plain Node: http-01 / dns-01 against real local servers
 * (node:net, node:http), the dial policy of production (no non-public address is connected to)
 * and problems that never echo a target's answer. Only the socket differs from the Worker:
 * node:net stands in for `cloudflare:sockets`' connect() (validate.ts), which the e2e tests with
 * lego and certbot drive. The pure codecs and checks are in acme-validate-parsing.test.ts.
 */
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import net, { type AddressInfo, type Server } from "node:net";
import { Readable, Writable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { bytesToBase64Url, sha256 } from "../../src/core/encoding";
import { runChallengeValidation, type Platform, type ValidationEnv } from "../../src/engines/pki/acme/validate-challenge";
import { DEFAULT_DOH_RESOLVER, lookupAddress, resolverFor } from "../../src/engines/pki/acme/validate-dns";
import {
  DNS_CLASS_IN,
  DNS_TYPE,
  decodeDnsMessage,
  encodeDnsMessage,
  encodeNameRdata,
  encodeTxtRdata,
  frameTcp,
  unframeTcp,
  type DnsRecord,
} from "../../src/engines/pki/acme/validate-dns-wire";
import { splitHostPort, type ByteSocket } from "../../src/engines/pki/acme/validate-net";

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);

function nodeDial(address: string, tls: boolean): ByteSocket {
  if (tls) throw new Error("no TLS in these tests");
  const hp = splitHostPort(address);
  if (!hp) throw new Error(`bad address ${address}`);
  const sock = net.connect({ host: hp.host, port: hp.port });
  const opened = new Promise<void>((resolve, reject) => {
    sock.once("connect", () => resolve());
    sock.once("error", reject);
  });
  opened.catch(() => undefined);
  return {
    readable: Readable.toWeb(sock) as ReadableStream<Uint8Array>,
    writable: Writable.toWeb(sock) as WritableStream<Uint8Array>,
    opened,
    close: () => {
      sock.destroy();
    },
  };
}

const platform: Platform = { dial: nodeDial, fetch: (i, init) => fetch(i, init) };
const servers: (Server | HttpServer)[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
});

async function listen<S extends Server | HttpServer>(s: S): Promise<number> {
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  return (s.address() as AddressInfo).port;
}

/** A raw TCP server: `reply(request head)` returns the bytes to send (null: say nothing). */
async function rawHttp(reply: (head: string) => string | null): Promise<{ port: number; heads: string[] }> {
  const heads: string[] = [];
  const port = await listen(
    net.createServer((c) => {
      let buf = "";
      c.on("data", (d) => {
        buf += d.toString("latin1");
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buf.slice(0, end);
        heads.push(head);
        const out = reply(head);
        if (out !== null) c.end(out);
      });
      c.on("error", () => undefined);
    }),
  );
  return { port, heads };
}

const TOKEN = "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA";
const KEY_AUTH = `${TOKEN}.nP1qzpXGymHBrUEepNY9HCsQk7K8KhOypzEt62jcerQ`;
const dev = (port: number): ValidationEnv => ({ ENVIRONMENT: "development", ACME_HTTP01_TARGET: `127.0.0.1:${port}` });
const hostOf = (head: string): string => /\r\nhost: ([^\r]*)/i.exec(head)?.[1] ?? "";

describe("http-01 over a socket", () => {
  it("asks the target for the token with Host: <identifier> and accepts the trimmed key authorization", async () => {
    // Like lego's standalone server: the right answer only for the right Host.
    const srv = await rawHttp((head) => (hostOf(head) === "web.example.test" && head.startsWith(`GET /.well-known/acme-challenge/${TOKEN} HTTP/1.1`) ? `HTTP/1.1 200 OK\r\nContent-Length: ${KEY_AUTH.length + 2}\r\n\r\n${KEY_AUTH}\r\n` : "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"));
    const r = await runChallengeValidation(platform, dev(srv.port), { dnsResolver: "" }, "http-01", "web.example.test", TOKEN, KEY_AUTH);
    expect(r).toEqual({ ok: true });
    expect(hostOf(srv.heads[0] ?? "")).toBe("web.example.test");
    const wrongHost = await runChallengeValidation(platform, dev(srv.port), { dnsResolver: "" }, "http-01", "other.example.test", TOKEN, KEY_AUTH);
    expect(wrongHost).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:incorrectResponse", detail: /HTTP 404/ } });
  });

  it("reads a chunked answer and a close-delimited one; an IPv6 identifier is bracketed in Host", async () => {
    const chunked = await rawHttp(() => `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n${KEY_AUTH.slice(0, 16)}\r\n${(KEY_AUTH.length - 16).toString(16)}\r\n${KEY_AUTH.slice(16)}\r\n0\r\n\r\n`);
    expect(await runChallengeValidation(platform, dev(chunked.port), { dnsResolver: "" }, "http-01", "a.example.test", TOKEN, KEY_AUTH)).toEqual({ ok: true });
    const closed = await rawHttp(() => `HTTP/1.0 200 OK\r\n\r\n\n ${KEY_AUTH} \n`);
    expect(await runChallengeValidation(platform, dev(closed.port), { dnsResolver: "" }, "http-01", "2001:db8::5", TOKEN, KEY_AUTH)).toEqual({ ok: true });
    expect(hostOf(closed.heads[0] ?? "")).toBe("[2001:db8::5]");
  });

  it("follows redirects (new Host each hop) and stops at the tenth", async () => {
    let hops = 0;
    const srv = await rawHttp((head) => {
      if (hostOf(head) === "final.example.test") return `HTTP/1.1 200 OK\r\nContent-Length: ${KEY_AUTH.length}\r\n\r\n${KEY_AUTH}`;
      hops++;
      return `HTTP/1.1 302 Found\r\nLocation: http://final.example.test/ka?x=1\r\nContent-Length: 0\r\n\r\n`;
    });
    expect(await runChallengeValidation(platform, dev(srv.port), { dnsResolver: "" }, "http-01", "start.example.test", TOKEN, KEY_AUTH)).toEqual({ ok: true });
    expect(hops).toBe(1);
    expect(srv.heads.at(-1)).toMatch(/^GET \/ka\?x=1 HTTP\/1\.1/);
    const loop = await rawHttp(() => "HTTP/1.1 301 Moved\r\nLocation: /again\r\nContent-Length: 0\r\n\r\n");
    const r = await runChallengeValidation(platform, dev(loop.port), { dnsResolver: "" }, "http-01", "loop.example.test", TOKEN, KEY_AUTH);
    expect(r).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:connection", detail: "http-01: too many redirects" } });
    expect(loop.heads).toHaveLength(10);
  });

  it("answers problems: too large, connection refused, timeout, malformed input", async () => {
    const big = await rawHttp(() => `HTTP/1.1 200 OK\r\n\r\n${"x".repeat(4096)}`);
    expect(await runChallengeValidation(platform, dev(big.port), { dnsResolver: "" }, "http-01", "a.test", TOKEN, KEY_AUTH)).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:incorrectResponse", detail: /response too large/ } });
    const gone = await listen(net.createServer());
    await new Promise((r) => servers.pop()?.close(r));
    expect(await runChallengeValidation(platform, dev(gone), { dnsResolver: "" }, "http-01", "a.test", TOKEN, KEY_AUTH)).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:connection", detail: /cannot connect/ } });
    const silent = await rawHttp(() => null);
    const t0 = Date.now();
    expect(await runChallengeValidation(platform, dev(silent.port), { dnsResolver: "" }, "http-01", "a.test", TOKEN, KEY_AUTH, 300)).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:connection", detail: /timed out/ } });
    expect(Date.now() - t0).toBeLessThan(3000);
    expect(await runChallengeValidation(platform, dev(big.port), { dnsResolver: "" }, "http-01", "a.test", "bad token\r\n", KEY_AUTH)).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:malformed" } });
    expect(await runChallengeValidation(platform, dev(big.port), { dnsResolver: "" }, "http-01", "*.a.test", TOKEN, KEY_AUTH)).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:malformed", detail: /wildcard/ } });
    expect(await runChallengeValidation(platform, dev(big.port), { dnsResolver: "" }, "http-01", "a.test\r\nX: y", TOKEN, KEY_AUTH)).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:malformed" } });
  });

  it("ACME_HTTP01_TARGET is refused outside development, and must be host:port", async () => {
    const prod = await runChallengeValidation(platform, { ENVIRONMENT: "production", ACME_HTTP01_TARGET: "127.0.0.1:1" }, { dnsResolver: "" }, "http-01", "a.test", TOKEN, KEY_AUTH);
    expect(prod).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:serverInternal", detail: /ENVIRONMENT is not development/ } });
    const bad = await runChallengeValidation(platform, { ENVIRONMENT: "development", ACME_HTTP01_TARGET: "nope" }, { dnsResolver: "" }, "http-01", "a.test", TOKEN, KEY_AUTH);
    expect(bad).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:serverInternal", detail: /host:port/ } });
  });
});

// ---- dns-01 against a DNS-over-TCP server and a DoH server, both answering from one zone. ----

type Zone = Record<string, { txt?: string[][]; a?: number[]; cname?: string; rcode?: number }>;

function answer(query: Uint8Array, zone: Zone, tweak: { id?: number } = {}): Uint8Array {
  const q = decodeDnsMessage(query);
  const question = q.questions[0];
  if (!question) throw new Error("no question");
  const answers: DnsRecord[] = [];
  let name = question.name;
  let rcode = 0;
  for (let i = 0; i < 5; i++) {
    const entry = zone[name];
    if (!entry) {
      if (i === 0) rcode = 3;
      break;
    }
    if (entry.rcode !== undefined) rcode = entry.rcode;
    if (entry.cname) {
      answers.push({ name, type: DNS_TYPE.CNAME, class: DNS_CLASS_IN, ttl: 60, rdata: encodeNameRdata(entry.cname) });
      name = entry.cname;
      continue;
    }
    if (question.type === DNS_TYPE.TXT) for (const t of entry.txt ?? []) answers.push({ name, type: DNS_TYPE.TXT, class: DNS_CLASS_IN, ttl: 60, rdata: encodeTxtRdata(t) });
    if (question.type === DNS_TYPE.A && entry.a) answers.push({ name, type: DNS_TYPE.A, class: DNS_CLASS_IN, ttl: 60, rdata: Uint8Array.from(entry.a) });
    break;
  }
  return encodeDnsMessage({ id: tweak.id ?? q.id, response: true, rcode, questions: q.questions, answers });
}

async function tcpDns(zone: Zone, tweak: { id?: number } = {}): Promise<{ port: number; asked: string[] }> {
  const asked: string[] = [];
  const port = await listen(
    net.createServer((c) => {
      let buf = Buffer.alloc(0);
      c.on("data", (d) => {
        buf = Buffer.concat([buf, d]);
        const msg = unframeTcp(buf);
        if (!msg) return;
        asked.push(decodeDnsMessage(msg).questions.map((q) => `${q.name}/${q.type}`).join());
        c.end(Buffer.from(frameTcp(answer(msg, zone, tweak))));
      });
      c.on("error", () => undefined);
    }),
  );
  return { port, asked };
}

async function dohServer(zone: Zone, contentType = "application/dns-message"): Promise<{ url: string; requests: { method?: string; type?: string }[] }> {
  const requests: { method?: string; type?: string }[] = [];
  const port = await listen(
    createHttpServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        requests.push({ method: req.method, type: req.headers["content-type"] });
        res.writeHead(200, { "content-type": contentType });
        res.end(Buffer.from(answer(Buffer.concat(chunks), zone)));
      });
    }),
  );
  return { url: `http://127.0.0.1:${port}/dns-query`, requests };
}

describe("dns-01 through the resolver", async () => {
  const digest = bytesToBase64Url(await sha256(KEY_AUTH));
  const zone: Zone = {
    "_acme-challenge.ok.test": { txt: [["unrelated"], [digest.slice(0, 10), digest.slice(10)]] },
    "_acme-challenge.wrong.test": { txt: [["a"], ["b"]] },
    "_acme-challenge.delegated.test": { cname: "ok-zone.validation.test" },
    "ok-zone.validation.test": { txt: [[digest]] },
    "_acme-challenge.broken.test": { rcode: 2 },
    "www.ok.test": { cname: "web.ok.test" },
    "web.ok.test": { a: [127, 0, 0, 9] },
  };
  const devEnv: ValidationEnv = { ENVIRONMENT: "development" };

  it("DNS over TCP (Vault's host:port): any matching TXT value passes; wildcards check the base domain", async () => {
    const dns = await tcpDns(zone);
    const cfg = { dnsResolver: `127.0.0.1:${dns.port}` };
    expect(await runChallengeValidation(platform, {}, cfg, "dns-01", "ok.test", TOKEN, KEY_AUTH)).toEqual({ ok: true });
    expect(await runChallengeValidation(platform, {}, cfg, "dns-01", "*.ok.test", TOKEN, KEY_AUTH)).toEqual({ ok: true });
    expect(await runChallengeValidation(platform, {}, cfg, "dns-01", "delegated.test", TOKEN, KEY_AUTH)).toEqual({ ok: true });
    expect(dns.asked.slice(0, 2)).toEqual(["_acme-challenge.ok.test/16", "_acme-challenge.ok.test/16"]);
    expect(await runChallengeValidation(platform, {}, cfg, "dns-01", "wrong.test", TOKEN, KEY_AUTH)).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:incorrectResponse", detail: /challenge failed against 2 records/ } });
    expect(await runChallengeValidation(platform, {}, cfg, "dns-01", "missing.test", TOKEN, KEY_AUTH)).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:incorrectResponse", detail: /no TXT record/ } });
    expect(await runChallengeValidation(platform, {}, cfg, "dns-01", "broken.test", TOKEN, KEY_AUTH)).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:dns", detail: /SERVFAIL/ } });
    expect(await runChallengeValidation(platform, {}, cfg, "dns-01", "10.0.0.1", TOKEN, KEY_AUTH)).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:malformed" } });
  });

  it("resolves an http-01 host's address through the resolver (A, through a CNAME)", async () => {
    const dns = await tcpDns(zone);
    const deps = { ...platform, deadline: Date.now() + 5000 };
    expect(await lookupAddress(deps, resolverFor({}, `127.0.0.1:${dns.port}`), "www.ok.test")).toBe("127.0.0.9");
    await expect(lookupAddress(deps, resolverFor({}, `127.0.0.1:${dns.port}`), "none.test")).rejects.toThrow(/no A or AAAA record/);
  });

  it("refuses an answer to another query id", async () => {
    const dns = await tcpDns(zone, { id: 7 });
    const r = await runChallengeValidation(platform, {}, { dnsResolver: `127.0.0.1:${dns.port}` }, "dns-01", "ok.test", TOKEN, KEY_AUTH);
    // 1 in 65536 runs draws id 7 itself and passes the id check; the zone answer is then valid.
    if (!r.ok) expect(r.problem).toMatchObject({ type: "urn:ietf:params:acme:error:dns", detail: /query id/ });
  });

  it("DNS over HTTPS (RFC 8484): POST application/dns-message; plain http:// only in development", async () => {
    const doh = await dohServer(zone);
    expect(await runChallengeValidation(platform, devEnv, { dnsResolver: doh.url }, "dns-01", "ok.test", TOKEN, KEY_AUTH)).toEqual({ ok: true });
    expect(doh.requests[0]).toEqual({ method: "POST", type: "application/dns-message" });
    expect(await runChallengeValidation(platform, { ENVIRONMENT: "production" }, { dnsResolver: doh.url }, "dns-01", "ok.test", TOKEN, KEY_AUTH)).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:dns", detail: /https/ } });
    const html = await dohServer(zone, "text/html");
    expect(await runChallengeValidation(platform, devEnv, { dnsResolver: html.url }, "dns-01", "ok.test", TOKEN, KEY_AUTH)).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:dns", detail: /content type/ } });
  });

  it("an empty dns_resolver asks Cloudflare's public DoH resolver", async () => {
    const seen: string[] = [];
    const fake: Platform = {
      dial: nodeDial,
      fetch: async (input, init) => {
        seen.push(String(input));
        const body = new Uint8Array(await new Response(init?.body).arrayBuffer());
        return new Response(answer(body, zone), { headers: { "content-type": "application/dns-message" } });
      },
    };
    expect(await runChallengeValidation(fake, { ENVIRONMENT: "production" }, { dnsResolver: "" }, "dns-01", "ok.test", TOKEN, KEY_AUTH)).toEqual({ ok: true });
    expect(seen).toEqual([DEFAULT_DOH_RESOLVER]);
  });
});

describe("http-01 when connect() cannot reach the name (Cloudflare's own IP ranges)", () => {
  const refused: Platform["dial"] = () => {
    const opened = Promise.reject(new Error("proxy request failed, cannot connect to the specified address"));
    opened.catch(() => undefined);
    return { readable: new ReadableStream(), writable: new WritableStream(), opened, close: () => undefined };
  };

  it("retries the hop with fetch() of the same URL (its Host is the identifier), redirects still followed by the loop", async () => {
    const urls: string[] = [];
    const fake: Platform = {
      dial: refused,
      fetch: async (input, init) => {
        urls.push(String(input));
        expect(init?.redirect).toBe("manual");
        if (String(input).includes("/.well-known/")) return new Response(null, { status: 302, headers: { location: "/moved" } });
        return new Response(`${KEY_AUTH}\n`);
      },
    };
    expect(await runChallengeValidation(fake, { ENVIRONMENT: "production" }, { dnsResolver: "" }, "http-01", "proxied.example.test", TOKEN, KEY_AUTH)).toEqual({ ok: true });
    expect(urls).toEqual([`http://proxied.example.test/.well-known/acme-challenge/${TOKEN}`, "http://proxied.example.test/moved"]);
  });

  it("no fallback for IP identifiers or a redirected connection; both failures are reported", async () => {
    const fetchFails: Platform = { dial: refused, fetch: async () => Promise.reject(new TypeError("fetch failed")) };
    const both = await runChallengeValidation(fetchFails, {}, { dnsResolver: "" }, "http-01", "down.example.test", TOKEN, KEY_AUTH);
    expect(both).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:connection", detail: /cannot connect to down\.example\.test:80.*fetch\(\) failed too/ } });
    let fetched = 0;
    const counting: Platform = { dial: refused, fetch: async () => (fetched++, new Response(KEY_AUTH)) };
    expect(await runChallengeValidation(counting, {}, { dnsResolver: "" }, "http-01", "203.0.114.7", TOKEN, KEY_AUTH)).toMatchObject({ ok: false, problem: { detail: /cannot connect to 203\.0\.114\.7:80/ } });
    expect(await runChallengeValidation(counting, dev(1), { dnsResolver: "" }, "http-01", "a.example.test", TOKEN, KEY_AUTH)).toMatchObject({ ok: false });
    expect(fetched).toBe(0);
    const big: Platform = { dial: refused, fetch: async () => new Response("x".repeat(600)) };
    expect(await runChallengeValidation(big, {}, { dnsResolver: "" }, "http-01", "big.example.test", TOKEN, KEY_AUTH)).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:incorrectResponse", detail: /too large/ } });
  });
});

// ---- What validation connects to, and what it says about the answer. ----

/** A socket that answers `reply` to whatever is written, then closes. */
function cannedSocket(reply: string): ByteSocket {
  return {
    readable: new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(enc(reply));
        c.close();
      },
    }),
    writable: new WritableStream<Uint8Array>(),
    opened: Promise.resolve(),
    close: () => undefined,
  };
}

/** A platform that records every connection and fetch; each connection answers `reply(address)`. */
function recording(reply: (address: string) => string, zone: Zone = {}): { p: Platform; dialled: string[]; fetched: string[] } {
  const dialled: string[] = [];
  const fetched: string[] = [];
  const p: Platform = {
    dial: (address) => {
      dialled.push(address);
      return cannedSocket(reply(address));
    },
    fetch: async (input, init) => {
      fetched.push(String(input));
      if (init?.method === "POST") {
        const body = new Uint8Array(await new Response(init.body).arrayBuffer());
        return new Response(answer(body, zone), { headers: { "content-type": "application/dns-message" } });
      }
      return new Response("nothing");
    },
  };
  return { p, dialled, fetched };
}

const ok200 = (body: string) => `HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n${body}`;

describe("production: validation never connects to a non-public address", () => {
  const prod: ValidationEnv = { ENVIRONMENT: "production" };

  it.each(["127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "::1", "::", "fd00::1", "fe80::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254"])(
    "an IP identifier %s is refused before connecting",
    async (ip) => {
      const { p, dialled, fetched } = recording(() => ok200(KEY_AUTH));
      const r = await runChallengeValidation(p, prod, { dnsResolver: "" }, "http-01", ip, TOKEN, KEY_AUTH);
      expect(r).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:rejectedIdentifier", detail: /not a public address/ } });
      expect(dialled).toEqual([]);
      expect(fetched).toEqual([]);
    },
  );

  it("an address dns_resolver returns is refused when it is not public", async () => {
    const zone: Zone = { "private.example.test": { a: [10, 0, 0, 5] }, "meta.example.test": { a: [169, 254, 169, 254] }, "cgnat.example.test": { a: [100, 64, 1, 1] }, "public.example.test": { a: [203, 0, 114, 9] } };
    const { p, dialled } = recording(() => ok200(KEY_AUTH), zone);
    const cfg = { dnsResolver: "https://dns.example/dns-query" };
    for (const name of ["private.example.test", "meta.example.test", "cgnat.example.test"]) {
      const r = await runChallengeValidation(p, prod, cfg, "http-01", name, TOKEN, KEY_AUTH);
      expect(r, name).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:rejectedIdentifier", detail: /not a public address/ } });
    }
    expect(dialled).toEqual([]);
    expect(await runChallengeValidation(p, prod, cfg, "http-01", "public.example.test", TOKEN, KEY_AUTH)).toEqual({ ok: true });
    expect(dialled).toEqual(["203.0.114.9:80"]);
  });

  it("a redirect to a non-public address or to localhost is refused before connecting", async () => {
    for (const location of ["http://10.0.0.1/x", "http://[::ffff:127.0.0.1]/x", "http://[fd00::1]/x", "http://localhost/x"]) {
      const { p, dialled } = recording(() => `HTTP/1.1 302 Found\r\nLocation: ${location}\r\nContent-Length: 0\r\n\r\n`);
      const r = await runChallengeValidation(p, prod, { dnsResolver: "" }, "http-01", "203.0.114.7", TOKEN, KEY_AUTH);
      expect(r, location).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:connection", detail: /refus/ } });
      expect(dialled).toEqual(["203.0.114.7:80"]);
    }
  });

  it("the name localhost is refused too (RFC 6761 §6.3)", async () => {
    const { p, dialled, fetched } = recording(() => ok200(KEY_AUTH));
    for (const name of ["localhost", "app.localhost", "LOCALHOST."]) {
      expect(await runChallengeValidation(p, prod, { dnsResolver: "" }, "http-01", name, TOKEN, KEY_AUTH), name).toMatchObject({ ok: false, problem: { type: "urn:ietf:params:acme:error:rejectedIdentifier" } });
    }
    expect([...dialled, ...fetched]).toEqual([]);
  });

  it("development still validates against local fakes", async () => {
    const { p, dialled } = recording(() => ok200(KEY_AUTH));
    expect(await runChallengeValidation(p, { ENVIRONMENT: "development" }, { dnsResolver: "" }, "http-01", "127.0.0.1", TOKEN, KEY_AUTH)).toEqual({ ok: true });
    expect(dialled).toEqual(["127.0.0.1:80"]);
  });
});

describe("a validation target's answer is never echoed in the problem", () => {
  const leaks = [
    ok200("SECRET-internal-data"),
    "SSH-2.0-OpenSSH_9.6 SECRET-banner\r\n\r\n",
    "HTTP/1.1 200 OK\r\nSECRET-header-without-colon\r\n\r\n",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nSECRETzz\r\n",
  ];
  it.each([["development"], ["production"]])("in %s", async (environment) => {
    for (const reply of leaks) {
      const { p } = recording(() => reply);
      const r = await runChallengeValidation(p, { ENVIRONMENT: environment }, { dnsResolver: "" }, "http-01", "203.0.114.7", TOKEN, KEY_AUTH);
      expect(r.ok, reply).toBe(false);
      if (!r.ok) expect(r.problem.detail, reply).not.toMatch(/SECRET|OpenSSH/);
    }
  });
});
