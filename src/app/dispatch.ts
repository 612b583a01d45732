/**
 * The request path for everything under /v1/, as named steps read top to bottom in `handle`:
 *
 *   resolve → authenticate → read body → authorize → validate fields → run → render → audit
 *
 * Each step throws the refusal it finds, so the order of the steps is the order of the answers
 * (docs/http-conventions.md "Settled questions"): path checks (400) → namespace, backend and
 * route → authentication (403) → 405 for no operation → body (413 / 415 / 400 malformed JSON) →
 * ACL (one place, 403) → 404 / 405 → field coercion (400) → handler → envelope. A request without
 * a valid token gets 403 even on a path that does not exist; with a valid token an unknown path
 * is 404. A refusal is rendered by app.ts from the one table of src/core/envelope.ts
 * (`errorAnswer`); the audit trail (src/app/audit-hook.ts) records answers and refusals alike.
 */
import { capabilitiesFor, isAllowed, nsRelativePath, type Acl, type Operation } from "../auth/acl";
import type { Capability } from "../auth/policy-parser";
import { revokeTree, spendUse, type TokenEntry } from "../auth/token-store";
import type { Db } from "../core/db/client";
import type { NamespaceRef } from "../core/mount-store";
import { ApiError, badRequest, notFound, permissionDenied } from "../core/errors";
import { envelope, errorAnswer, jsonResponse } from "../core/envelope";
import { parseFields, replacedFieldsWarning, unknownFieldsWarning } from "../core/fields";
import { decodeJsonObject, operationOf, queryData, readBody } from "../core/request";
import type { Reply, Req, RouteDef } from "../core/route";
import { trimEndChar } from "../core/text";
import { inspectPath } from "../core/path";
import { parseDurationSeconds } from "../core/duration";
import { answerSlot, servedAnswer, type AnswerSlot } from "../core/public-answers";
import { cachedDevices } from "../audit/audit-store";
import { allFiltered, unauditedRead } from "../audit/device-filter";
import { AuditTrail, type Answer } from "./audit-hook";
import { LAYER0_FAMILY, recordRequest, routeFamily } from "./request-metrics";
import { namespaceHeader, resolveRequest, type Resolved } from "./resolve";

export interface DispatchConfig {
  db: Db;
  env: Env;
  rootToken: string;
  maxBodyBytes: number;
  requestId: string;
  waitUntil(p: Promise<unknown>): void;
}

/** One request and what every step reads of its surroundings (one object per request). */
interface Call {
  request: Request;
  url: URL;
  cfg: DispatchConfig;
  trail: AuditTrail;
  /** Where layer 0 may remember this request's answer (src/core/public-answers.ts). */
  slot: AnswerSlot | null;
  /** What `resolve` found, once it has (the route renders its own refusals). */
  at: Resolved | null;
}

/** The body as read: bytes, content type, and the data the fields are coerced from. */
interface Input {
  rawBody: Uint8Array<ArrayBuffer>;
  contentType: string;
  body: Record<string, unknown>;
}

/** What the request-metrics hook reads of a request (only when METRICS_DATASET is bound). */
interface Probe {
  call: Call | null;
  early: boolean;
}

/**
 * The pipeline, and with a METRICS_DATASET binding one Analytics Engine data point per request
 * (./request-metrics.ts). Without the binding the hook costs this one check (and the pipeline's
 * two tests of an absent probe): no clock read, no allocation.
 */
export function dispatch(request: Request, cfg: DispatchConfig): Promise<Response> {
  const dataset = cfg.env.METRICS_DATASET;
  return dataset === undefined ? pipeline(request, cfg, undefined) : measured(dataset, request, cfg);
}

/** The pipeline timed; its answer or refusal recorded after it is known, without an await. */
async function measured(dataset: AnalyticsEngineDataset, request: Request, cfg: DispatchConfig): Promise<Response> {
  const started = Date.now();
  const probe: Probe = { call: null, early: false };
  let status = 500;
  try {
    const res = await pipeline(request, cfg, probe);
    status = res.status;
    return res;
  } catch (e) {
    // As app.ts will render it (src/core/envelope.ts errorReply).
    status = errorAnswer(e)?.status ?? 500;
    throw e;
  } finally {
    const at = probe.call?.at;
    recordRequest(dataset, {
      family: probe.early ? LAYER0_FAMILY : routeFamily(at?.backend?.mountType, at?.def?.pattern),
      mountType: probe.early ? "pki" : (at?.backend?.mountType ?? ""),
      method: request.method.toUpperCase(),
      status,
      durationMs: Date.now() - started,
    });
  }
}

