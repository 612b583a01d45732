/**
 * Endpoint declarations: a path pattern, the fields it takes, the operations it implements and
 * which of them are public or need `sudo`. Engines export arrays of these; the dispatcher
 * (src/app/dispatch.ts) matches, authorizes, coerces fields and calls the handler.
 */
import type { AnswerSlot } from "./public-answers";
import type { Capability, Operation, TokenEntry } from "./caller";
import type { Db } from "./db/client";
import type { MountRow, NamespaceRef } from "./mount-store";
import { trimEndChar } from "./text";
import type { FieldSchema, FieldValues } from "./fields";
import type { ApiError } from "./errors";

export type { Operation };

/** What a handler sees. Fields are already coerced against the route's declaration. */
export interface Req<F extends FieldSchema = FieldSchema> {
  env: Env;
  db: Db;
  requestId: string;
  /** The namespace the request addresses. */
  ns: NamespaceRef;
  /** The mount the path falls under (null for sys/ and auth/token/). */
  mount: MountRow | null;
  /** Path relative to the namespace, e.g. "secret/data/app" (what policies match). */
  path: string;
  params: Record<string, string>;
  fields: FieldValues<F>;
  has(name: keyof F & string): boolean;
  /** The decoded JSON body (or query data for reads), before coercion. */
  body: Record<string, unknown>;
  rawBody: Uint8Array<ArrayBuffer>;
  /** The unread body, on routes with `streamBody` only (else null or absent). */
  bodyStream?: ReadableStream<Uint8Array> | null;
  contentType: string;
  query: URLSearchParams;
  headers: Headers;
  /** The HTTP method as sent ("HEAD" for a HEAD served by the read handler); absent in hand-built requests. */
  method?: string;
  /** The authenticated caller; null only on public operations. */
  token: TokenEntry | null;
  /**
   * The caller's capabilities on a path given relative to the request's namespace, resolved
   * exactly as the dispatcher resolves the request's own path (relative to the token's
   * namespace). Every capability check other than the dispatcher's own goes through this, so a
   * path in namespace team1 is never checked as if it were the root namespace's.
   * Empty for public operations (no token).
   */
  capabilities(path: string): Set<Capability>;
  op: Operation;
  warnings: string[];
  waitUntil(p: Promise<unknown>): void;
  /**
   * Set by the dispatcher on a public GET that layer 0 may answer next time
   * (src/core/public-answers.ts); the route that serves a cacheable answer hands it over.
   */
  answerSlot?: AnswerSlot;
}

export interface AuthBlock {
  client_token: string;
  accessor: string;
  policies: string[];
  token_policies: string[];
  identity_policies: null;
  metadata: Record<string, string> | null;
  lease_duration: number;
  renewable: boolean;
  entity_id: string;
  token_type: "service";
  orphan: boolean;
  mfa_requirement: null;
  num_uses: number;
}

/** A JSON reply: rendered in the envelope. `null`/`undefined` means 204 No Content. */
export interface JsonReply {
  data?: unknown;
  warnings?: string[];
  auth?: AuthBlock | null;
  status?: number;
  /** Extra top-level members (upstream repeats sys/mounts at the top level for old clients). */
  topLevel?: Record<string, unknown>;
}

export type Reply = Response | JsonReply | null | undefined;

/** Handlers per operation. Method syntax keeps them assignable across field schemas. */
export interface Handlers<F extends FieldSchema> {
  read?(req: Req<F>): Promise<Reply>;
  list?(req: Req<F>): Promise<Reply>;
  create?(req: Req<F>): Promise<Reply>;
  update?(req: Req<F>): Promise<Reply>;
  patch?(req: Req<F>): Promise<Reply>;
  delete?(req: Req<F>): Promise<Reply>;
}

