/**
 * http-01 (RFC 8555 §8.3): GET `http://<identifier>/.well-known/acme-challenge/<token>` on port
 * 80 with `Host: <identifier>`; the body, whitespace trimmed, must be the key authorization.
 *
 * A Worker's fetch() cannot set the Host header, nor reach an address other than the one the
 * URL's host resolves to, so the request goes over a raw TCP socket (connect()) and this module
 * is a minimal HTTP/1.1 client: it writes one request (`Connection: close`) and reads one response
 * (RFC 9112: status line, header fields, a body framed by chunked transfer coding, Content-Length
 * or the end of the connection).
 *
 * Vault's rules (OpenBao builtin/logical/pki/acme_challenges.go): the status code is not checked, only the body; the
 * body may be at most 512 bytes ("http-01: response too large"); redirects are followed, at most
 * 10. Stricter here: a redirect may lead to http:// on port 80 or https:// on 443 only (as Let's
 * Encrypt), and an https:// hop verifies the server's certificate (the Workers runtime always
 * does; Vault turns verification off). `deps.deadline` bounds the whole validation.
 *
 * connect() cannot reach Cloudflare's own IP ranges, so a name proxied by Cloudflare cannot be
 * dialled. When the connection to a name itself fails (and nothing redirects the connection: no
 * development target, no address from dns_resolver), the hop is retried with fetch() of the
 * same URL: there the URL's host is the identifier, so the Host header is the right one anyway.
 * IP identifiers have no such fallback (a Worker's fetch() refuses IP addresses).
 *
 * Before every connection (and before the fetch() fallback) the host, or the address
 * `dns_resolver` returned for it, passes the environment's DialPolicy (validate-net.ts): in
 * production nothing that is no public host is dialled. Problems never quote the target's
 * answer (its body, status line or header fields): only its status code, its size and what was
 * wrong with it, so that validation cannot be used to read a service the Worker can reach.
 */
import { readCapped } from "../../../core/body";
import { lookupAddress, type Resolver } from "./validate-dns";
import { isIpv6 } from "../../../core/ip";
import { ValidationFailure, errorText, exchange, hostPort, withDeadline, isDnsName, isIpIdentifier, type DialPolicy, type NetDeps, type ReadStep, type ValidationResult } from "./validate-net";

/** Vault reads at most 513 bytes and refuses more than 512. */
export const MAX_CHALLENGE_BODY = 512;
/** The status line and header fields together. */
export const MAX_RESPONSE_HEAD = 8192;
const MAX_REDIRECTS = 10;
const MAX_REDIRECT_URL = 2000;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

export interface HttpResponse {
  status: number;
  /** Field names lower-cased, in order received. */
  headers: [string, string][];
  body: Uint8Array;
}

export type HttpParse = { state: "more" } | { state: "done"; response: HttpResponse } | { state: "error"; message: string; tooLarge?: boolean };

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Where the head ends: the index after the blank line, or -1. Bare LF line ends are accepted (RFC 9112 §2.2). */
function headEnd(buf: Uint8Array): number {
  for (let i = 0; i < buf.length; i++) {
    if (buf[i] !== 0x0a) continue;
    if (buf[i + 1] === 0x0a) return i + 2;
    if (buf[i + 1] === 0x0d && buf[i + 2] === 0x0a) return i + 3;
  }
  return -1;
}

/** The next line (without its CR LF or LF) starting at `pos`, or null when no line end has arrived. */
function lineAt(buf: Uint8Array, pos: number): { line: string; next: number } | null {
  for (let i = pos; i < buf.length; i++) {
    if (buf[i] === 0x0a) {
      const end = i > pos && buf[i - 1] === 0x0d ? i - 1 : i;
      return { line: new TextDecoder("latin1").decode(buf.subarray(pos, end)), next: i + 1 };
    }
  }
  return null;
}

export function headerValues(r: HttpResponse, name: string): string[] {
  return r.headers.filter(([k]) => k === name).map(([, v]) => v);
}

type Body = { state: "more" } | { state: "done"; body: Uint8Array } | { state: "error"; message: string; tooLarge?: boolean };

const tooLarge = (): Body => ({ state: "error", message: "response too large", tooLarge: true });