/**
 * The pipeline under its audit trail: an answer is logged before it is returned; a refusal is
 * logged (when a device is enabled) and rethrown for app.ts to render.
 */
async function pipeline(request: Request, cfg: DispatchConfig, probe: Probe | undefined): Promise<Response> {
  const url = new URL(request.url);
  // Layer 0 (src/core/public-answers.ts): a public GET the pipeline answered before, while the
  // areas that decided it are unchanged and nothing is audited.
  // With devices enabled, only when every one's filter leaves this read out, as the pipeline
  // resolved it when it kept the answer (src/audit/device-filter.ts).
  const devices = cachedDevices();
  const slot = answerSlot(request.method.toUpperCase(), url, namespaceHeader(request.headers), request.headers, devices !== undefined && allFiltered(devices));
  const admit = devices && devices.length > 0 ? (meta: Readonly<Record<string, string>>) => unauditedRead(devices, meta) : undefined;
  const early = slot ? servedAnswer(slot, request.headers, Date.now(), admit) : null;
  if (early) {
    if (probe) probe.early = true;
    return early;
  }

  const call: Call = { request, url, cfg, trail: new AuditTrail(cfg, request), slot, at: null };
  if (probe) probe.call = call;
  let answer: Answer;
  let res: Response;
  try {
    answer = await handle(call);
    res = render(answer, call.at?.backend?.mountType ?? "", cfg.requestId);
  } catch (e) {
    // A route with its own error format (ACME's problem documents) answers the refusal itself.
    const own = call.at?.def?.renderError;
    if (!own || !(e instanceof ApiError)) throw await call.trail.failed(e);
    res = own(e, cfg.requestId);
    answer = res;
  }
  await call.trail.answered(answer);
  return res;
}

/** The steps up to the handler's answer, in the order their refusals are answered. */
async function handle(call: Call): Promise<Answer> {
  const { request, url, cfg, trail } = call;
  const method = request.method.toUpperCase();
  const { segs, decoded, emptySegmentError } = inspectPath(url.pathname.replace(/^\/v1\/?/, ""));
  const asked = operationOf(method, url.searchParams);

  // Resolve (src/app/resolve.ts); a stale audit device list rides in the resolver's first D1 batch.
  const deviceRead = trail.deviceRead(cfg.db);
  const at = await resolveRequest(cfg.db, cfg.rootToken, request.headers, segs, deviceRead);
  if (deviceRead) await trail.absorb(at.alongside);
  trail.knowTarget(at, asked);
  call.at = at;
  const { backend, matched, def } = at;
  checkPath(at, decoded, emptySegmentError);

  // HEAD is a read on routes that declare it (ACME new-nonce, RFC 8555 §7.2); Hono drops the body.
  const op = asked === null && method === "HEAD" && def?.head ? "read" : asked;
  const isPublic = op !== null && (def?.public?.includes(op) === true || def?.publicWhen?.(cfg.env, op) === true);
  const token = authenticate(at, isPublic);
  if (op === null) throw new ApiError(405, "unsupported operation");
  refuseWrapping(request.headers);

  // A streamed body (RouteDef.streamBody) is left for the handler, under its own bound, and never audited.
  const input = inputOf(request.headers, url.searchParams, def?.streamBody ? new Uint8Array(0) : await readBody(request, cfg.maxBodyBytes), def, op);
  if (def?.streamBody) trail.knowOpaque();
  trail.knowBody(input.body, def?.rawBody && isWrite(op) ? { bytes: input.rawBody, contentType: input.contentType } : undefined);
  // Only here, where an existing namespace meets its ACL check: a missing one must answer every
  // earlier check (405, 413, 415, a malformed body) exactly as an existing one does.
  if (!at.ns) throw missingNamespace(at, op);

  // Only a read whose answer the token cannot change may be answered by layer 0 next time.
  const slot = call.slot && isPublic && op === "read" && !def?.publicSeesToken ? call.slot : undefined;
  if (slot) slot.meta = trail.filterFields("read");
  const req = requestFor(call, at, at.ns, op, token, input, slot);
  // A write is a create when the route says the object does not exist yet, or has no update.
  if (op === "update" && def?.handlers.create && !(def.exists ? await def.exists(req) : def.handlers.update)) req.op = "create";
  if (token && !isPublic) {
    authorize(at, at.ns, req.op);
    if (token.numUses > 0) await spendOneUse(cfg, token);
  }

  if (!backend || !matched || !def) throw notFound([`unsupported path: ${at.path}`]);
  const handler = handlerOf(def, req.op);
  if (!handler) throw new ApiError(405, "unsupported operation");
  validateFields(def, matched.params, req);

  // Run, once the request entry is recorded; a read that changes nothing hands it over with its
  // response entry instead (docs/audit.md "Reads travel in one hand-off").
  const deferRequestEntry = (req.op === "read" || req.op === "list") && !isPublic && !def.readChangesState;
  await trail.beforeWork(req, backend.mountType, deferRequestEntry);
  return withWarnings(await handler.call(def.handlers, req), req.warnings);
}

