/**
 * dns-01 (RFC 8555 §8.4) and the lookups behind it, through the mount's `config/acme`
 * `dns_resolver`:
 * - Vault's form `host:port`: DNS over TCP (RFC 1035 §4.2.2) through the socket the Worker
 *   opens with connect(); Vault takes an IP there and speaks UDP, a Worker has TCP only;
 * - an `https://` URL: DNS over HTTPS (RFC 8484 §4.1, POST `application/dns-message`, id 0);
 * - empty: Cloudflare's public DoH resolver. Vault uses the system resolver; a Worker has none.
 * Plain `http://` DoH is for development only (ENVIRONMENT=development, loopback host).
 *
 * Vault uses the configured resolver for every ACME lookup, also the A/AAAA of an http-01 host
 * (OpenBao builtin/logical/pki/acme_challenges.go); `lookupAddress` is that lookup for validate-http.ts.
 */
import { readCapped } from "../../../core/body";
import { bytesToBase64Url, sha256 } from "../../../core/encoding";
import { DNS_TYPE, DnsWireError, answersFor, decodeAddressRdata, decodeDnsMessage, decodeTxtRdata, encodeDnsQuery, frameTcp, rcodeName, unframeTcp, type DnsMessage } from "./validate-dns-wire";
import { ValidationFailure, errorText, exchange, hostPort, isDnsName, isIpIdentifier, isLoopbackHost, splitHostPort, withDeadline, type NetDeps, type ValidationResult } from "./validate-net";

/** Used when `dns_resolver` is empty. */
export const DEFAULT_DOH_RESOLVER = "https://cloudflare-dns.com/dns-query";

/** A DoH answer is one DNS message; RFC 8484 §6 bounds it to 65535 octets. */
const MAX_DNS_MESSAGE = 65535;

export type Resolver = { kind: "tcp"; host: string; port: number; label: string } | { kind: "doh"; url: string; label: string };

interface EnvLike {
  ENVIRONMENT?: string;
}

/**
 * Why `raw` cannot be used as `dns_resolver` in this environment, or null when it can. For
 * config/acme to check at write time as well; validation checks again, so changing
 * ENVIRONMENT takes effect at once.
 */
export function dnsResolverProblem(env: EnvLike, raw: string): string | null {
  const value = raw.trim();
  if (value === "") return null;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      return `dns_resolver: "${value}" is not a valid URL`;
    }
    if (url.username !== "" || url.password !== "") return "dns_resolver: credentials in the URL are not supported";
    if (url.protocol === "https:") return null;
    if (url.protocol === "http:") {
      if (env.ENVIRONMENT === "development" && isLoopbackHost(url.hostname)) return null;
      return "dns_resolver: a DNS-over-HTTPS resolver must be an https:// URL (plain http:// only to a loopback host with ENVIRONMENT=development)";
    }
    return `dns_resolver: unsupported scheme "${url.protocol.replace(/:$/, "")}"; use host:port (DNS over TCP) or an https:// DNS-over-HTTPS URL`;
  }
  if (splitHostPort(value) === null) return `dns_resolver: "${value}" is neither host:port (IPv6 as [addr]:port) nor an https:// DNS-over-HTTPS URL`;
  return null;
}

/** The resolver `raw` names (empty: the default DoH resolver); a refused value is a `dns` failure. */
export function resolverFor(env: EnvLike, raw: string): Resolver {
  const value = raw.trim();
  const why = dnsResolverProblem(env, value);
  if (why !== null) throw new ValidationFailure("dns", why);
  if (value === "") return { kind: "doh", url: DEFAULT_DOH_RESOLVER, label: DEFAULT_DOH_RESOLVER };
  if (/^https?:\/\//i.test(value)) return { kind: "doh", url: value, label: new URL(value).origin };
  const hp = splitHostPort(value);
  if (!hp) throw new ValidationFailure("dns", `dns_resolver: "${value}" is not host:port`);
  return { kind: "tcp", host: hp.host, port: hp.port, label: value };
}

async function queryTcp(deps: NetDeps, r: Extract<Resolver, { kind: "tcp" }>, name: string, type: number): Promise<Uint8Array> {
  const id = crypto.getRandomValues(new Uint16Array(1))[0] ?? 0;
  const reply = await exchange<Uint8Array>(deps, hostPort(r.host, r.port), false, frameTcp(encodeDnsQuery(id, name, type)), "dns", "dns", (received) => {
    const msg = unframeTcp(received);
    return msg === null ? { done: false } : { done: true, value: msg };
  });
  checkId(reply, id, r.label);
  return reply;
}

async function queryDoh(deps: NetDeps, r: Extract<Resolver, { kind: "doh" }>, name: string, type: number): Promise<Uint8Array> {
  // RFC 8484 §4.1: id 0, so that caches can answer identical queries.
  const body = encodeDnsQuery(0, name, type);
  const run = async (): Promise<Uint8Array> => {
    let res: Response;
    try {
      res = await deps.fetch(r.url, {
        method: "POST",
        headers: { "content-type": "application/dns-message", accept: "application/dns-message" },
        body,
        redirect: "manual",
        signal: AbortSignal.timeout(Math.max(1, deps.deadline - Date.now())),
      });
    } catch (e) {
      throw new ValidationFailure("dns", `dns: ${r.label}: request failed: ${errorText(e)}`);
    }
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new ValidationFailure("dns", `dns: ${r.label} answered HTTP ${res.status}`);
    }
    const ct = (res.headers.get("content-type") ?? "").split(";")[0]?.trim().toLowerCase();
    if (ct !== "application/dns-message") {
      await res.body?.cancel();
      throw new ValidationFailure("dns", `dns: ${r.label} answered content type "${ct}", not application/dns-message`);
    }
    return readDnsAnswer(res, MAX_DNS_MESSAGE, r.label);
  };
  const reply = await withDeadline(run(), deps.deadline, `dns: ${r.label}`, "dns");
  checkId(reply, 0, r.label);
  return reply;
}

