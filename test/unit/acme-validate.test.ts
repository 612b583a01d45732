/**
 * ACME challenge validation (src/engines/pki/acme/validate-*.ts) in plain Node: the DNS wire
 * codec, the HTTP/1.1 response parser, and http-01 / dns-01 end to end against real local
 * servers (node:net, node:http). Only the socket differs from the Worker: node:net stands in for
 * `cloudflare:sockets`' connect() (validate.ts), which the e2e tests with lego and certbot drive.
 */
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import net, { type AddressInfo, type Server } from "node:net";
import { Readable, Writable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { bytesToBase64Url, sha256 } from "../../src/core/encoding";
import { runChallengeValidation, type Platform, type ValidationEnv } from "../../src/engines/pki/acme/validate-challenge";
import { DEFAULT_DOH_RESOLVER, dnsResolverProblem, lookupAddress, resolverFor } from "../../src/engines/pki/acme/validate-dns";
import {
  DNS_CLASS_IN,
  DNS_TYPE,
  DnsWireError,
  answersFor,
  decodeAddressRdata,
  decodeDnsMessage,
  decodeTxtRdata,
  encodeDnsMessage,
  encodeDnsQuery,
  encodeNameRdata,
  encodeTxtRdata,
  frameTcp,
  readName,
  unframeTcp,
  type DnsRecord,
} from "../../src/engines/pki/acme/validate-dns-wire";
import { buildHttpRequest, parseHttpResponse, redirectTarget } from "../../src/engines/pki/acme/validate-http";
import { isIpv6 as isIPv6 } from "../../src/core/ip";
import { isDnsName, splitHostPort, ValidationFailure, type ByteSocket } from "../../src/engines/pki/acme/validate-net";

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");

describe("DNS wire codec (RFC 1035 §4)", () => {
  it("encodes a query byte for byte", () => {
    const q = encodeDnsQuery(0x1234, "example.com.", DNS_TYPE.TXT);
    expect(hex(q)).toBe("123401000001000000000000" + "076578616d706c6503636f6d00" + "00100001");
  });

  it("refuses names a query cannot carry", () => {
    expect(() => encodeDnsQuery(1, `${"a".repeat(64)}.com`, DNS_TYPE.TXT)).toThrow(DnsWireError);
    expect(() => encodeDnsQuery(1, "a..com", DNS_TYPE.TXT)).toThrow(/empty label/);
    expect(() => encodeDnsQuery(1, Array(130).fill("ab").join("."), DNS_TYPE.TXT)).toThrow(/255/);
  });

  it("decodes answers with compression pointers, TXT strings joined", () => {
    // Question _acme-challenge.example.com at offset 12; the answer's owner is a pointer to it (c00c).
    const header = "abcd81800001000100000000";
    const qname = "0f5f61636d652d6368616c6c656e6765076578616d706c6503636f6d00";
    const answer = "c00c" + "0010" + "0001" + "0000012c" + "0008" + "03616263" + "03646566";
    const msg = decodeDnsMessage(Buffer.from(header + qname + "00100001" + answer, "hex"));
    expect(msg).toMatchObject({ id: 0xabcd, response: true, rcode: 0, truncated: false, questions: [{ name: "_acme-challenge.example.com", type: 16, class: 1 }] });
    expect(msg.answers).toHaveLength(1);
    expect(msg.answers[0]).toMatchObject({ name: "_acme-challenge.example.com", type: DNS_TYPE.TXT, ttl: 300 });
    expect(decodeTxtRdata(msg.answers[0]?.rdata ?? new Uint8Array())).toBe("abcdef");
  });

  it("expands a compressed CNAME target and follows the chain in the answer section", () => {
    // Question at 12: _acme-challenge.example.com; CNAME -> "x." + pointer to example.com (offset 28); then TXT at x.example.com.
    const header = "000181800001000200000000";
    const qname = "0f5f61636d652d6368616c6c656e6765076578616d706c6503636f6d00";
    const cname = "c00c" + "0005" + "0001" + "0000003c" + "0004" + "0178c01c";
    const txt = "0178c01c" + "0010" + "0001" + "0000003c" + "0004" + "03717171";
    const msg = decodeDnsMessage(Buffer.from(header + qname + "00100001" + cname + txt, "hex"));
    expect(readName(msg.answers[0]?.rdata ?? new Uint8Array(), 0).name).toBe("x.example.com");
    expect(msg.answers[1]?.name).toBe("x.example.com");
    const got = answersFor(msg, "_acme-challenge.EXAMPLE.com.", DNS_TYPE.TXT);
    expect(got.map((a) => decodeTxtRdata(a.rdata))).toEqual(["qqq"]);
    expect(answersFor(msg, "other.example.com", DNS_TYPE.TXT)).toEqual([]);
  });

  it("a CNAME loop ends with no answer", () => {
    const rec = (name: string, target: string): DnsRecord => ({ name, type: DNS_TYPE.CNAME, class: DNS_CLASS_IN, ttl: 1, rdata: encodeNameRdata(target) });
    const msg = decodeDnsMessage(encodeDnsMessage({ id: 1, response: true, questions: [], answers: [rec("a.test", "b.test"), rec("b.test", "a.test")] }));
    expect(answersFor(msg, "a.test", DNS_TYPE.TXT)).toEqual([]);
  });

  it("refuses malformed messages instead of looping or reading past the end", () => {
    // A pointer to itself, a pointer forward, a label running past the end, a short header.
    expect(() => readName(Buffer.from("c000", "hex"), 0)).toThrow(/backwards/);
    expect(() => readName(Buffer.from("00" + "c003" + "c001", "hex"), 1)).toThrow(/backwards/);
    expect(() => readName(Buffer.from("0161c000", "hex"), 0)).toThrow(/backwards/); // "a" then a pointer back to the start: a loop
    expect(() => readName(Buffer.from("0561", "hex"), 0)).toThrow(/past the message/);
    expect(() => decodeDnsMessage(new Uint8Array(5))).toThrow(DnsWireError);
    const truncated = encodeDnsMessage({ id: 1, response: true, questions: [{ name: "a.test", type: 16, class: 1 }], answers: [{ name: "a.test", type: 16, class: 1, ttl: 1, rdata: encodeTxtRdata(["x"]) }] });
    expect(() => decodeDnsMessage(truncated.subarray(0, truncated.length - 1))).toThrow(/truncated/);
    expect(() => decodeTxtRdata(Uint8Array.from([5, 0x61]))).toThrow(DnsWireError);
  });

  it("round-trips TXT (split at 255 octets), A, AAAA and the TCP length prefix", () => {
    const long = "z".repeat(300);
    expect(decodeTxtRdata(encodeTxtRdata([long]))).toBe(long);
    expect(encodeTxtRdata([long])[0]).toBe(255);
    expect(decodeAddressRdata(DNS_TYPE.A, Uint8Array.from([127, 0, 0, 1]))).toBe("127.0.0.1");
    expect(decodeAddressRdata(DNS_TYPE.AAAA, Uint8Array.from([0x20, 0x01, 0x0d, 0xb8, ...Array(11).fill(0), 1]))).toBe("2001:db8::1");
    expect(decodeAddressRdata(DNS_TYPE.AAAA, Uint8Array.from([...Array(10).fill(0), 0xff, 0xff, 127, 0, 0, 1]))).toBe("::ffff:127.0.0.1");
    expect(() => decodeAddressRdata(DNS_TYPE.A, Uint8Array.from([1, 2, 3]))).toThrow(DnsWireError);
    const framed = frameTcp(Uint8Array.from([1, 2, 3]));
    expect(Array.from(framed)).toEqual([0, 3, 1, 2, 3]);
    expect(unframeTcp(framed.subarray(0, 4))).toBeNull();
    expect(Array.from(unframeTcp(framed) ?? [])).toEqual([1, 2, 3]);
  });
});

describe("HTTP/1.1 response parser (RFC 9112)", () => {
  const parse = (s: string, eof = false) => parseHttpResponse(enc(s), eof);
  const body = (s: string, eof = false): string => {
    const p = parse(s, eof);
    if (p.state !== "done") throw new Error(`not done: ${JSON.stringify(p)}`);
    return new TextDecoder().decode(p.response.body);
  };

  it("Content-Length: waits for the whole body, ignores what follows", () => {
    expect(parse("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab").state).toBe("more");
    expect(body("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabcdeXYZ")).toBe("abcde");
    expect(parse("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", true)).toMatchObject({ state: "error", message: /before the end of the body/ });
  });

  it("chunked: sizes in hex with extensions, trailer fields skipped; Transfer-Encoding wins over Content-Length", () => {
    const full = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n3;ext=1\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n";
    expect(body(full)).toBe("abc0123456789");
    for (let cut = 60; cut < full.length; cut += 7) expect(parse(full.slice(0, cut)).state).toBe("more");
    expect(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")).toMatchObject({ state: "error", message: /chunk size/ });
    expect(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n")).toMatchObject({ state: "error", message: /longer than its size/ });
    expect(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab", true)).toMatchObject({ state: "error" });
  });

  it("no framing: the body runs to the end of the connection; bare LF line ends accepted", () => {
    expect(parse("HTTP/1.0 200 OK\nServer: x\n\nhello").state).toBe("more");
    expect(body("HTTP/1.0 200 OK\nServer: x\n\nhello", true)).toBe("hello");
  });

  it("skips interim 1xx responses; 204 and 304 have no body", () => {
    expect(body("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")).toBe("ok");
    const p = parse("HTTP/1.1 204 No Content\r\n\r\n");
    expect(p).toMatchObject({ state: "done", response: { status: 204 } });
  });

  it("a body over 512 bytes is 'too large' as soon as that is known, whatever the framing", () => {
    expect(parse("HTTP/1.1 200 OK\r\nContent-Length: 513\r\n\r\n")).toMatchObject({ state: "error", tooLarge: true });
    expect(parse(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n200\r\n${"a".repeat(512)}\r\n1\r\n`)).toMatchObject({ state: "error", tooLarge: true });
    expect(parse(`HTTP/1.1 200 OK\r\n\r\n${"a".repeat(513)}`)).toMatchObject({ state: "error", tooLarge: true });
    expect(body(`HTTP/1.1 200 OK\r\nContent-Length: 512\r\n\r\n${"a".repeat(512)}`)).toHaveLength(512);
  });

  it("refuses malformed heads", () => {
    expect(parse("HTTP/2 200 OK\r\n\r\n")).toMatchObject({ state: "error", message: /status line/ });
    expect(parse("SSH-2.0-OpenSSH\r\n\r\n")).toMatchObject({ state: "error", message: /status line/ });
    expect(parse("HTTP/1.1 200 OK\r\nX: a\r\n  folded\r\n\r\n")).toMatchObject({ state: "error", message: /folding/ });
    expect(parse("HTTP/1.1 200 OK\r\nBad Header: a\r\n\r\n")).toMatchObject({ state: "error", message: /header field/ });
    expect(parse("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab")).toMatchObject({ state: "error", message: /Content-Length/ });
    expect(parse("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n")).toMatchObject({ state: "error", message: /Content-Length/ });
    expect(parse(`HTTP/1.1 200 OK\r\nX: ${"a".repeat(9000)}`)).toMatchObject({ state: "error", message: /too large/ });
    expect(parse("", true)).toMatchObject({ state: "error", message: "empty response" });
    expect(parse("HTTP/1.1 200 OK\r\n", true)).toMatchObject({ state: "error", message: /inside the response header/ });
  });

  it("builds one GET with the Host given and Connection: close", () => {
    const req = new TextDecoder().decode(buildHttpRequest("web.example.test", "/.well-known/acme-challenge/tok"));
    expect(req).toBe("GET /.well-known/acme-challenge/tok HTTP/1.1\r\nHost: web.example.test\r\nUser-Agent: Lanyard-ACME-validation (RFC 8555 8.3)\r\nAccept: */*\r\nConnection: close\r\n\r\n");
  });

  it("redirects only to http on port 80 or https on 443 (any http port behind the development target)", () => {
    const from = new URL("http://a.test/.well-known/acme-challenge/t");
    expect(redirectTarget("/other", from, false).href).toBe("http://a.test/other");
    expect(redirectTarget("https://b.test/x", from, false).href).toBe("https://b.test/x");
    const refused = (loc: string, dev = false): string => {
      try {
        redirectTarget(loc, from, dev);
      } catch (e) {
        expect(e).toBeInstanceOf(ValidationFailure);
        return (e as Error).message;
      }
      throw new Error("accepted");
    };
    expect(refused("http://b.test:8080/x")).toMatch(/refused/);
    expect(redirectTarget("http://b.test:8080/x", from, true).port).toBe("8080");
    expect(refused("https://b.test:8443/x")).toMatch(/refused/);
    expect(refused("ftp://b.test/x")).toMatch(/scheme/);
    expect(refused(`http://b.test/${"a".repeat(2000)}`)).toMatch(/longer than 2000/);
  });
});

describe("identifier and address checks", () => {
  it("tells IPv6, DNS names and host:port apart", () => {
    for (const ok of ["::1", "2001:db8::1", "::ffff:1.2.3.4", "1:2:3:4:5:6:7:8"]) expect(isIPv6(ok), ok).toBe(true);
    for (const bad of ["1:2:3:4:5:6:7:8:9", "1::2::3", "::g", "1.2.3.4", "a:b"]) expect(isIPv6(bad), bad).toBe(false);
    expect(isDnsName("_acme-challenge.example.com")).toBe(true);
    expect(isDnsName("bad name.test")).toBe(false);
    expect(isDnsName("a\r\nX-Injected: 1")).toBe(false);
    expect(splitHostPort("[::1]:53")).toEqual({ host: "::1", port: 53 });
    expect(splitHostPort("127.0.0.1:5353")).toEqual({ host: "127.0.0.1", port: 5353 });
    expect(splitHostPort("dns.example:53")).toEqual({ host: "dns.example", port: 53 });
    for (const bad of ["127.0.0.1", "::1:53", "h:0", "h:70000", "http://x:53"]) expect(splitHostPort(bad), bad).toBeNull();
  });

  it("dns_resolver: host:port or https://; plain http:// only to loopback in development", () => {
    const dev = { ENVIRONMENT: "development" };
    const prod = { ENVIRONMENT: "production" };
    expect(dnsResolverProblem(prod, "")).toBeNull();
    expect(dnsResolverProblem(prod, "1.1.1.1:53")).toBeNull();
    expect(dnsResolverProblem(prod, "[2606:4700:4700::1111]:53")).toBeNull();
    expect(dnsResolverProblem(prod, "https://dns.google/dns-query")).toBeNull();
    expect(dnsResolverProblem(prod, "http://127.0.0.1:8053/dns-query")).toMatch(/https/);
    expect(dnsResolverProblem(dev, "http://127.0.0.1:8053/dns-query")).toBeNull();
    expect(dnsResolverProblem(dev, "http://resolver.example/dns-query")).toMatch(/loopback/);
    expect(dnsResolverProblem(prod, "https://u:p@dns.example/q")).toMatch(/credentials/);
    expect(dnsResolverProblem(prod, "tls://1.1.1.1")).toMatch(/scheme/);
    expect(dnsResolverProblem(prod, "1.1.1.1")).toMatch(/dns_resolver/);
  });
});

// ---- End to end in Node: node:net stands in for connect(). ----

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