/** A chunked body (RFC 9112 §7.1): chunk sizes in hex, extensions ignored, trailer fields skipped. */
function chunkedBody(buf: Uint8Array, start: number, eof: boolean, maxBody: number): Body {
  const parts: Uint8Array[] = [];
  let size = 0;
  let pos = start;
  const incomplete = (): Body => (eof ? { state: "error", message: "connection closed inside a chunked body" } : { state: "more" });
  for (;;) {
    const l = lineAt(buf, pos);
    if (!l) return buf.length - pos > 64 ? { state: "error", message: "malformed chunk size line" } : incomplete();
    const hex = (l.line.split(";")[0] ?? "").trim();
    if (!/^[0-9a-fA-F]{1,8}$/.test(hex)) return { state: "error", message: "malformed chunk size" };
    const n = parseInt(hex, 16);
    pos = l.next;
    if (n === 0) {
      for (;;) {
        const t = lineAt(buf, pos);
        if (!t) return buf.length - pos > MAX_RESPONSE_HEAD ? { state: "error", message: "trailer fields too large" } : incomplete();
        pos = t.next;
        if (t.line === "") break;
      }
      const body = new Uint8Array(size);
      let off = 0;
      for (const p of parts) {
        body.set(p, off);
        off += p.length;
      }
      return { state: "done", body };
    }
    if (size + n > maxBody) return tooLarge();
    if (buf.length < pos + n) {
      return buf.length - pos + size > maxBody ? tooLarge() : incomplete();
    }
    parts.push(buf.subarray(pos, pos + n));
    size += n;
    pos += n;
    const end = lineAt(buf, pos);
    if (!end) return incomplete();
    if (end.line !== "") return { state: "error", message: "chunk data longer than its size" };
    pos = end.next;
  }
}

/**
 * Parses one HTTP/1.x response from everything received so far (`eof`: the peer closed).
 * "more" asks for more bytes. Interim 1xx responses are skipped. A body longer than `maxBody`
 * is an error with `tooLarge`, found as soon as it is known, so a large body is never buffered.
 */
export function parseHttpResponse(buf: Uint8Array, eof: boolean, maxBody = MAX_CHALLENGE_BODY): HttpParse {
  let start = 0;
  for (;;) {
    const rest = buf.subarray(start);
    const end = headEnd(rest);
    if (end < 0) {
      if (rest.length > MAX_RESPONSE_HEAD) return { state: "error", message: "response header fields too large" };
      if (eof) return { state: "error", message: rest.length === 0 ? "empty response" : "connection closed inside the response header fields" };
      return { state: "more" };
    }
    if (end > MAX_RESPONSE_HEAD) return { state: "error", message: "response header fields too large" };
    const lines = new TextDecoder("latin1").decode(rest.subarray(0, end)).split(/\r?\n/);
    const statusLine = /^HTTP\/1\.[01] ([1-9]\d\d)(?: [^\r\n]*)?$/.exec(lines[0] ?? "");
    if (!statusLine) return { state: "error", message: "malformed status line" };
    const status = Number(statusLine[1]);
    const headers: [string, string][] = [];
    for (const line of lines.slice(1)) {
      if (line === "") continue;
      if (/^[ \t]/.test(line)) return { state: "error", message: "obsolete line folding in the header fields" };
      const colon = line.indexOf(":");
      const name = line.slice(0, colon);
      if (colon <= 0 || !TOKEN.test(name)) return { state: "error", message: "malformed header field" };
      headers.push([name.toLowerCase(), line.slice(colon + 1).trim()]);
    }
    const bodyStart = start + end;
    if (status >= 100 && status < 200) {
      if (status === 101) return { state: "error", message: "unexpected 101 Switching Protocols" };
      start = bodyStart;
      continue;
    }
    const r = (body: Uint8Array): HttpParse => ({ state: "done", response: { status, headers, body } });
    if (status === 204 || status === 304) return r(new Uint8Array(0));
    const te = headers.filter(([k]) => k === "transfer-encoding").flatMap(([, v]) => v.split(",").map((c) => c.trim().toLowerCase()));
    let body: Body;
    if (te.length > 0) {
      // RFC 9112 §6.3: Transfer-Encoding overrides Content-Length; chunked must be the last coding, else the body runs to the close.
      body = te[te.length - 1] === "chunked" ? chunkedBody(buf, bodyStart, eof, maxBody) : closeDelimited(buf, bodyStart, eof, maxBody);
    } else {
      const cls = headers.filter(([k]) => k === "content-length").flatMap(([, v]) => v.split(",").map((c) => c.trim()));
      if (cls.length > 0) {
        const first = cls[0] ?? "";
        if (!/^\d{1,15}$/.test(first) || cls.some((c) => c !== first)) return { state: "error", message: "invalid Content-Length" };
        const n = Number(first);
        if (n > maxBody) return { state: "error", message: "response too large", tooLarge: true };
        if (buf.length - bodyStart >= n) body = { state: "done", body: buf.subarray(bodyStart, bodyStart + n) };
        else body = eof ? { state: "error", message: "connection closed before the end of the body" } : { state: "more" };
      } else {
        body = closeDelimited(buf, bodyStart, eof, maxBody);
      }
    }
    if (body.state === "done") return r(body.body);
    return body.state === "more" ? { state: "more" } : { state: "error", message: body.message, tooLarge: body.tooLarge };
  }
}

