/**
 * The audit trail's shared types: the device row every part reads, the entry in Vault's JSON
 * audit format (https://developer.hashicorp.com/vault/docs/audit; OpenBao
 * internal/audit/format.go), and the Queue message that carries entries from the request path
 * (src/audit/enqueue.ts) to the delivery side (src/audit/delivery/).
 *
 * Contract with the delivery side (the consumer of queue `lanyard-audit`, binding AUDIT_QUEUE):
 *
 * - One message = one device's entries, as text (src/audit/message.ts: a header line naming the
 *   device and indexing the entries, the `auth` and `request` members they share, each once, then
 *   the entries' lines without them), produced by `enqueueEntries`.
 *   Only `http` and `r2` devices get messages; `stdout` entries are written to the Worker's log
 *   at enqueue time and never queued.
 * - `entries` are final: already HMAC'd with that device's salt (or raw when `log_raw`), ready to
 *   be written one JSON line each (NDJSON), in the array's order.
 * - Each entry once per device: the request entry is queued BEFORE the work (durability), the
 *   response entry after it, each in whichever message its flush built (src/audit/batcher.ts
 *   packs the entries of many requests into one message per device). The delivery side keeps
 *   a device's entries in order (src/audit/delivery/consumer.ts: in order per device, a message
 *   held behind an older one whose delivery failed), so a collector sees a request's `request`
 *   entry before its `response` entry; entries are re-sent only after a failed delivery, with the
 *   same `id`.
 *   Requests refused before any work (403, 400, 404…) queue both entries in one flush.
 * - `device.id` names the device row (random, never reused). The consumer reads the delivery
 *   target (address, unsealed headers, prefix) with `deliveryTarget(env, device.id)` from
 *   src/audit/audit-store.ts; null means the device was disabled since: ack and drop.
 * - Messages stay under `MAX_AUDIT_MESSAGE_BYTES` (the Queue's limit is 128 KB); an entry that
 *   would not fit alone keeps its envelope but has its `data` replaced (see enqueue.ts).
 */

import { ApiError } from "../core/errors";

export const AUDIT_QUEUE_NAME = "lanyard-audit";

/** Serialized size ceiling of one queue message (Cloudflare Queues: 128 KB per message). */
export const MAX_AUDIT_MESSAGE_BYTES = 120_000;

export type AuditDeviceType = "http" | "r2" | "stdout";
export const AUDIT_DEVICE_TYPES: readonly AuditDeviceType[] = ["http", "r2", "stdout"];

/**
 * An enabled audit device as the request path sees it (cached per isolate, see audit-store.ts).
 * Never returned to clients as is: `salt` is secret and `options` never holds header values.
 */
export interface AuditDevice {
  /** Random id of this enablement; queue messages name it. A re-enabled path gets a new id. */
  id: string;
  /** Mount-style path with a trailing slash ("collector/"), as Vault lists devices. */
  path: string;
  type: AuditDeviceType;
  description: string;
  /** The options as read back (Vault: a string map; `headers` values are asterisks). */
  options: Record<string, string | Record<string, string>>;
  /** Vault's `local` (replication only): stored and listed, no effect in Lanyard. */
  local: boolean;
  /** The HMAC key (Vault: a random UUID per device); unsealed in memory only. */
  salt: string;
  /** Parsed flags of `options`. */
  logRaw: boolean;
  hmacAccessor: boolean;
  elideListResponses: boolean;
}

/** What the delivery side needs to send a device's entries (audit-store.ts `deliveryTarget`). */
export interface AuditDeliveryTarget {
  id: string;
  path: string;
  type: "http" | "r2";
  /** http: the collector URL (`options.address`). */
  address?: string;
  /** http: extra request headers, unsealed (e.g. Authorization). Never logged. */
  headers?: Record<string, string>;
  /** r2: the object key prefix (default "audit/"). */
  prefix?: string;
  /** Option `compress`: gzip the NDJSON (http `Content-Encoding: gzip`; r2 objects). */
  compress?: boolean;
}

/** `auth` of an entry (and `response.auth`), Vault's field names. */
export interface AuditAuth {
  client_token?: string;
  accessor?: string;
  display_name?: string;
  policies?: string[];
  token_policies?: string[];
  metadata?: Record<string, string> | null;
  entity_id?: string;
  token_type?: string;
  token_ttl?: number;
  token_issue_time?: string;
  num_uses?: number;
  remaining_uses?: number;
  policy_results?: { allowed: boolean };
}

export interface AuditRequest {
  id: string;
  operation: string;
  mount_point?: string;
  mount_type?: string;
  mount_accessor?: string;
  client_token?: string;
  client_token_accessor?: string;
  namespace: { id: string; path: string };
  path: string;
  data?: Record<string, unknown> | null;
  remote_address?: string;
}

export interface AuditResponse {
  auth?: AuditAuth;
  mount_point?: string;
  mount_type?: string;
  mount_accessor?: string;
  secret?: { lease_id: string };
  data?: Record<string, unknown> | null;
  warnings?: string[];
  /** Lanyard addition: the HTTP status of the answer. */
  status_code?: number;
}

/**
 * One audit entry, one JSON object per line, Vault's field names (every field omitted when
 * empty; OpenBao internal/audit/format.go). `id` is Lanyard's addition: `<request id>:request`
 * or `<request id>:response`, stable across re-sends so a sink can drop duplicates.
 */
export interface AuditEntry {
  id: string;
  /** RFC3339 (UTC, millisecond precision). */
  time: string;
  type: "request" | "response";
  auth?: AuditAuth;
  request: AuditRequest;
  response?: AuditResponse;
  /** The error text of a refused or failed request (Vault: not HMAC'd). */
  error?: string;
}

/**
 * Thrown when no enabled device could record an entry: the request must not go on. It is the
 * answer itself (503, its message), rendered as any ApiError (src/core/errors.ts). Vault refuses
 * too, with 500 `internal error`.
 */
export class AuditUnavailableError extends ApiError {
  constructor(cause?: unknown) {
    super(503, "audit: no device could record this request", { cause });
    this.name = "AuditUnavailableError";
  }
}
