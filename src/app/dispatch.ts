/**
 * The request pipeline for everything under /v1/, in the order CONTRACT.md settles:
 *   path checks → namespace → backend and route → authentication (403) → 405 for no operation →
 *   body (413 / 415 / 400 malformed JSON) → ACL (one place, 403) → 404 / 405 → field coercion →
 *   handler → envelope.
 * A request without a valid token gets 403 even on a path that does not exist; with a valid
 * token an unknown path is 404.
 */
import { capabilitiesFor, isAllowed, nsRelativePath, type Acl, type Operation } from "../auth/acl";
import type { Capability } from "../auth/policy-parser";
import { presentedToken } from "../auth/authenticate";
import { revokeTree, spendUse, type TokenEntry } from "../auth/token-store";
import { ipInCidrs } from "../core/cidr";
import type { Db } from "../core/db/client";
import type { NamespaceRef } from "../core/mount-store";
import { ApiError, badRequest, notFound, permissionDenied } from "../core/errors";
import { envelope, jsonResponse } from "../core/envelope";
import { parseFields, replacedFieldsWarning, unknownFieldsWarning } from "../core/fields";
import { decodeJsonObject, operationOf, queryData, readBody } from "../core/request";
import { matchRoute, type Req, type RouteDef } from "../core/route";
import { trimEndChar } from "../core/text";
import { inspectPath } from "../core/path";
import { parseDurationSeconds } from "../core/duration";
import { answerSlot, servedAnswer, type AnswerSlot } from "../core/public-answers";
import { cachedDevices } from "../audit/audit-store";
import { AuditTrail } from "./audit-hook";
import { resolveRequest } from "./resolve";

export interface DispatchConfig {
  db: Db;
  env: Env;
  rootToken: string;
  maxBodyBytes: number;
  requestId: string;
  waitUntil(p: Promise<unknown>): void;
}

/**
 * The answer for a namespace that does not exist (issue 18 #12): 404 only to a caller whose
 * policies would reach the path if it existed; anyone else gets the 403 that an existing
 * namespace they cannot see gets, so the answer tells nothing about which namespaces exist.
 * A public operation needs a route, hence a namespace: the caller here always has a token.
 */
