/**
 * The dispatcher's audit hook, Lanyard's take on Vault's audit broker (OpenBao
 * internal/vault/audit_broker.go): one `AuditTrail` per request under /v1/ follows it through
 * src/app/dispatch.ts, which calls it at its named steps.
 *
 * - Devices: the isolate's cached list when fresh; else the dispatcher adds the list's read to
 *   the request's first D1 batch (`deviceRead`, then `absorb` with its rows), so auditing never
 *   adds a D1 round trip. With no device enabled every step below returns at once.
 * - Before the work (`beforeWork`, just before the handler, after every check passed): the
 *   `request` entry is handed over and awaited (src/audit/enqueue.ts): durable in the Queue, or
 *   written to the log for stdout devices. If no device could record it, the handler does not
 *   run: 503 `audit: no device could record this request` (AuditUnavailableError; Vault refuses
 *   too, it says 500 `internal error`).
 *   A read that changes nothing (operation `read` or `list`, not public, the route not marked
 *   `readChangesState`) defers it instead: the request entry is handed over with the response
 *   entry, first, in one hand-off before the answer leaves; if that fails the answer is the same
 *   503 and nothing of the read is disclosed (docs/audit.md "Reads travel in one hand-off").
 * - After the work (`answered`): the `response` entry (data, warnings, auth, status), built from
 *   the reply the handler gave, not from the serialized answer, is handed over before the answer
 *   leaves, once per device: the delivery side keeps each device's entries in order
 *   (src/audit/delivery/consumer.ts), so a collector never sees a response before its request.
 *   Failure: 503, although the work is done (as
 *   Vault, whose response-log failure is an error after the fact).
 * - Refused before the work (`failed`: 400/403/404/405/413…, or a handler error): the request
 *   and response entries, the latter with the error as the client is answered
 *   (src/core/envelope.ts `errorAnswer`), in one message. A failure to log a request refused
 *   before the work is only logged and the original error stands (Vault); a failure after the
 *   work began turns the answer into the 503.
 * Entries are HMAC'd per device in src/audit/hmac.ts; nothing here writes a secret anywhere.
 */
import { absorbDeviceRows, cachedDevices, deviceListQuery, lastKnownDevices, loadDevices } from "../audit/audit-store";
import { devicesFor } from "../audit/device-filter";
import type { AuditFilterFields } from "../audit/filter";
import { auditedRequestBegins } from "../audit/linger";
import { enqueueEntries } from "../audit/enqueue";
import { AuditUnavailableError, type AuditAuth, type AuditDevice, type AuditEntry, type AuditRequest, type AuditResponse } from "../audit/types";
import { loadConfig } from "../core/config";
import type { Db } from "../core/db/client";
import { bytesToBase64 } from "../core/encoding";
import { errorAnswer } from "../core/envelope";
import type { MountRow, NamespaceRef } from "../core/mount-store";
import type { AuthBlock, JsonReply, Req } from "../core/route";
import type { TokenEntry } from "../core/caller";
import { namespaceHeader, type Resolved } from "./resolve";

/** What the dispatcher has learnt of the request so far (for entries of refused requests). */
interface AuditKnown {
  ns?: NamespaceRef | null;
  path?: string;
  token?: TokenEntry | null;
  presented?: string | null;
  mount?: MountRow | null;
  mountType?: string;
  op?: string | null;
  data?: Record<string, unknown>;
  /** A raw body (ACME JWS, OCSP DER) instead of `data`: logged as Vault logs raw bodies. */
  raw?: { bytes: Uint8Array; contentType: string };
  /** A streamed body (RouteDef.streamBody: a storage snapshot): no body is logged, either way. */
  opaque?: boolean;
}

/**
 * What a request was answered: a Response a route made itself, a JSON reply for the envelope
 * (warnings merged), or null for 204 No Content.
 */
export type Answer = Response | JsonReply | null;

const RAW_TEXT = /^(text\/|application\/(json|[\w.+-]*\+json|x-pem-file|pem-certificate-chain|x-ndjson))/;
const INTERNAL_ERROR = { status: 500, messages: ["internal error"] };

export class AuditTrail {
  private devices: AuditDevice[] | undefined = cachedDevices();
  private known: AuditKnown = {};
  /** Set when the request entry is recorded: the work may start (and the response must follow). */
  private recorded = false;
  /** The devices whose filter lets this request's entries in (one verdict for both entries). */
  private writers: AuditDevice[] | null = null;
  /** The entries' `auth` and `request` parts, fixed once the work is allowed (requestEntry). */
  private parts: { auth: AuditAuth | undefined; request: AuditRequest } | null = null;
  private refusedByAudit = false;
  /** The work began with the request entry deferred (a read): it travels with the response entry. */
  private deferred = false;
  /** Counted among the isolate's audited requests in flight (src/audit/linger.ts) until settled. */
  private release: (() => void) | null = null;
  private allowed = false;
  /** When a deferred request entry's work began: its `time`. */
  private requestAt: number | null = null;

