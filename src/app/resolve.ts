/**
 * Who is calling and where the request goes, before any route runs: the namespace (the longest
 * existing prefix of the path, below the namespace header's), the presented token, the backend
 * (sys/, auth/token/, identity/, or the longest mount of the namespace) and its route, the token's
 * namespace and its ACL. It resolves only: refusing is the dispatcher's (src/app/dispatch.ts).
 *
 * Everything here is read through this isolate's read model (docs/architecture.md "Caches and
 * concurrency invariants"): namespaces, mounts, token rows and ACLs are cached per isolate for at
 * most CACHE_TTL_MS (src/core/read-cache.ts), and each store invalidates its area in the isolate
 * that writes. A warm request makes no D1 round trip here. On misses, the reads go in at most
 * two rounds: one batch (namespaces, token, the root namespace's mounts, and the one statement the
 * dispatcher adds: the audit device list),
 * then, concurrently, what depends on it (a child namespace's mounts, the token's namespace and
 * its policies).
 */
import { isRootToken, presentedToken, rootEntry, tokenEntryOf } from "../auth/authenticate";
import { cachedNamespace, getNamespaceById, namespacesQuery, rememberNamespaces } from "../auth/namespace-store";
import { aclFor } from "../auth/policies";
import type { Acl } from "../auth/acl";
import { cachedToken, rememberToken, tokenByHashQuery, type TokenEntry } from "../auth/token-store";
import { isAuthMount } from "../auth/methods/method";
import type { BatchItem } from "drizzle-orm/batch";
import { ipInCidrs } from "../core/cidr";
import type { Db } from "../core/db/client";
import { BoundedCache } from "../core/bounded-cache";
import { sha256Hex } from "../core/encoding";
import { MAX_NAMESPACE_DEPTH } from "../core/limits";
import { cachedMounts, mountForPathIn, mountsOf, namespaceMountsQuery, rememberMounts, ROOT_NAMESPACE, type MountRow, type NamespaceRef } from "../core/mount-store";
import { generationOf } from "../core/read-cache";
import { matchRoute, type CompiledRoute, type RouteDef } from "../core/route";
import { AUTH_METHODS } from "./auth-methods";
import { BACKEND_ROUTES } from "./backends";
import { MOUNT_ENGINES } from "./engines";

export interface Backend {
  mountType: string;
  routes: CompiledRoute[];
  mount: MountRow | null;
  /** Path relative to the backend (what its route patterns match). */
  relPath: string;
}

export interface Resolved {
  /** The namespace of the path; null when the one asked for does not exist (`wanted`). */
  ns: NamespaceRef | null;
  /** Without `ns`: the path of the namespace asked for, which does not exist ("a/b/"). */
  wanted: string;
  /** The path relative to `ns`. */
  path: string;
  /** The token as sent (or null), valid or not. */
  presented: string | null;
  /**
   * The presented token when it is valid: expiry and uses checked, and used from inside one of
   * its bound CIDR blocks (token_bound_cidrs) if it has any.
   */
  found: TokenEntry | null;
  backend: Backend | null;
  /** The backend's route the path matches, with its parameters. */
  matched: RouteMatch | null;
  def: RouteDef | undefined;
  /**
   * The token's namespace path ("" for root) and ACL, of the valid presented token even when
   * its bound CIDRs refuse it; null without one or when its namespace is gone.
   */
  tokenNs: string | null;
  acl: Acl | null;
  /** The rows of the caller's `alongside` statement, when it rode in the first batch. */
  alongside: unknown;
}

export type RouteMatch = NonNullable<ReturnType<typeof matchRoute>>;

/** The namespace header: `X-Service-Namespace`, or Vault's `X-Vault-Namespace` as an alias. */
export function namespaceHeader(headers: Headers): string | null {
  return headers.get("x-service-namespace") ?? headers.get("x-vault-namespace");
}

/**
 * SHA-256 of presented tokens, per isolate (a pure function of the token: nothing to invalidate).
 * Hashing cost more CPU than the cached lookup it keys (npm run bench profile). At most
 * 4,096 entries, the oldest evicted first; never logged or read out.
 */