function missingNamespace(wanted: string, path: string, tokenNs: string | null, acl: Acl | null, op: Operation): ApiError {
  if (tokenNs === null || acl === null || !wanted.startsWith(tokenNs)) return permissionDenied();
  if (!isAllowed(acl, aclPath(tokenNs, { id: "", path: wanted }, path, op), op, false)) return permissionDenied();
  return notFound(["no namespace at this path"]);
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
 * The pipeline under its audit trail (src/app/audit-hook.ts): an error is logged (when a device
 * is enabled) and rethrown for app.ts to render; an answer is logged before it is returned.
 */
export async function dispatch(request: Request, cfg: DispatchConfig): Promise<Response> {
  const url = new URL(request.url);
  // Layer 0 (src/core/public-answers.ts): a public GET the pipeline answered before, while the
  // areas that decided it are unchanged and nothing is audited.
  const devices = cachedDevices();
  const slot = answerSlot(request.method.toUpperCase(), url, namespaceHeader(request.headers), request.headers, devices !== undefined && devices.length === 0);
  const early = slot ? servedAnswer(slot, request.headers, Date.now()) : null;
  if (early) return early;
  const trail = new AuditTrail(cfg, request);
  const seen: Matched = {};
  let res: Response;
  try {
    res = await pipeline(request, url, cfg, trail, seen, slot);
  } catch (e) {
    // A route with its own error format (ACME's problem documents) answers the refusal itself.
    const render = seen.def?.renderError;
    if (render && e instanceof ApiError) return trail.answered(render(e, cfg.requestId));
    throw await trail.failed(e);
  }
  return trail.answered(res);
}

/** The route the pipeline matched, once it knows it (for rendering its refusals). */
interface Matched {
  def?: RouteDef;
}

async function pipeline(request: Request, url: URL, cfg: DispatchConfig, trail: AuditTrail, seen: Matched, slot: AnswerSlot | null): Promise<Response> {
  const { db, requestId } = cfg;
  const { segs, decoded, emptySegmentError } = inspectPath(url.pathname.replace(/^\/v1\/?/, ""));
  const method = request.method.toUpperCase();
  let op = operationOf(method, url.searchParams);

  // Namespace, token, backend, the token's namespace and ACL, from the isolate's read model
  // (src/app/resolve.ts): no D1 round trip when warm. The token is looked up even where the
  // operation turns out to be public.
  const presented = presentedToken(request.headers);
  const resolved = await resolveRequest(db, cfg.rootToken, namespaceHeader(request.headers), segs, presented, trail);
  const { ns, path, backend, tokenNs, acl, wanted } = resolved;
  // A token bound to CIDR blocks (token_bound_cidrs) is no token at all from anywhere else.
  const found = resolved.found && fromBoundAddress(resolved.found, request.headers) ? resolved.found : null;
  trail.know({ ns, path, token: found, presented, mount: backend?.mount ?? null, mountType: backend?.mountType, op });
  const matched = backend ? matchRoute(backend.routes, backend.relPath) : null;
  const def = matched?.route.def;
  seen.def = def;
  if (emptySegmentError && !def?.opaqueRest) throw badRequest(emptySegmentError);
  if (def?.opaqueRest && matched?.params.rest !== undefined) {
    // Splitting and matching drop trailing slashes; an opaque remainder keeps them.
    matched.params.rest += decoded.slice(trimEndChar(decoded, "/").length);
  }

  // HEAD is a read on routes that declare it (ACME new-nonce, RFC 8555 §7.2); Hono drops the body.
  if (op === null && method === "HEAD" && def?.head) op = "read";
  // Public operations skip authentication (pki-engine.md §1.5); everything else needs a token.
  const isPublic = op !== null && def?.public?.includes(op) === true;
  const token: TokenEntry | null = isPublic && !def?.publicSeesToken ? null : found;
  if (!isPublic && !token) throw permissionDenied();
  if (op === null) throw new ApiError(405, "unsupported operation");
  refuseWrapping(request.headers);

  // Body first: existence checks and handlers both need the data.
  const rawBody = await readBody(request, cfg.maxBodyBytes);
  const contentType = (request.headers.get("content-type") ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
  if (op === "patch" && contentType !== "application/merge-patch+json") {
    throw new ApiError(415, `PATCH requires Content-Type of application/merge-patch+json, provided ${contentType || "none"}`);
  }
  const isWrite = op === "update" || op === "patch";
  const body = def?.rawBody && isWrite ? {} : isWrite ? decodeJsonObject(rawBody) : queryData(url.searchParams);
  trail.know(def?.rawBody && isWrite ? { raw: { bytes: rawBody, contentType } } : { data: body });
  // Only here, where an existing namespace meets its ACL check: a missing one must answer every
  // earlier check (405, 413, 415, a malformed body) exactly as an existing one does.
  if (!ns) throw missingNamespace(wanted ?? "", path, tokenNs, acl, op);

  const warnings: string[] = [];
  const req: Req = {
    env: cfg.env,
    db,
    requestId,
    ns,
    mount: backend?.mount ?? null,
    path,
    params: matched?.params ?? {},
    fields: {},
    has: () => false,
    body,
    rawBody,
    contentType,
    query: url.searchParams,
    headers: request.headers,
    token,
    capabilities: capabilityResolver(token ? acl : null, token ? tokenNs : null, ns),
    op,
    warnings,
    waitUntil: cfg.waitUntil,
    // Only a read whose answer the token cannot change may be answered by layer 0 next time.
    answerSlot: slot && isPublic && op === "read" && !def?.publicSeesToken ? slot : undefined,
  };
  if (op === "update" && def?.exists && def.handlers.create) {
    if (!(await def.exists(req))) op = "create";
  } else if (op === "update" && def?.handlers.create && !def.handlers.update) {
    op = "create";
  }
  req.op = op;

  if (token && !isPublic) {
    // A token sees its own namespace and those below it, never a sibling's.
    if (tokenNs === null || acl === null || !ns.path.startsWith(tokenNs)) throw permissionDenied();
    const needsSudo = def?.sudo?.includes(op) === true;
    const p = aclPath(tokenNs, ns, path, op);
    const capOp: Operation = op === "create" && !def?.handlers.create ? "update" : op;
    if (!isAllowed(acl, p, capOp, needsSudo)) throw permissionDenied();
    if (token.numUses > 0) {
      const left = await spendUse(db, token.hash);
      if (left === null) throw permissionDenied();
      token.usesLeft = left;
      if (left === 0) {
        // After the response is fine: the row is already unusable (uses_left = 0), a use-limited
        // token cannot create children (token-routes.ts), and a child insert needs a parent with
        // uses left at that instant (token-store.ts), so nothing can outlive it (issue 18 #2).
        const accessor = token.accessor;
        cfg.waitUntil(revokeTree(db, accessor));
      }
    }
  }

  if (!backend || !matched || !def) throw notFound([`unsupported path: ${path}`]);
  const handler = def.handlers[op] ?? (op === "create" ? def.handlers.update : undefined);
  if (!handler) throw new ApiError(405, "unsupported operation");

  const parsed = parseFields(def.fields ?? {}, body, matched.params, op === "update" || op === "create");
  req.fields = parsed.values;
  req.has = parsed.has;
  if (parsed.unknown.length > 0 && def.fields && isWrite) warnings.push(unknownFieldsWarning(parsed.unknown));
  if (parsed.replaced.length > 0 && isWrite) warnings.push(replacedFieldsWarning(parsed.replaced));

  await trail.beforeWork(req, backend.mountType);
  const reply = await handler.call(def.handlers, req);
  if (reply instanceof Response) return reply;
  if (reply === null || reply === undefined) {
    // Nothing to return is 204, unless there are warnings to deliver (upstream answers 200 then).
    if (warnings.length === 0) return new Response(null, { status: 204, headers: { "x-request-id": requestId } });
    return jsonResponse(envelope(requestId, { warnings }, backend.mountType), 200, requestId);
  }
  const merged = { ...reply, warnings: [...warnings, ...(reply.warnings ?? [])] };
  return jsonResponse(envelope(requestId, merged, backend.mountType), reply.status ?? 200, requestId);
}

/**
 * Whether the request comes from where the token may be used: anywhere without bound CIDRs, else
 * from inside one, judged by Cloudflare's CF-Connecting-IP (X-Forwarded-For and X-Real-IP are
 * client-controlled and never trusted; src/auth/methods/login.ts).
 */
function fromBoundAddress(token: TokenEntry, headers: Headers): boolean {
  if (token.boundCidrs.length === 0) return true;
  const ip = headers.get("cf-connecting-ip")?.trim();
  return ip !== undefined && ip !== "" && ipInCidrs(ip, token.boundCidrs);
}

/** The namespace header: `X-Service-Namespace`, or Vault's `X-Vault-Namespace` as an alias (CONTRACT.md). */
function namespaceHeader(headers: Headers): string | null {
  return headers.get("x-service-namespace") ?? headers.get("x-vault-namespace");
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