  constructor(
    private readonly cfg: { env: Env; db: Db; requestId: string; waitUntil?: (p: Promise<unknown>) => void },
    private readonly request: Request,
  ) {}

  /** The device read for the first D1 batch, or null when the isolate's copy is fresh. */
  deviceRead(db: Db): ReturnType<typeof deviceListQuery> | null {
    return this.devices === undefined ? deviceListQuery(db) : null;
  }

  /** The rows `deviceRead` returned (from the batch). */
  async absorb(rows: unknown): Promise<void> {
    this.devices = await absorbDeviceRows(loadConfig(this.cfg.env).seal, rows as Parameters<typeof absorbDeviceRows>[1]);
  }

  /** Who calls and where the request goes, once resolved; `op` as the method says. */
  knowTarget(at: Resolved, op: string | null): void {
    const k = this.known;
    k.ns = at.ns;
    k.path = at.path;
    k.token = at.found;
    k.presented = at.presented;
    k.mount = at.backend?.mount ?? null;
    k.mountType = at.backend?.mountType;
    k.op = op;
  }

  /** The route streams its bodies (a storage snapshot): log neither, only content type and status. */
  knowOpaque(): void {
    this.known.opaque = true;
  }

  /** The request's data, once read: decoded fields, or a raw body (see AuditKnown.raw). */
  knowBody(data: Record<string, unknown> | undefined, raw?: AuditKnown["raw"]): void {
    if (raw) this.known.raw = raw;
    else this.known.data = data;
  }

  private get active(): boolean {
    return this.devices !== undefined && this.devices.length > 0;
  }

  /** The request entry, recorded before the handler runs; 503 when no device could record it. */
  async beforeWork(req: Req, mountType: string, defer = false): Promise<void> {
    this.allowed = true;
    if (!this.active || !this.devices) return;
    const k = this.known;
    k.ns = req.ns;
    k.path = req.path;
    k.token = req.token;
    k.mount = req.mount;
    k.mountType = mountType;
    k.op = req.op;
    k.data = req.body;
    // Counted while its entries may still join a flush (the batcher lingers for them); a stdout
    // device's entries never reach the batcher.
    if (this.writersFor(this.requestEntry()).some((d) => d.type !== "stdout")) this.release = auditedRequestBegins();
    if (defer) {
      // Fixes its time and parts now, as they were when the work began.
      this.requestAt = Date.now();
      this.requestEntry();
      this.deferred = true;
      return;
    }
    try {
      const entry = this.requestEntry();
      await enqueueEntries(this.cfg.env, this.writersFor(entry), [entry], this.cfg.waitUntil);
      this.recorded = true;
    } catch (e) {
      this.refusedByAudit = e instanceof AuditUnavailableError;
      this.settle();
      throw e;
    }
  }

  /** No longer counted among the isolate's audited requests in flight. */
  private settle(): void {
    this.release?.();
    this.release = null;
  }

  /** The response entry, recorded before the answer leaves; 503 instead when no device could. */
  async answered(answer: Answer): Promise<void> {
    try {
      await this.recordAnswer(answer);
    } finally {
      // However it ends (a Response that cannot be read back throws): no longer in flight.
      this.settle();
    }
  }

  private async recordAnswer(answer: Answer): Promise<void> {
    if (!this.active || !this.devices || this.refusedByAudit) return;
    const status = answer === null ? 204 : answer instanceof Response ? answer.status : (answer.status ?? 200);
    const response = answer instanceof Response ? (this.known.opaque ? opaqueOf(answer) : await responseOf(answer)) : replyOf(answer, status);
    const unavailable = await this.record(this.responseEntry(response));
    if (!unavailable) return;
    // A refusal rendered as a response (RouteDef.renderError) never reached the work: its log
    // failure is only logged, as in `failed`.
    if (this.allowed) throw unavailable;
    console.error(`audit: request ${this.cfg.requestId} (refused with ${status}) could not be logged by any device`);
  }

  /** The error to throw for `err`: itself, or the 503 when the work began and could not be logged. */
  async failed(err: unknown): Promise<unknown> {
    try {
      return await this.recordFailure(err);
    } finally {
      this.settle();
    }
  }

