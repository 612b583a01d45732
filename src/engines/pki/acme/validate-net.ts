/**
 * What the ACME challenge validators (validate-http.ts, validate-dns.ts) share: the problem
 * documents they answer with (RFC 8555 §6.7 types), the socket they talk through, deadlines, and
 * the checks on an identifier before it goes into a Host header or a DNS question.
 *
 * The socket is an interface, not `connect()` itself: the Worker passes `cloudflare:sockets`'
 * connect() (validate.ts, the only importer of that module), the unit tests pass node:net. So
 * everything here and in the validators runs, and is tested, in plain Node.
 */
import { classifyIp, describeIpKind, formatIp, isIp, isIpv6, parseHostLiteral, parseIp } from "../../../core/ip";

/** An RFC 8555 §6.7 problem: `type` is the full `urn:ietf:params:acme:error:*` URN. */
export interface AcmeProblem {
  type: string;
  detail: string;
}

export type ValidationResult = { ok: true } | { ok: false; problem: AcmeProblem };

/** The RFC 8555 §6.7 error types a validation can end with. */
export type ProblemKind = "connection" | "dns" | "incorrectResponse" | "malformed" | "unauthorized" | "rejectedIdentifier" | "serverInternal";

export const ACME_ERROR_PREFIX = "urn:ietf:params:acme:error:";

export function problem(kind: ProblemKind, detail: string): { ok: false; problem: AcmeProblem } {
  return { ok: false, problem: { type: `${ACME_ERROR_PREFIX}${kind}`, detail } };
}

/** A failure inside a validator; validate.ts turns it into the problem document. */
export class ValidationFailure extends Error {
  constructor(
    readonly kind: ProblemKind,
    detail: string,
    /** The connection itself could not be made (nothing was sent). */
    readonly connectFailed = false,
  ) {
    super(detail);
  }
}

/** One TCP connection: the shape of `cloudflare:sockets`' Socket that the validators use. */
export interface ByteSocket {
  readable: ReadableStream<Uint8Array>;
  writable: WritableStream<Uint8Array>;
  /** Resolves once connected, rejects when the connection cannot be made. */
  opened: Promise<unknown>;
  close(): Promise<void> | void;
}

/** Opens a TCP connection to `host:port` (IPv6 bracketed), TLS on when `tls`. Never throws: failures surface on `opened` or the streams. */
export type Dial = (address: string, tls: boolean) => ByteSocket;

/** What a validation needs from the platform, and its deadline (epoch milliseconds). */
export interface NetDeps {
  dial: Dial;
  fetch: typeof fetch;
  deadline: number;
}

/** Rejects with a `connection` (or `kind`) failure when `deadline` passes first. */
export async function withDeadline<T>(p: Promise<T>, deadline: number, what: string, kind: ProblemKind = "connection"): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ValidationFailure(kind, `${what}: timed out`)), Math.max(0, deadline - Date.now()));
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** What a reader step says about the bytes received so far. */
export type ReadStep<T> = { done: false } | { done: true; value: T };

/**
 * Writes `request` to a new connection, then reads until `step` is satisfied (it is called with
 * everything received so far, and once more with `eof` true when the peer closes). The socket is
 * closed afterwards whatever happened; everything runs before `deadline`.
 */
export async function exchange<T>(
  deps: NetDeps,
  address: string,
  tls: boolean,
  request: Uint8Array,
  what: string,
  kind: ProblemKind,
  step: (received: Uint8Array, eof: boolean) => ReadStep<T>,
): Promise<T> {
  let sock: ByteSocket;
  try {
    sock = deps.dial(address, tls);
  } catch (e) {
    throw new ValidationFailure(kind, `${what}: cannot connect to ${address}: ${errorText(e)}`, true);
  }
  const run = async (): Promise<T> => {
    try {
      await sock.opened;
    } catch (e) {
      throw new ValidationFailure(kind, `${what}: cannot connect to ${address}: ${errorText(e)}`, true);
    }
    const writer = sock.writable.getWriter();
    try {
      await writer.write(request);
    } catch (e) {
      throw new ValidationFailure(kind, `${what}: writing to ${address} failed: ${errorText(e)}`);
    } finally {
      writer.releaseLock();
    }
    const reader = sock.readable.getReader();
    let received: Uint8Array = new Uint8Array(0);
    try {
      for (;;) {
        let chunk: ReadableStreamReadResult<Uint8Array>;
        try {
          chunk = await reader.read();
        } catch (e) {
          throw new ValidationFailure(kind, `${what}: reading from ${address} failed: ${errorText(e)}`);
        }
        if (chunk.done) {
          const last = step(received, true);
          if (last.done) return last.value;
          throw new ValidationFailure(kind, `${what}: ${address} closed the connection before a complete response`);
        }
        received = append(received, chunk.value);
        const r = step(received, false);
        if (r.done) return r.value;
      }
    } finally {
      reader.releaseLock();
    }
  };
  try {
    return await withDeadline(run(), deps.deadline, `${what}: ${address}`, kind);
  } finally {
    try {
      await sock.close();
    } catch {
      // Already closed or never opened: nothing to release.
    }
  }
}

