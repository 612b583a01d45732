/**
 * The dispatcher's audit hook (issue 17; Vault's audit broker, vault-ecosystem.md §8): one
 * `AuditTrail` per request under /v1/ follows it through src/app/dispatch.ts.
 *
 * - Devices: the isolate's cached list when fresh; else the list rides in the request's first
 *   D1 batch (`deviceRead` / `absorb`), so auditing never adds a D1 round trip. With no device
 *   enabled every step below returns at once.
 * - Before the work (`beforeWork`, just before the handler, after every check passed): the
 *   `request` entry is handed over and awaited (src/audit/enqueue.ts): durable in the Queue, or
 *   written to the log for stdout devices. If no device could record it, the handler does not
 *   run: 503 `audit: no device could record this request` (Vault refuses too; it says 500
 *   `internal error`).
 * - After the work (`answered`): the `response` entry (data, warnings, auth, status) is handed
 *   over before the answer leaves; queued devices get the request entry again in the same
 *   message so a collector never sees a response before its request (types.ts). Failure: 503,
 *   although the work is done (as Vault, whose response-log failure is an error after the fact).
 * - Refused before the work (`failed`: 400/403/404/405/413…, or a handler error): the request
 *   and response entries, the latter with the error, in one message. A failure to log a request
 *   refused before the work is only logged and the original error stands (Vault); a failure
 *   after the work began turns the answer into the 503.
 * Entries are HMAC'd per device in src/audit/hmac.ts; nothing here writes a secret anywhere.
 */
import { absorbDeviceRows, cachedDevices, deviceListQuery, lastKnownDevices, loadDevices } from "../audit/audit-store";
import { enqueueEntries, type HashedEntries } from "../audit/enqueue";
import { AuditUnavailableError, type AuditAuth, type AuditDevice, type AuditEntry, type AuditResponse } from "../audit/types";
import { loadConfig } from "../core/config";
import type { Db } from "../core/db/client";
import { bytesToBase64 } from "../core/encoding";
import { ApiError } from "../core/errors";
import { lifecycleConflict } from "../core/lifecycle";
import type { MountRow, NamespaceRef } from "../core/mount-store";
import type { Req } from "../core/route";
import type { TokenEntry } from "../core/caller";

/** What the dispatcher has learnt of the request so far (for entries of refused requests). */
export interface AuditKnown {
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
}

const AUDIT_UNAVAILABLE = "audit: no device could record this request";
const RAW_TEXT = /^(text\/|application\/(json|[\w.+-]*\+json|x-pem-file|pem-certificate-chain|x-ndjson))/;

export class AuditTrail {
  private devices: AuditDevice[] | undefined = cachedDevices();
  private known: AuditKnown = {};
  /** Set when the request entry is recorded: the work may start (and the response must follow). */
  private recorded: HashedEntries | null = null;
  private refusedByAudit = false;
  private allowed = false;

