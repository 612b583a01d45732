/**
 * Built-in policies and the ACL of a token. `root` is not a text policy: it grants everything and
 * cannot be changed or deleted. `default` has a built-in text (the engine's default policy,
 * trimmed to the paths Lanyard has) that may be overwritten per namespace but not deleted.
 */
import type { Db } from "../core/db/client";
import { buildAcl, type Acl } from "./acl";
import { parsePolicy, type ParsedPolicy } from "./policy-parser";
import { getPolicies } from "./policy-store";
import { generationOf, ReadCache } from "../core/read-cache";
import { BoundedCache } from "../core/bounded-cache";

export const DEFAULT_POLICY_TEXT = `# Allow tokens to look up their own properties
path "auth/token/lookup-self" {
    capabilities = ["read"]
}

# Allow tokens to renew themselves
path "auth/token/renew-self" {
    capabilities = ["update"]
}

# Allow tokens to revoke themselves
path "auth/token/revoke-self" {
    capabilities = ["update"]
}

# Allow a token to look up its own capabilities on a path
path "sys/capabilities-self" {
    capabilities = ["update"]
}
`;

// Parsed policies keyed by their text: immutable, so sharing them across requests is safe.
const parsedCache = new BoundedCache<ParsedPolicy>("policies.parsed", 512);

/**
 * A stored policy as the ACL uses it. Identity-templated rules (refused at write since, but
 * possibly stored earlier) are left out, as Vault leaves out a path whose template it cannot fill
 * in: matched literally they would grant one shared path to every holder (./policy-parser.ts).
 */
export function parseCached(text: string): ParsedPolicy {
  let p = parsedCache.get(text);
  if (!p) {
    p = parsePolicy(text, { templatedPaths: "skip" });
    parsedCache.set(text, p);
  }
  return p;
}

/**
 * ACLs by namespace and policy names, per isolate. Bounded by CACHE_TTL_MS
 * (src/core/read-cache.ts): a policy narrowed by another isolate applies within it; every policy
 * write (policy-store.ts) invalidates "policies" in this isolate, so its own changes apply at once.
 * An Acl is never changed after buildAcl, so requests can share one.
 */
const acls = new ReadCache<Acl>("policies.acls", "policies", 2048, {
  // Early re-reads in the background (src/core/read-cache.ts); the key is nsId and sorted names.
  reload: (db, key) => {
    const [nsId = "", ...names] = key.split("\n");
    return readAcl(db, nsId, names);
  },
});
const ROOT_ACL = buildAcl([], true);

/** The ACL of a set of policy names in a namespace. Unknown names contribute nothing. */
export async function aclFor(db: Db, nsId: string, names: string[]): Promise<Acl> {
  if (names.includes("root")) return ROOT_ACL;
  const key = `${nsId}\n${[...names].sort().join("\n")}`;
  const hit = acls.get(key);
  if (hit) return hit;
  const readAt = Date.now();
  const gen = generationOf("policies");
  const acl = await readAcl(db, nsId, names);
  acls.set(key, acl, readAt, gen);
  return acl;
}

/** The ACL of policy names in a namespace, read from D1 (no cache). */
async function readAcl(db: Db, nsId: string, names: string[]): Promise<Acl> {
  const rows = await getPolicies(db, nsId, names);
  const texts = rows.map((r) => r.text);
  if (names.includes("default") && !rows.some((r) => r.name === "default")) texts.push(DEFAULT_POLICY_TEXT);
  return buildAcl(texts.map((t) => parseCached(t).rules));
}