function append(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/** An error's message without a stack; never more than one line. */
export function errorText(e: unknown): string {
  const s = e instanceof Error ? e.message : String(e);
  return s.split("\n")[0]?.slice(0, 200) ?? "";
}

/** An identifier is an IP address (RFC 8738) rather than a DNS name: src/core/ip.ts's rules. */
export function isIpIdentifier(s: string): boolean {
  return isIp(s);
}

const LABEL = /^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/;

/**
 * A DNS name safe for a Host header and a DNS question: LDH labels (underscore allowed, as in
 * `_acme-challenge`) of at most 63 octets, 253 in all, an optional final dot.
 */
export function isDnsName(s: string): boolean {
  const name = s.endsWith(".") ? s.slice(0, -1) : s;
  if (name.length === 0 || name.length > 253) return false;
  const labels = name.split(".");
  // An all-numeric last label is no host name (RFC 3696 §2): "010.0.0.1" or "1.2.3" would be
  // read as an address by some resolvers, so it is neither a name nor (src/core/ip.ts) an address.
  if (/^\d+$/.test(labels[labels.length - 1] ?? "")) return false;
  return labels.every((l) => LABEL.test(l));
}

/** `host:port`, IPv6 bracketed (the form connect() and a Host header take). */
export function hostPort(host: string, port: number): string {
  return `${isIpv6(host) ? `[${host}]` : host}:${port}`;
}

/** Splits `host:port` (IPv6 as `[addr]:port`); null when it is not that form. */
export function splitHostPort(s: string): { host: string; port: number } | null {
  const m = /^\[([0-9a-fA-F:.]+)\]:(\d{1,5})$/.exec(s) ?? /^([^:[\]\s/]+):(\d{1,5})$/.exec(s);
  if (!m) return null;
  const host = m[1] ?? "";
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return null;
  if (s.startsWith("[") ? !isIpv6(host) : !(parseIp(host)?.length === 4 || isDnsName(host))) return null;
  return { host, port };
}

/** Hosts a development switch may point at: this machine (localhost, 127.0.0.0/8, ::1). */
export { isLoopbackHost } from "../../../core/outbound-url";

/**
 * Why validation must not connect to `host` (an address literal, bracketed or not, or a name),
 * or null when it may: outside development (ENVIRONMENT other than "development" is
 * production) every address that is no public host (src/core/ip-kinds.ts: loopback, private,
 * unique local, link-local, carrier-grade NAT, unspecified, and the IPv4-mapped forms of them)
 * and the name localhost (RFC 6761 §6.3). Development validates against local fakes and allows
 * all. A function of the environment, so that tests can ask production's answer.
 */
export type DialPolicy = (host: string) => string | null;

export function dialPolicy(env: { ENVIRONMENT?: string }): DialPolicy {
  if (env.ENVIRONMENT === "development") return () => null;
  return (host) => {
    const lower = host.toLowerCase();
    const name = lower.endsWith(".") ? lower.slice(0, -1) : lower;
    if (name === "localhost" || name.endsWith(".localhost")) return `${name} is a loopback name (RFC 6761 §6.3), not a public address`;
    const ip = parseHostLiteral(name) ?? parseIp(name);
    if (ip === null) return null;
    const kind = classifyIp(ip);
    return kind === null ? null : `${formatIp(ip)} is not a public address (${describeIpKind(kind)})`;
  };
}