const tokenHashes = new BoundedCache<string>("app.tokenHashes", 4096);

async function tokenHashOf(token: string): Promise<string> {
  const hit = tokenHashes.get(token);
  if (hit) return hit;
  const hash = await sha256Hex(token);
  tokenHashes.set(token, hash);
  return hash;
}

/** The namespace paths a request may be in: the header's, then each prefix of the path below it. */
function namespaceCandidates(header: string | null, segs: string[]): { base: string; deeper: string[] } {
  const base = (header ?? "")
    .split("/")
    .filter((s) => s !== "")
    .map((s) => `${s}/`)
    .join("");
  // sys/ and auth/ can never be namespace names, so only the header's namespace is looked up.
  if (segs[0] === "sys" || segs[0] === "auth") return { base, deeper: [] };
  // No namespace nests deeper than MAX_NAMESPACE_DEPTH, so deeper prefixes need no lookup (and
  // every candidate is a bound parameter: D1 allows 100 per statement).
  const deepest = Math.min(segs.length - 1, MAX_NAMESPACE_DEPTH - (base.split("/").length - 1));
  const deeper: string[] = [];
  for (let i = 1; i <= deepest; i++) deeper.push(base + segs.slice(0, i).map((s) => `${s}/`).join(""));
  return { base, deeper };
}

/**
 * The namespace from cached answers: the header's namespace, then the longest chain of existing
 * prefixes below it (a namespace's children sit under its path, so the walk stops at the first
 * prefix that is not a namespace). Undefined when an answer the walk needs is not cached.
 */
function walkNamespaces(base: string, deeper: string[]): { ns: NamespaceRef | null } | undefined {
  const top = cachedNamespace(base);
  if (top === undefined) return undefined;
  if (top === null) return { ns: null };
  let ns = top;
  for (const p of deeper) {
    const next = cachedNamespace(p);
    if (next === undefined) return undefined;
    if (next === null) break;
    ns = next;
  }
  return { ns };
}

/** The built-in backends (sys/, auth/token/, identity/), or null for a path that belongs to a mount. */
export function systemBackend(path: string): Backend | null {
  if (path === "sys" || path.startsWith("sys/")) {
    return { mountType: "system", routes: BACKEND_ROUTES.sys, mount: null, relPath: path.slice(4) };
  }
  if (path === "auth/token" || path.startsWith("auth/token/")) {
    return { mountType: "token", routes: BACKEND_ROUTES.token, mount: null, relPath: path.slice(11) };
  }
  // Vault's identity backend (here: the plugin-identity issuer); "identity" is a reserved mount and namespace name.
  if (path === "identity" || path.startsWith("identity/")) {
    return { mountType: "identity", routes: BACKEND_ROUTES.identity, mount: null, relPath: path.slice(9) };
  }
  return null;
}

function mountBackend(mount: MountRow | null, path: string): Backend | null {
  if (!mount) return null;
  // Auth mounts ("auth/approle/") are served by their auth method, secrets mounts by their engine.
  const engine = isAuthMount(mount) ? AUTH_METHODS[mount.type] : MOUNT_ENGINES[mount.type];
  if (!engine) return null;
  return { mountType: mount.type, routes: engine.routes, mount, relPath: path.slice(mount.path.length) };
}

/** Path of the namespace a token belongs to; null when that namespace is gone. */
async function tokenNamespacePath(db: Db, token: TokenEntry): Promise<string | null> {
  if (token.configuredRoot || token.namespaceId === ROOT_NAMESPACE.id) return "";
  return (await getNamespaceById(db, token.namespaceId))?.path ?? null;
}

/**
 * Resolves a request from its headers (namespace header, token, client address) and its path
 * segments. The configured root token is compared in constant time and never looked up.
 * `alongside` is one more statement for the first D1 batch (the dispatcher's audit device list
 * when the isolate's copy is stale), so the caller's read costs no round trip of its own; its
 * rows come back in `alongside`. It alone forces the batch when nothing else missed.
 */