/** Empty path segments are refused, except in a route's opaque remainder (RouteDef.opaqueRest). */
function checkPath(at: Resolved, decoded: string, emptySegmentError: string | null): void {
  if (emptySegmentError && !at.def?.opaqueRest) throw badRequest(emptySegmentError);
  if (at.def?.opaqueRest && at.matched?.params.rest !== undefined) {
    // Splitting and matching drop trailing slashes; an opaque remainder keeps them.
    at.matched.params.rest += decoded.slice(trimEndChar(decoded, "/").length);
  }
}

/**
 * Authenticate: public operations skip it (no token needed; the handler sees the caller's only
 * with `publicSeesToken`); everything else needs a valid token, else 403 whatever the path.
 * Returns the caller the handler sees.
 */
function authenticate(at: Resolved, isPublic: boolean): TokenEntry | null {
  const token = isPublic && !at.def?.publicSeesToken ? null : at.found;
  if (!isPublic && !token) throw permissionDenied();
  return token;
}

const isWrite = (op: Operation): boolean => op === "update" || op === "patch";

/**
 * Read body (the bytes are read first, 413 over the size limit): 415 for a PATCH that is not a
 * JSON merge patch, 400 for a write whose body is not a JSON object; a read's data is its query.
 * Existence checks and handlers both need the data, so it is read before either.
 */