  constructor(
    private readonly cfg: { env: Env; db: Db; requestId: string },
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

  know(k: AuditKnown): void {
    Object.assign(this.known, k);
  }

  private get active(): boolean {
    return this.devices !== undefined && this.devices.length > 0;
  }

  /** The request entry, recorded before the handler runs; 503 when no device could record it. */
  async beforeWork(req: Req, mountType: string): Promise<void> {
    this.allowed = true;
    if (!this.active || !this.devices) return;
    this.know({ ns: req.ns, path: req.path, token: req.token, mount: req.mount, mountType, op: req.op, data: req.body });
    try {
      this.recorded = await enqueueEntries(this.cfg.env, this.devices, [this.requestEntry()]);
    } catch (e) {
      if (!(e instanceof AuditUnavailableError)) throw e;
      this.refusedByAudit = true;
      throw new ApiError(503, AUDIT_UNAVAILABLE);
    }
  }

  /** The response entry, recorded before `res` is returned; 503 instead when no device could. */
  async answered(res: Response): Promise<Response> {
    if (!this.active || !this.devices || this.refusedByAudit) return res;
    const entry = this.responseEntry(await responseOf(res));
    await this.record(entry, () => {
      // A refusal rendered as a response (RouteDef.renderError) never reached the work: its
      // log failure is only logged, as in `failed`.
      if (!this.allowed) return void console.error(`audit: request ${this.cfg.requestId} (refused with ${res.status}) could not be logged by any device`);
      throw new ApiError(503, AUDIT_UNAVAILABLE);
    });
    return res;
  }

  /** The error to throw for `err`: itself, or the 503 when the work began and could not be logged. */
  async failed(err: unknown): Promise<unknown> {
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
    const { status, messages } = errorOf(err);
    const entry = this.responseEntry({ status_code: status }, messages.join("; "));
    let out: unknown = err;
    await this.record(entry, () => {
      if (this.recorded) out = new ApiError(503, AUDIT_UNAVAILABLE);
      else console.error(`audit: request ${this.cfg.requestId} (refused with ${status}) could not be logged by any device`);
    });
    return out;
  }

  private async record(response: AuditEntry, onUnavailable: () => void): Promise<void> {
    if (!this.devices) return;
    const entries = this.recorded ? [response] : [this.requestEntry(response.error), response];
    try {
      await enqueueEntries(this.cfg.env, this.devices, entries, { repeat: this.recorded ?? undefined });
    } catch (e) {
      if (!(e instanceof AuditUnavailableError)) throw e;
      onUnavailable();
    }
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
    const k = this.known;
    const url = new URL(this.request.url);
    const header = this.request.headers.get("x-service-namespace") ?? this.request.headers.get("x-vault-namespace");
    const ns = k.ns ?? { id: "", path: header ? `${header.split("/").filter((s) => s !== "").join("/")}/` : "" };
    const presented = k.token?.presented ?? k.presented ?? undefined;
    const entry: AuditEntry = {
      id: `${this.cfg.requestId}:request`,
      time: rfc3339(Date.now()),
      type: "request",
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
    if (error !== undefined) entry.error = error;
    return entry;
  }

  private responseEntry(response: AuditResponse, error?: string): AuditEntry {
    const req = this.requestEntry();
    const entry: AuditEntry = {
      id: `${this.cfg.requestId}:response`,
      time: rfc3339(Date.now()),
      type: "response",
      auth: req.auth,
      request: req.request,
      response: { mount_point: req.request.mount_point, mount_type: req.request.mount_type, mount_accessor: req.request.mount_accessor, ...response },
    };
    if (error !== undefined) entry.error = error;
    return entry;
  }
}

const rfc3339 = (ms: number): string => new Date(ms).toISOString();

function safeDecode(p: string): string {
  try {
    return decodeURIComponent(p);
  } catch {
    return p;
  }
}

function errorOf(err: unknown): { status: number; messages: string[] } {
  if (err instanceof ApiError) return { status: err.status, messages: err.messages };
  const conflict = lifecycleConflict(err);
  if (conflict) return { status: conflict.status, messages: conflict.messages };
  return { status: 500, messages: ["internal error"] };
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/** An envelope's `auth` block as an entry's `response.auth` (tokens HMAC'd later). */
function authOf(a: Record<string, unknown>): AuditAuth {
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
 * What an answer says, for its response entry: an envelope's data, warnings, auth and lease; an
 * error body's messages; any other body as Vault logs raw responses (`http_content_type`,
 * `http_raw_body` — text, or base64 for binary — and `http_status_code`), HMAC'd like all data.
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

/** A raw body as data: text as is, anything else base64 (then HMAC'd like every string). */
function rawData(bytes: Uint8Array, type: string): Record<string, unknown> {
  const text = RAW_TEXT.test(type) || type === "" ? new TextDecoder().decode(bytes) : bytesToBase64(bytes);
  return { http_content_type: type, http_raw_body: text };
}
