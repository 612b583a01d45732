/**
 * ACME challenge validation's pure parts (src/engines/pki/acme/validate-*.ts), in plain Node: the
 * DNS wire codec (RFC 1035), the HTTP/1.1 response parser (RFC 9112), and the identifier and
 * address checks. The end-to-end validations against local servers are in acme-validate.test.ts.
 */
import net from "node:net";
import { describe, expect, it } from "vitest";
import { isIpv6 as isIPv6 } from "../../src/core/ip";
import { dnsResolverProblem } from "../../src/engines/pki/acme/validate-dns";
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
import { isDnsName, splitHostPort, ValidationFailure } from "../../src/engines/pki/acme/validate-net";

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
