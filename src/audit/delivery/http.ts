/**
 * The `http` audit sink (docs/audit.md): one POST of a device's entries to its
 * collector. Body: NDJSON (`Content-Type: application/x-ndjson`, one entry a line, in order);
 * gzip'd with `Content-Encoding: gzip` when the device's option `compress` is true. The device's
 * `headers` (unsealed by the core's store, e.g. Authorization) are sent as they are, but cannot
 * replace Content-Type or Content-Encoding, which describe the body.
 *
 * A 2xx answer means the collector accepted the batch. Anything else (another status, a
 * redirect, a network error, no answer within DELIVERY_TIMEOUT_MS) throws
 * AuditDeliveryError, and the consumer retries the message with backoff (./consumer.ts).
 * Redirects are not followed: a 3xx would otherwise carry the device's Authorization header to
 * a URL nobody enabled. Error texts name the status or the failure kind, never the address (it
 * may hold credentials in its userinfo) nor a header value.
 */
import type { AuditDeliveryTarget } from "../types";
import { NDJSON_CONTENT_TYPE, encodeBody } from "./ndjson";
import { AuditDeliveryError } from "./errors";

/** How long a collector has to answer one POST (entries reach a healthy collector within 10 s). */
export const DELIVERY_TIMEOUT_MS = 10_000;

/** Headers a device may not set: they describe the body this module builds. */
const RESERVED = new Set(["content-type", "content-encoding", "content-length", "transfer-encoding"]);

/** POSTs the entries (NDJSON text) to the device's collector; resolves on 2xx, throws AuditDeliveryError otherwise. */
export async function postNdjson(target: AuditDeliveryTarget, ndjson: string): Promise<void> {
  if (!target.address) throw new AuditDeliveryError("the device has no address");
  const compress = target.compress === true;
  const headers = new Headers();
  for (const [name, value] of Object.entries(target.headers ?? {})) {
    if (!RESERVED.has(name.toLowerCase())) headers.set(name, value);
  }
  headers.set("content-type", NDJSON_CONTENT_TYPE);
  if (compress) headers.set("content-encoding", "gzip");
  const body = await encodeBody(ndjson, compress);
  let res: Response;
  try {
    res = await fetch(target.address, { method: "POST", headers, body, redirect: "manual", signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS) });
  } catch (e) {
    const timedOut = e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError");
    throw new AuditDeliveryError(timedOut ? `the collector did not answer within ${DELIVERY_TIMEOUT_MS / 1000} s` : "the collector could not be reached");
  }
  // The answer's body is not used; release the connection either way.
  await res.body?.cancel().catch(() => undefined);
  if (res.status < 200 || res.status > 299) throw new AuditDeliveryError(`the collector answered ${res.status}`);
}
