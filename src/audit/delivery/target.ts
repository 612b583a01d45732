/**
 * What the delivery sinks (./http.ts, ./r2.ts) share: the target they write to and the one error
 * they throw. The target is the core's `AuditDeliveryTarget` (../types.ts, read by
 * `deliveryTarget` in ../audit-store.ts), with the device option `compress` (gzip the body).
 */
import type { AuditDeliveryTarget } from "../types";

export type DeliveryTarget = AuditDeliveryTarget & {
  /** Option `compress` ("true"): gzip the NDJSON (http: `Content-Encoding: gzip`; r2: `.log.gz`). */
  compress?: boolean;
};

/** A sink could not take a batch: the consumer retries the messages with backoff. */
export class AuditDeliveryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AuditDeliveryError";
  }
}
