/**
 * The entry point of ACME challenge validation for the ACME server (RFC 8555 §8): http-01 and
 * dns-01, answering `{ ok: true }` or an RFC 8555 §6.7 problem. This file only binds the Workers
 * runtime: the TCP socket of `cloudflare:sockets` (a Worker's fetch cannot choose the Host header
 * nor speak DNS over TCP) and the global fetch (DNS over HTTPS). What it does is in
 * validate-challenge.ts, validate-http.ts, validate-dns.ts, validate-dns-wire.ts and
 * validate-net.ts, which run in plain Node too (test/unit/acme-validate.test.ts).
 * docs/pki-acme.md describes the design.
 */
import { connect } from "cloudflare:sockets";
import { runChallengeValidation } from "./validate-challenge";
import type { AcmeProblem, ByteSocket } from "./validate-net";

export type { AcmeProblem } from "./validate-net";

function dial(address: string, tls: boolean): ByteSocket {
  return connect(address, { secureTransport: tls ? "on" : "off", allowHalfOpen: false });
}

/**
 * Validates one challenge. `keyAuthorization` is `<token>.<base64url JWK thumbprint>`; `identifier`
 * the authorization's identifier value (a DNS name, `*.name` for dns-01, or an IP address for
 * http-01). Never throws.
 */
export function validateChallenge(
  env: Env,
  cfg: { dnsResolver: string },
  type: "http-01" | "dns-01",
  identifier: string,
  token: string,
  keyAuthorization: string,
): Promise<{ ok: true } | { ok: false; problem: AcmeProblem }> {
  return runChallengeValidation({ dial, fetch: (input, init) => fetch(input, init) }, env, cfg, type, identifier, token, keyAuthorization);
}