function closeDelimited(buf: Uint8Array, start: number, eof: boolean, maxBody: number): Body {
  if (buf.length - start > maxBody) return tooLarge();
  return eof ? { state: "done", body: buf.subarray(start) } : { state: "more" };
}

/** The request line and header fields of one GET, `Connection: close`, no content coding asked for. */
export function buildHttpRequest(hostHeader: string, pathAndQuery: string): Uint8Array {
  const head = [`GET ${pathAndQuery} HTTP/1.1`, `Host: ${hostHeader}`, "User-Agent: Lanyard-ACME-validation (RFC 8555 8.3)", "Accept: */*", "Connection: close", "", ""].join("\r\n");
  return new TextEncoder().encode(head);
}

/** The token is base64url (RFC 8555 §8.1): nothing that could break out of a request line. */
const CHALLENGE_TOKEN = /^[A-Za-z0-9_-]{1,256}$/;

export interface Http01Options {
  identifier: string;
  token: string;
  keyAuthorization: string;
  /** Development only (validate.ts decides): every plain-http connection goes here instead. */
  target: { host: string; port: number } | null;
  /** When `dns_resolver` is set, a host name is resolved through it (Vault uses it for every ACME lookup). */
  resolver: Resolver | null;
  /** What may be dialled (validate-net.ts dialPolicy): a refused host fails before any connection. */
  policy: DialPolicy;
}

/** Refuses `host` (a name or an address about to be dialled) when the policy says so: the identifier itself at the first hop, a redirect's target after. */
function checkDial(policy: DialPolicy, host: string, hop: number): void {
  const why = policy(host);
  if (why === null) return;
  if (hop === 0) throw new ValidationFailure("rejectedIdentifier", `http-01: ${why}; validation does not connect to it`);
  throw new ValidationFailure("connection", `http-01: redirect refused: ${why}`);
}

/** The next URL of a redirect, if Lanyard follows it (exported for the unit tests). */
export function redirectTarget(location: string, from: URL, devTarget: boolean): URL {
  if (location.length > MAX_REDIRECT_URL) throw new ValidationFailure("connection", `http-01: redirect URL longer than ${MAX_REDIRECT_URL} characters`);
  let next: URL;
  try {
    next = new URL(location, from);
  } catch {
    throw new ValidationFailure("connection", `http-01: invalid redirect location from ${from.href}`);
  }
  if (next.protocol !== "http:" && next.protocol !== "https:") throw new ValidationFailure("connection", `http-01: redirect to unsupported scheme ${next.protocol}`);
  if (next.username !== "" || next.password !== "") throw new ValidationFailure("connection", "http-01: redirect URL with credentials refused");
  const port = next.port === "" ? (next.protocol === "https:" ? 443 : 80) : Number(next.port);
  const allowed = next.protocol === "https:" ? port === 443 : port === 80 || devTarget;
  if (!allowed) throw new ValidationFailure("connection", `http-01: redirect to ${next.protocol}//…:${port} refused (only port 80 for http, 443 for https)`);
  return next;
}