  private async recordFailure(err: unknown): Promise<unknown> {
    if (this.refusedByAudit) return err;
    let devices = this.devices ?? lastKnownDevices();
    if (devices === undefined) {
      // Refused before the first batch (a malformed path): one read, off the hot path.
      try {
        devices = await loadDevices(this.cfg.db, loadConfig(this.cfg.env).seal);
      } catch (e) {
        console.error(`audit: request ${this.cfg.requestId} refused before the device list was read; not logged:`, e instanceof Error ? e.message : String(e));
        return err;
      }
    }
    this.devices = devices;
    if (!this.active) return err;
    const { status, messages } = errorAnswer(err) ?? INTERNAL_ERROR;
    const unavailable = await this.record(this.responseEntry({ status_code: status }, messages.join("; ")));
    if (!unavailable) return err;
    if (this.recorded || this.deferred) return unavailable;
    console.error(`audit: request ${this.cfg.requestId} (refused with ${status}) could not be logged by any device`);
    return err;
  }

  /** Hands the response entry over (with the request entry unless it was recorded before the work); the 503 to answer if no device could. */
  private async record(response: AuditEntry): Promise<AuditUnavailableError | null> {
    if (!this.devices) return null;
    // A deferred request entry is as it was when the work began (no error: it was not refused).
    const entries = this.recorded ? [response] : [this.requestEntry(this.deferred ? undefined : response.error), response];
    try {
      await enqueueEntries(this.cfg.env, this.writersFor(entries[0] ?? response), entries, this.cfg.waitUntil);
      return null;
    } catch (e) {
      if (!(e instanceof AuditUnavailableError)) throw e;
      return e;
    } finally {
      this.settle();
    }
  }

  /** The devices that write this request (their `filter`, src/audit/device-filter.ts), decided once. */
  private writersFor(entry: AuditEntry): AuditDevice[] {
    if (!this.writers) this.writers = devicesFor(this.devices ?? [], entryFields(entry));
    return this.writers;
  }

  /** The filter's fields of this request as resolved so far, as its entries will carry them. */
  filterFields(operation: string): AuditFilterFields {
    return { ...entryFields(this.requestEntry()), operation };
  }

  private auth(): AuditAuth | undefined {
    const t = this.known.token;
    if (!t) return this.allowed ? undefined : { policy_results: { allowed: false } };
    return {
      client_token: t.presented,
      accessor: t.accessor,
      display_name: t.displayName,
      policies: t.policies,
      token_policies: t.policies,
      metadata: t.meta,
      token_type: "service",
      token_ttl: t.ttl,
      token_issue_time: t.creationTime > 0 ? rfc3339(t.creationTime) : undefined,
      num_uses: t.numUses,
      remaining_uses: t.numUses > 0 ? t.usesLeft : undefined,
      policy_results: { allowed: this.allowed },
    };
  }

  private requestEntry(error?: string): AuditEntry {
    const parts = this.partsNow();
    const entry: AuditEntry = { id: `${this.cfg.requestId}:request`, time: rfc3339(this.requestAt ?? Date.now()), type: "request", auth: parts.auth, request: parts.request };
    if (error !== undefined) entry.error = error;
    return entry;
  }

  /**
   * One `auth` and `request` object for both entries once the work is allowed (nothing is
   * learnt after that): src/audit/hmac.ts hashes them once per device for both.
   */
  private partsNow(): { auth: AuditAuth | undefined; request: AuditRequest } {
    const parts = this.parts ?? this.buildParts();
    if (this.allowed) this.parts = parts;
    return parts;
  }

  private buildParts(): { auth: AuditAuth | undefined; request: AuditRequest } {
    const k = this.known;
    const url = new URL(this.request.url);
    const header = namespaceHeader(this.request.headers);
    const ns = k.ns ?? { id: "", path: header ? `${header.split("/").filter((s) => s !== "").join("/")}/` : "" };
    const presented = k.token?.presented ?? k.presented ?? undefined;
    return {
      auth: this.auth(),
      request: {
        id: this.cfg.requestId,
        operation: k.op ?? this.request.method.toLowerCase(),
        mount_point: k.mount?.path ?? (k.mountType === "system" ? "sys/" : k.mountType === "token" ? "auth/token/" : undefined),
        mount_type: k.mountType,
        mount_accessor: k.mount?.accessor,
        client_token: presented || undefined,
        client_token_accessor: k.token?.accessor,
        namespace: { id: ns.id, path: ns.path },
        path: k.path ?? safeDecode(url.pathname.replace(/^\/v1\/?/, "")),
        data: k.raw ? rawData(k.raw.bytes, k.raw.contentType) : (k.data ?? null),
        remote_address: this.request.headers.get("cf-connecting-ip") ?? undefined,
      },
    };
  }