export interface RouteDef<F extends FieldSchema = FieldSchema> {
  /**
   * Segments separated by "/": literals, `:name` (one "generic name" segment, OpenBao sdk/framework's GenericNameRegex),
   * `:name?` (optional last segment) and `*name` (the rest of the path, one or more segments).
   */
  pattern: string;
  fields?: F;
  handlers: Handlers<F>;
  /** Operations that need no token (OpenBao builtin/logical/pki/backend.go, Unauthenticated paths). */
  public?: Operation[];
  /**
   * Operations that need no token when the configuration says so: sys/metrics with
   * METRICS_UNAUTHENTICATED=true, as Vault's listener `telemetry.unauthenticated_metrics_access`.
   */
  publicWhen?(env: Env, op: Operation): boolean;
  /**
   * On public operations, still hand the handler the caller's token when a valid one is
   * presented (no ACL check is made): Vault's unauthenticated sys/internal/ui/mounts reads the
   * token itself to decide what to show.
   */
  publicSeesToken?: boolean;
  /** Operations on root-protected paths: the policy must grant `sudo` as well. */
  sudo?: Operation[];
  /** Decides create vs update for the ACL on writes; without it a write is an update. */
  exists?(req: Req<F>): Promise<boolean>;
  /**
   * Its `read` changes state (GET crl/rotate builds and publishes a CRL): the audit trail records
   * its request entry before the work, as a write's, instead of with the response entry
   * (docs/audit.md "Reads travel in one hand-off").
   */
  readChangesState?: boolean;
  /** HEAD is served as a read (the body is dropped): ACME's new-nonce and directory (RFC 8555 §7.2). */
  head?: boolean;
  /**
   * Renders the pipeline's refusals of this route (413, 405, 415…) in the route's own format
   * instead of Vault's `{"errors":[…]}`: ACME answers problem documents (RFC 8555 §6.7).
   */
  renderError?(err: ApiError, requestId: string): Response;
  /** Keep the raw body (no JSON parsing), e.g. OCSP requests. */
  rawBody?: boolean;
  /**
   * The pipeline does not read the body (MAX_REQUEST_BYTES does not apply): the handler reads
   * `req.bodyStream` under its own bound. Neither that body nor the body of a Response the route
   * returns is written to the audit trail (only the content type and status): a storage snapshot.
   */
  streamBody?: boolean;
  /**
   * The `*rest` parameter is opaque data, not a path: empty segments are allowed in it and its
   * trailing slashes are kept (OCSP GET carries base64, where "//" and a final "/" occur).
   */
  opaqueRest?: boolean;
}

export interface CompiledRoute {
  def: RouteDef;
  regex: RegExp;
  /** The pattern's first segment when it is a literal (else null): matchRoute's index. */
  first: string | null;
}

const GENERIC_NAME = String.raw`\w(?:[\w.-]*\w)?`;

export function compileRoute(def: RouteDef): CompiledRoute {
  const parts = def.pattern.split("/").map((seg) => {
    if (seg.startsWith("*")) return `(?<${seg.slice(1)}>.+)`;
    if (seg.startsWith(":") && seg.endsWith("?")) return `(?:/(?<${seg.slice(1, -1)}>${GENERIC_NAME}))?`;
    if (seg.startsWith(":")) return `(?<${seg.slice(1)}>${GENERIC_NAME})`;
    return seg.replace(/[.+?^${}()|[\]\\]/g, "\\$&");
  });
  let src = "";
  parts.forEach((p, i) => {
    src += i === 0 || p.startsWith("(?:/") ? p : `/${p}`;
  });
  const head = def.pattern.split("/")[0] ?? "";
  return { def, regex: new RegExp(`^${src}$`), first: head.startsWith(":") || head.startsWith("*") ? null : head };
}

/** Declares a route while keeping its field types for the handlers. */
export function route<const F extends FieldSchema = Record<string, never>>(def: RouteDef<F>): RouteDef {
  return def as unknown as RouteDef;
}

/**
 * Route tables indexed by their literal first segment, so a match tries only the routes that can
 * match (the PKI table has over a hundred; a linear scan of their regexes showed in the profile
 * of every PKI request). Tables are module constants, so the WeakMap holds one index each.
 */
interface RouteIndex {
  byFirst: Map<string, number[]>;
  /** Routes whose first segment is a parameter: candidates for any path. */
  anyFirst: number[];
}
const indexes = new WeakMap<CompiledRoute[], RouteIndex>();

function indexOf(routes: CompiledRoute[]): RouteIndex {
  let idx = indexes.get(routes);
  if (idx) return idx;
  idx = { byFirst: new Map(), anyFirst: [] };
  for (let i = 0; i < routes.length; i++) {
    const first = routes[i]?.first ?? null;
    if (first === null) idx.anyFirst.push(i);
    else idx.byFirst.set(first, [...(idx.byFirst.get(first) ?? []), i]);
  }
  indexes.set(routes, idx);
  return idx;
}

export function matchRoute(
  routes: CompiledRoute[],
  path: string,
): { route: CompiledRoute; params: Record<string, string> } | null {
  // Not `replace(/\/+$/, "")`: that regex is quadratic on a long run of "/" (src/core/text.ts).
  const p = trimEndChar(path, "/");
  const slash = p.indexOf("/");
  const idx = indexOf(routes);
  const literal = idx.byFirst.get(slash < 0 ? p : p.slice(0, slash)) ?? [];
  const any = idx.anyFirst;
  // Both lists ascend: merged, the candidates keep the table's order (first match wins).
  for (let a = 0, b = 0; a < literal.length || b < any.length; ) {
    const la = literal[a] ?? Infinity;
    const lb = any[b] ?? Infinity;
    const i = la < lb ? la : lb;
    if (la < lb) a++;
    else b++;
    const r = routes[i];
    const m = r?.regex.exec(p);
    if (r && m) {
      const params: Record<string, string> = {};
      for (const [k, v] of Object.entries(m.groups ?? {})) if (v !== undefined) params[k] = v;
      return { route: r, params };
    }
  }
  return null;
}