/** The fetch() fallback of one hop (see the top of this file): redirects are not followed by fetch, the loop does. */
async function fetchHop(deps: NetDeps, url: URL, connectError: ValidationFailure): Promise<HttpResponse> {
  const run = async (): Promise<HttpResponse> => {
    let res: Response;
    try {
      res = await deps.fetch(url.href, {
        method: "GET",
        redirect: "manual",
        headers: { accept: "*/*", "user-agent": "Lanyard-ACME-validation (RFC 8555 8.3)" },
        signal: AbortSignal.timeout(Math.max(1, deps.deadline - Date.now())),
      });
    } catch (e) {
      throw new ValidationFailure("connection", `${connectError.message}; fetch() failed too: ${errorText(e)}`);
    }
    const body = await readCapped(res.body, MAX_CHALLENGE_BODY);
    if (body === null) throw new ValidationFailure("incorrectResponse", `http-01: response too large (more than ${MAX_CHALLENGE_BODY} bytes) from ${url.href}`);
    const headers: [string, string][] = [];
    res.headers.forEach((v, k) => headers.push([k.toLowerCase(), v]));
    return { status: res.status, headers, body };
  };
  return withDeadline(run(), deps.deadline, `http-01: ${url.href}`);
}

/** Runs http-01; a failure throws ValidationFailure (validate.ts turns it into the problem). */
export async function validateHttp01(deps: NetDeps, o: Http01Options): Promise<ValidationResult> {
  if (!CHALLENGE_TOKEN.test(o.token)) throw new ValidationFailure("malformed", "http-01: the challenge token is not base64url");
  if (o.identifier.startsWith("*.")) throw new ValidationFailure("malformed", "http-01: not offered for wildcard identifiers (RFC 8555 §7.1.3)");
  if (!isIpIdentifier(o.identifier) && !isDnsName(o.identifier)) throw new ValidationFailure("malformed", `http-01: "${o.identifier}" is neither a DNS name nor an IP address`);
  const host = isIpv6(o.identifier) ? `[${o.identifier}]` : o.identifier.replace(/\.$/, "");
  let url = new URL(`http://${host}/.well-known/acme-challenge/${o.token}`);
  for (let hop = 0; ; hop++) {
    const tls = url.protocol === "https:";
    const port = url.port === "" ? (tls ? 443 : 80) : Number(url.port);
    const hostname = url.hostname.replace(/^\[|\]$/g, "");
    let address: string;
    let byName = false;
    if (!tls && o.target) address = hostPort(o.target.host, o.target.port);
    else if (!tls && o.resolver && !isIpIdentifier(hostname)) {
      checkDial(o.policy, hostname, hop);
      const resolved = await lookupAddress(deps, o.resolver, hostname);
      checkDial(o.policy, resolved, hop);
      address = hostPort(resolved, port);
    } else {
      checkDial(o.policy, hostname, hop);
      address = hostPort(hostname, port);
      byName = !isIpIdentifier(hostname);
    }
    const where = url.href;
    let response: HttpResponse;
    try {
      response = await exchange(deps, address, tls, buildHttpRequest(url.host, `${url.pathname}${url.search}`), `http-01: ${where}`, "connection", (received, eof): ReadStep<HttpResponse> => {
        const p = parseHttpResponse(received, eof);
        if (p.state === "more") return { done: false };
        if (p.state === "error") throw new ValidationFailure(p.tooLarge ? "incorrectResponse" : "connection", p.tooLarge ? `http-01: response too large (more than ${MAX_CHALLENGE_BODY} bytes) from ${where}` : `http-01: ${where}: ${p.message}`);
        return { done: true, value: p.response };
      });
    } catch (e) {
      if (!(e instanceof ValidationFailure && e.connectFailed && byName)) throw e;
      response = await fetchHop(deps, url, e);
    }
    const location = headerValues(response, "location")[0];
    if (REDIRECT_STATUSES.has(response.status) && location !== undefined) {
      if (hop + 1 >= MAX_REDIRECTS) throw new ValidationFailure("connection", "http-01: too many redirects");
      url = redirectTarget(location, url, o.target !== null);
      continue;
    }
    const text = new TextDecoder().decode(response.body).trim();
    if (text === o.keyAuthorization) return { ok: true };
    throw new ValidationFailure("incorrectResponse", `http-01: the response from ${where} (HTTP ${response.status}, ${response.body.length} bytes) is not the key authorization`);
  }
}
