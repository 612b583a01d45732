/**
 * The capability check, run in one place (src/app/dispatch.ts) for every request.
 *
 * Rules from all of a token's policies are merged by their path text (capabilities unite). For a
 * request path the single most specific matching rule decides, following the engine's priority
 * order: exact paths first; then, between two patterns, the one whose first wildcard (`+`) or
 * glob (`*`) comes later wins, then the one not ending in `*`, then the one with fewer `+`
 * segments, then the longer one, then the lexically greater one. `deny` in the deciding rule
 * removes every capability. `sudo` is needed on top of the operation's own capability for
 * root-protected paths.
 */
import type { Capability, PathRule } from "./policy-parser";

import type { Operation } from "../core/caller";

export type { Operation };

interface CompiledRule {
  path: string;
  caps: Set<Capability>;
  glob: boolean;
  /** Prefix before a trailing `*` (or the whole path), split in segments for `+` matching. */
  segments: string[];
  firstWildcard: number;
  plusCount: number;
}

export interface Acl {
  root: boolean;
  exact: Map<string, CompiledRule>;
  patterns: CompiledRule[];
}

function compile(path: string, caps: Set<Capability>): CompiledRule {
  const glob = path.endsWith("*");
  const body = glob ? path.slice(0, -1) : path;
  const segments = body.split("/");
  const plusIdx = body.split("").findIndex((_, i) => body[i] === "+" && (i === 0 || body[i - 1] === "/"));
  const globIdx = glob ? path.length - 1 : -1;
  const candidates = [plusIdx, globIdx].filter((i) => i >= 0);
  return {
    path,
    caps,
    glob,
    segments,
    firstWildcard: candidates.length ? Math.min(...candidates) : Number.MAX_SAFE_INTEGER,
    plusCount: segments.filter((s) => s === "+").length,
  };
}

/** Builds the ACL of a set of parsed policies. `root` grants everything. */
export function buildAcl(ruleSets: PathRule[][], root = false): Acl {
  const merged = new Map<string, Set<Capability>>();
  for (const rules of ruleSets) {
    for (const r of rules) {
      const caps = merged.get(r.path) ?? new Set<Capability>();
      for (const c of r.capabilities) caps.add(c);
      merged.set(r.path, caps);
    }
  }
  const exact = new Map<string, CompiledRule>();
  const patterns: CompiledRule[] = [];
  for (const [path, caps] of merged) {
    const rule = compile(path, caps);
    if (!rule.glob && rule.plusCount === 0) exact.set(path, rule);
    else patterns.push(rule);
  }
  return { root, exact, patterns };
}

function matches(rule: CompiledRule, path: string): boolean {
  const parts = path.split("/");
  if (rule.glob) {
    // Every segment but the last must match fully; the last is a string prefix.
    if (parts.length < rule.segments.length) return false;
    for (let i = 0; i < rule.segments.length; i++) {
      const want = rule.segments[i] as string;
      const got = parts[i] as string;
      const last = i === rule.segments.length - 1;
      if (want === "+" && !last) continue;
      if (want === "+" && last) {
        // "+*" style: a wildcard segment followed by the glob matches any segment.
        continue;
      }
      if (last ? !got.startsWith(want) : got !== want) return false;
    }
    return true;
  }
  if (parts.length !== rule.segments.length) return false;
  return rule.segments.every((want, i) => want === "+" || want === parts[i]);
}

/** True when rule `a` has higher priority than rule `b` (engine's path-priority order). */
function higher(a: CompiledRule, b: CompiledRule): boolean {
  if (a.firstWildcard !== b.firstWildcard) return a.firstWildcard > b.firstWildcard;
  if (a.glob !== b.glob) return !a.glob;
  if (a.plusCount !== b.plusCount) return a.plusCount < b.plusCount;
  if (a.path.length !== b.path.length) return a.path.length > b.path.length;
  return a.path > b.path;
}

/** The capabilities the ACL grants on a path (an empty set when nothing matches or deny wins). */
export function capabilitiesFor(acl: Acl, path: string): Set<Capability> {
  if (acl.root) return new Set<Capability>(["create", "read", "update", "patch", "delete", "list", "sudo"]);
  // A list request's path ends in "/"; an exact rule written without the slash matches it too,
  // as upstream does (`path "auth/token/accessors" { capabilities = ["list", "sudo"] }`).
  let best = acl.exact.get(path) ?? (path.endsWith("/") ? acl.exact.get(path.slice(0, -1)) : undefined);
  if (!best) {
    for (const rule of acl.patterns) {
      if (matches(rule, path) && (!best || higher(rule, best))) best = rule;
    }
  }
  if (!best || best.caps.has("deny")) return new Set();
  // A copy: ACLs are cached and shared between requests (src/auth/policies.ts).
  return new Set(best.caps);
}

/** Whether the ACL allows `op` on `path` (and sudo when the path is root-protected). */
export function isAllowed(acl: Acl, path: string, op: Operation, needsSudo: boolean): boolean {
  const caps = capabilitiesFor(acl, path);
  if (!caps.has(op)) return false;
  return !needsSudo || caps.has("sudo");
}

/**
 * What a token's policies see for a path of namespace `nsPath`: policies are written relative to
 * the token's own namespace, so a root-namespace token's rule `team1/secret/*` governs team1's
 * `secret/…`. The caller has already checked that `nsPath` is at or below `tokenNsPath`.
 */
export function nsRelativePath(tokenNsPath: string, nsPath: string, path: string): string {
  return nsPath.slice(tokenNsPath.length) + path;
}