function inputOf(headers: Headers, query: URLSearchParams, rawBody: Uint8Array<ArrayBuffer>, def: RouteDef | undefined, op: Operation): Input {
  const contentType = (headers.get("content-type") ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
  if (op === "patch" && contentType !== "application/merge-patch+json") {
    throw new ApiError(415, `PATCH requires Content-Type of application/merge-patch+json, provided ${contentType || "none"}`);
  }
  const write = isWrite(op);
  const body = (def?.rawBody || def?.streamBody) && write ? {} : write ? decodeJsonObject(rawBody) : queryData(query);
  return { rawBody, contentType, body };
}

/**
 * The answer for a namespace that does not exist: 404 only to a caller whose policies would
 * reach the path if it existed; anyone else gets the 403 that an existing namespace they cannot
 * see gets, so the answer tells nothing about which namespaces exist. A public operation needs a
 * route, hence a namespace: the caller here always has a token.
 */
function missingNamespace(at: Resolved, op: Operation): ApiError {
  const { tokenNs, acl, wanted, path } = at;
  if (tokenNs === null || acl === null || !wanted.startsWith(tokenNs)) return permissionDenied();
  if (!isAllowed(acl, aclPath(tokenNs, { id: "", path: wanted }, path, op), op, false)) return permissionDenied();
  return notFound(["no namespace at this path"]);
}

/** What the handler sees; fields are filled in by `validateFields`. */
function requestFor(call: Call, at: Resolved, ns: NamespaceRef, op: Operation, token: TokenEntry | null, input: Input, slot: AnswerSlot | undefined): Req {
  const { cfg, request, url } = call;
  return {
    env: cfg.env,
    db: cfg.db,
    requestId: cfg.requestId,
    ns,
    mount: at.backend?.mount ?? null,
    path: at.path,
    params: at.matched?.params ?? {},
    fields: {},
    has: () => false,
    body: input.body,
    rawBody: input.rawBody,
    bodyStream: at.def?.streamBody ? request.body : null,
    contentType: input.contentType,
    query: url.searchParams,
    headers: request.headers,
    method: request.method.toUpperCase(),
    token,
    capabilities: capabilityResolver(token ? at.acl : null, token ? at.tokenNs : null, ns),
    op,
    warnings: [],
    waitUntil: cfg.waitUntil,
    answerSlot: slot,
  };
}

/**
 * Authorize, in one place: a token sees its own namespace and those below it, never a
 * sibling's; the ACL must grant the operation (and `sudo` where the route asks for it).
 */
function authorize(at: Resolved, ns: NamespaceRef, op: Operation): void {
  const { tokenNs, acl, def } = at;
  if (tokenNs === null || acl === null || !ns.path.startsWith(tokenNs)) throw permissionDenied();
  const needsSudo = def?.sudo?.includes(op) === true;
  const capOp: Operation = op === "create" && !def?.handlers.create ? "update" : op;
  if (!isAllowed(acl, aclPath(tokenNs, ns, at.path, op), capOp, needsSudo)) throw permissionDenied();
}

/** A use-limited token spends one use once authorized; none left is a 403. */
async function spendOneUse(cfg: DispatchConfig, token: TokenEntry): Promise<void> {
  const left = await spendUse(cfg.db, token.hash);
  if (left === null) throw permissionDenied();
  token.usesLeft = left;
  if (left === 0) {
    // After the response is fine: the row is already unusable (uses_left = 0), a use-limited
    // token cannot create children (token-routes.ts), and a child insert needs a parent with
    // uses left at that instant (token-store.ts), so nothing can outlive it.
    cfg.waitUntil(revokeTree(cfg.db, token.accessor));
  }
}

/** The route's handler for `op`; a create falls back to the update handler. */
function handlerOf(def: RouteDef, op: Operation) {
  return def.handlers[op] ?? (op === "create" ? def.handlers.update : undefined);
}

/**
 * Validate fields: the body (or query) coerced against the route's fields (400 naming the
 * field), path captures winning over body keys; a write is warned of unknown and replaced keys.
 */
function validateFields(def: RouteDef, params: Record<string, string>, req: Req): void {
  const op = req.op;
  const write = op === "update" || op === "create" || op === "patch";
  const parsed = parseFields(def.fields ?? {}, req.body, params, op === "update" || op === "create");
  req.fields = parsed.values;
  req.has = parsed.has;
  if (parsed.unknown.length > 0 && def.fields && write) req.warnings.push(unknownFieldsWarning(parsed.unknown));
  if (parsed.replaced.length > 0 && write) req.warnings.push(replacedFieldsWarning(parsed.replaced));
}

/** The handler's reply as answered, with the warnings the pipeline gathered put first. */
function withWarnings(reply: Reply, warnings: string[]): Answer {
  if (reply instanceof Response) return reply;
  // Nothing to return is 204, unless there are warnings to deliver (upstream answers 200 then).
  if (reply === null || reply === undefined) return warnings.length === 0 ? null : { warnings };
  return { ...reply, warnings: [...warnings, ...(reply.warnings ?? [])] };
}

/** Render: a route's own Response as it is, no reply as 204, a JSON reply in the envelope. */
function render(answer: Answer, mountType: string, requestId: string): Response {
  if (answer instanceof Response) return answer;
  if (answer === null) return new Response(null, { status: 204, headers: { "x-request-id": requestId } });
  return jsonResponse(envelope(requestId, answer, mountType), answer.status ?? 200, requestId);
}

/** ACL path of a request: relative to the token's namespace, with a trailing "/" for lists. */
function aclPath(tokenNsPath: string, ns: NamespaceRef, path: string, op: Operation): string {
  const rel = nsRelativePath(tokenNsPath, ns.path, path);
  return op === "list" && !rel.endsWith("/") ? `${rel}/` : rel;
}

const NO_CAPABILITIES: ReadonlySet<Capability> = new Set();

/** Req.capabilities: one resolver for every capability check made outside the dispatcher. */
function capabilityResolver(acl: Acl | null, tokenNsPath: string | null, ns: NamespaceRef): (path: string) => Set<Capability> {
  return (path) => {
    if (!acl || tokenNsPath === null || !ns.path.startsWith(tokenNsPath)) return new Set(NO_CAPABILITIES);
    return new Set(capabilitiesFor(acl, nsRelativePath(tokenNsPath, ns.path, path.replace(/^\/+/, ""))));
  };
}

/**
 * Vault's `X-Vault-Wrap-TTL` asks for a wrapped response. Vault ignores an empty or zero value,
 * answers 400 `error parsing X-Vault-Wrap-TTL header: …` / `requested wrap ttl cannot be negative`
 * for bad ones; Lanyard does not wrap, so any positive value is a clear 400 rather than an
 * unwrapped answer the client would misread. `X-Vault-Request`, `X-Vault-Index` and
 * `X-Vault-Inconsistent` need nothing: Vault CE does not require or act on them either.
 */
function refuseWrapping(headers: Headers): void {
  const raw = headers.get("x-vault-wrap-ttl")?.trim();
  if (!raw) return;
  let seconds: number;
  if (/^-/.test(raw)) throw badRequest("requested wrap ttl cannot be negative");
  try {
    seconds = parseDurationSeconds(raw);
  } catch (e) {
    throw badRequest(`error parsing X-Vault-Wrap-TTL header: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (seconds === 0) return;
  throw badRequest("response wrapping is not supported: Lanyard does not wrap responses; send the request without the X-Vault-Wrap-TTL header");
}