export async function resolveRequest(db: Db, rootToken: string, headers: Headers, segs: string[], alongside: BatchItem<"sqlite"> | null): Promise<Resolved> {
  const now = Date.now();
  const presented = presentedToken(headers);
  const { base, deeper } = namespaceCandidates(namespaceHeader(headers), segs);
  const root = presented !== null && presented !== "" && isRootToken(rootToken, presented);
  const tokenHash = presented && !root ? await tokenHashOf(presented) : "";

  // What the read model already knows; each miss becomes one statement of one batch.
  let walked = walkNamespaces(base, deeper);
  let tokenRow = tokenHash ? cachedToken(tokenHash, now) : undefined;
  let alongsideRows: unknown;
  const wantRootMounts = base === "" && systemBackend(segs.join("/")) === null && cachedMounts(ROOT_NAMESPACE.id) === undefined;
  const nsPaths = walked === undefined ? [base, ...deeper].filter((p) => p !== "") : [];
  const needToken = tokenHash !== "" && tokenRow === undefined;
  if (nsPaths.length > 0 || needToken || wantRootMounts || alongside) {
    const gens = { ns: generationOf("namespaces"), tokens: generationOf("tokens"), mounts: generationOf("mounts") };
    // Empty lists and an empty hash make the unneeded parts of the batch match nothing.
    const [nsRows, tokenRows, mountRows, ...extra] = await db.batch([
      namespacesQuery(db, nsPaths),
      tokenByHashQuery(db, needToken ? tokenHash : ""),
      namespaceMountsQuery(db, wantRootMounts ? ROOT_NAMESPACE.id : ""),
      ...(alongside ? [alongside] : []),
    ]);
    alongsideRows = extra[0];
    if (nsPaths.length > 0) {
      rememberNamespaces(nsPaths, nsRows, now, gens.ns);
      walked = walkFrom(base, deeper, nsRows);
    }
    if (needToken) {
      tokenRow = tokenRows[0];
      rememberToken(tokenRow, now, gens.tokens);
    }
    if (wantRootMounts) rememberMounts(ROOT_NAMESPACE.id, mountRows, now, gens.mounts);
  }
  const valid = root && presented ? rootEntry(presented) : tokenHash && presented ? tokenEntryOf(tokenRow, presented, now) : null;

  const ns = walked?.ns ?? null;
  const used = ns ? ns.path.slice(base.length).split("/").filter((s) => s !== "").length : 0;
  const path = segs.slice(used).join("/");
  const [backend, tokenNs, acl] = await Promise.all([
    ns ? backendFor(db, ns, path) : Promise.resolve(null),
    valid ? tokenNamespacePath(db, valid) : Promise.resolve(null),
    valid ? aclFor(db, valid.namespaceId, valid.policies) : Promise.resolve(null),
  ]);
  // A token bound to CIDR blocks is no token at all from anywhere else.
  const found = valid && fromBoundAddress(valid, headers) ? valid : null;
  const matched = backend ? matchRoute(backend.routes, backend.relPath) : null;
  return { ns, wanted: base, path, presented, found, backend, matched, def: matched?.route.def, tokenNs, acl, alongside: alongsideRows };
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

/** The walk of walkNamespaces over freshly read rows (the root namespace is never a row). */
function walkFrom(base: string, deeper: string[], rows: NamespaceRef[]): { ns: NamespaceRef | null } {
  const byPath = new Map(rows.map((r) => [r.path, r]));
  const top = base === "" ? ROOT_NAMESPACE : byPath.get(base);
  if (!top) return { ns: null };
  let ns = top;
  for (const p of deeper) {
    const next = byPath.get(p);
    if (!next) break;
    ns = next;
  }
  return { ns };
}

async function backendFor(db: Db, ns: NamespaceRef, path: string): Promise<Backend | null> {
  return systemBackend(path) ?? mountBackend(mountForPathIn(await mountsOf(db, ns.id), path), path);
}
