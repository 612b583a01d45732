/**
 * The one error the delivery sinks (./http.ts, ./r2.ts) throw: the sink could not take a batch,
 * and the consumer (./consumer.ts) retries the device's messages with backoff. Its message names
 * the failure (a status, a timeout), never an address, a header or an entry.
 */
export class AuditDeliveryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AuditDeliveryError";
  }
}