  private responseEntry(response: AuditResponse, error?: string): AuditEntry {
    const parts = this.partsNow();
    const { request } = parts;
    const entry: AuditEntry = {
      id: `${this.cfg.requestId}:response`,
      time: rfc3339(Date.now()),
      type: "response",
      auth: parts.auth,
      request,
      response: { mount_point: request.mount_point, mount_type: request.mount_type, mount_accessor: request.mount_accessor, ...response },
    };
    if (error !== undefined) entry.error = error;
    return entry;
  }
}

const rfc3339 = (ms: number): string => new Date(ms).toISOString();

/** An entry's values of the filter selectors (Vault's audit filter properties). */
function entryFields(entry: AuditEntry): AuditFilterFields {
  const r = entry.request;
  return { path: r.path, operation: r.operation, mount_type: r.mount_type ?? "", mount_point: r.mount_point ?? "", namespace: r.namespace.path };
}

function safeDecode(p: string): string {
  try {
    return decodeURIComponent(p);
  } catch {
    return p;
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * An envelope's `auth` block as an entry's `response.auth` (tokens HMAC'd later). Read as loosely
 * as a parsed body would be, since a route's own Response is read back from JSON (`responseOf`).
 */
function authOf(block: AuthBlock | Record<string, unknown>): AuditAuth {
  const a = block as Record<string, unknown>;
  const str = (k: string) => (typeof a[k] === "string" ? (a[k] as string) : undefined);
  const strs = (k: string) => (Array.isArray(a[k]) ? (a[k] as unknown[]).filter((x): x is string => typeof x === "string") : undefined);
  return {
    client_token: str("client_token"),
    accessor: str("accessor"),
    policies: strs("policies"),
    token_policies: strs("token_policies"),
    metadata: isObject(a.metadata) ? (a.metadata as Record<string, string>) : null,
    entity_id: str("entity_id"),
    token_type: str("token_type"),
    token_ttl: typeof a.lease_duration === "number" ? a.lease_duration : undefined,
    num_uses: typeof a.num_uses === "number" ? a.num_uses : undefined,
  };
}

/**
 * What a JSON reply says, for its response entry: what the envelope (src/core/envelope.ts) shows
 * of it, its data, warnings, auth and lease, taken from the reply itself (no JSON round trip:
 * src/audit/hmac.ts hashes values as their JSON text would read).
 */
function replyOf(reply: JsonReply | null, status: number): AuditResponse {
  const out: AuditResponse = { status_code: status };
  if (reply === null) return out;
  if (isObject(reply.data)) out.data = reply.data;
  if (reply.warnings && reply.warnings.length > 0) out.warnings = reply.warnings;
  if (reply.auth) out.auth = authOf(reply.auth);
  const lease = reply.topLevel?.lease_id;
  if (typeof lease === "string" && lease !== "") out.secret = { lease_id: lease };
  return out;
}

/**
 * What a Response a route made itself says, for its response entry: a JSON body as data (an
 * envelope's members as `replyOf` reads them); any other body as Vault logs raw responses
 * (`http_content_type`, `http_raw_body` — text, or base64 for binary — and `http_status_code`),
 * HMAC'd like all data.
 */
async function responseOf(res: Response): Promise<AuditResponse> {
  const out: AuditResponse = { status_code: res.status };
  if (res.body === null || res.status === 204) return out;
  const type = res.headers.get("content-type") ?? "";
  const bytes = new Uint8Array(await res.clone().arrayBuffer());
  if (type.startsWith("application/json")) {
    try {
      const body: unknown = JSON.parse(new TextDecoder().decode(bytes));
      if (isObject(body) && "request_id" in body) {
        if (isObject(body.data)) out.data = body.data;
        if (Array.isArray(body.warnings) && body.warnings.length > 0) out.warnings = body.warnings.filter((w): w is string => typeof w === "string");
        if (isObject(body.auth)) out.auth = authOf(body.auth);
        if (typeof body.lease_id === "string" && body.lease_id !== "") out.secret = { lease_id: body.lease_id };
        return out;
      }
      if (isObject(body)) {
        out.data = body;
        return out;
      }
    } catch {
      // Not JSON after all: logged raw below.
    }
  }
  out.data = { ...rawData(bytes, type), http_status_code: res.status };
  return out;
}

/** A streamed answer (a storage snapshot): its content type and status, never its bytes. */
function opaqueOf(res: Response): AuditResponse {
  return { status_code: res.status, data: { http_content_type: res.headers.get("content-type") ?? "", http_status_code: res.status } };
}

/** A raw body as data: text as is, anything else base64 (then HMAC'd like every string). */
function rawData(bytes: Uint8Array, type: string): Record<string, unknown> {
  const text = RAW_TEXT.test(type) || type === "" ? new TextDecoder().decode(bytes) : bytesToBase64(bytes);
  return { http_content_type: type, http_raw_body: text };
}