async function readDnsAnswer(res: Response, max: number, label: string): Promise<Uint8Array> {
  const body = await readCapped(res.body, max);
  if (body === null) throw new ValidationFailure("dns", `dns: ${label}: answer larger than ${max} octets`);
  return body;
}

function checkId(reply: Uint8Array, id: number, label: string): void {
  if (reply.length < 2 || (((reply[0] ?? 0) << 8) | (reply[1] ?? 0)) !== id) throw new ValidationFailure("dns", `dns: ${label}: answer does not match the query id`);
}

/** Asks `r` one question; the decoded answer, whatever its rcode. */
export async function queryResolver(deps: NetDeps, r: Resolver, name: string, type: number): Promise<DnsMessage> {
  const raw = r.kind === "tcp" ? await queryTcp(deps, r, name, type) : await queryDoh(deps, r, name, type);
  let msg: DnsMessage;
  try {
    msg = decodeDnsMessage(raw);
  } catch (e) {
    if (e instanceof DnsWireError) throw new ValidationFailure("dns", `dns: ${r.label}: malformed answer: ${e.message}`);
    throw e;
  }
  if (!msg.response) throw new ValidationFailure("dns", `dns: ${r.label}: answer is not a response`);
  if (msg.truncated) throw new ValidationFailure("dns", `dns: ${r.label}: answer is truncated`);
  return msg;
}

const TYPE_NAMES: Record<number, string> = { [DNS_TYPE.A]: "A", [DNS_TYPE.AAAA]: "AAAA", [DNS_TYPE.TXT]: "TXT" };

/** The records of `type` at `name` (through CNAMEs); empty on NXDOMAIN. Other rcodes are `dns` failures. */
async function lookup(deps: NetDeps, r: Resolver, name: string, type: number): Promise<Uint8Array[]> {
  const msg = await queryResolver(deps, r, name, type);
  if (msg.rcode === 3) return [];
  if (msg.rcode !== 0) throw new ValidationFailure("dns", `dns: ${rcodeName(msg.rcode)} looking up ${TYPE_NAMES[type] ?? type} for ${name} at ${r.label}`);
  return answersFor(msg, name, type).map((a) => a.rdata);
}

/** The TXT values at `name`, each record's strings joined. */
export async function lookupTxt(deps: NetDeps, r: Resolver, name: string): Promise<string[]> {
  const rdatas = await lookup(deps, r, name, DNS_TYPE.TXT);
  try {
    return rdatas.map(decodeTxtRdata);
  } catch (e) {
    throw new ValidationFailure("dns", `dns: ${r.label}: malformed TXT record for ${name}: ${errorText(e)}`);
  }
}

/** One address of `name`: its first A record, else its first AAAA record. */
export async function lookupAddress(deps: NetDeps, r: Resolver, name: string): Promise<string> {
  for (const type of [DNS_TYPE.A, DNS_TYPE.AAAA]) {
    const rdatas = await lookup(deps, r, name, type);
    for (const rd of rdatas) {
      try {
        return decodeAddressRdata(type, rd);
      } catch {
        // A malformed address record: try the next one.
      }
    }
  }
  throw new ValidationFailure("dns", `dns: no A or AAAA record for ${name} at ${r.label}`);
}

/** The TXT value a dns-01 challenge expects: base64url(SHA-256(key authorization)) (RFC 8555 §8.4). */
export async function dns01Digest(keyAuthorization: string): Promise<string> {
  return bytesToBase64Url(await sha256(keyAuthorization));
}

/**
 * dns-01: any TXT value at `_acme-challenge.<domain>` equal to the digest passes; a wildcard
 * identifier is validated at its base domain (RFC 8555 §8.4). Not for IP identifiers (RFC 8738 §7).
 */
export async function validateDns01(deps: NetDeps, r: Resolver, identifier: string, keyAuthorization: string): Promise<ValidationResult> {
  if (isIpIdentifier(identifier)) throw new ValidationFailure("malformed", "dns-01: not offered for IP identifiers (RFC 8738 §7)");
  const base = identifier.startsWith("*.") ? identifier.slice(2) : identifier;
  if (!isDnsName(base)) throw new ValidationFailure("malformed", `dns-01: "${identifier}" is not a DNS name`);
  const name = `_acme-challenge.${base.replace(/\.$/, "")}`;
  const expected = await dns01Digest(keyAuthorization);
  const values = await lookupTxt(deps, r, name);
  if (values.some((v) => v.trim() === expected)) return { ok: true };
  if (values.length === 0) throw new ValidationFailure("incorrectResponse", `dns-01: no TXT record for ${name} at ${r.label}`);
  throw new ValidationFailure("incorrectResponse", `dns-01: challenge failed against ${values.length} records for ${name}`);
}
