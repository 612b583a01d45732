/**
 * Mount and namespace lifecycles under concurrency. D1 has no
 * interactive transactions, so nothing here reads, decides and then writes as one unit; every
 * guarantee rests on single statements (or one batch) that SQLite runs atomically, and on the
 * triggers of migrations/0006_lifecycle_states.sql, which every writer goes through whether it
 * knows about them or not.
 *
 * INVARIANTS
 * 1. Creation is atomic. A mount is inserted by one INSERT … SELECT … WHERE NOT EXISTS that
 *    refuses any mount of the namespace whose path is a prefix of the new one or has the new
 *    one as a prefix (paths end in "/", so prefixes are whole segments), and any child
 *    namespace named like its first segment; a namespace is inserted by the mirror image (no
 *    namespace at the path, no mount of the parent under that first segment). Of concurrent
 *    conflicting creates exactly one inserts; the others insert nothing and answer 400 naming
 *    what is in the way, never 500.
 * 2. A mount's rows never outlive it. Disabling runs, in this order:
 *      a. mark the mount "disabling" (one UPDATE);
 *      b. unsync its secrets' sync associations (KV);
 *      c. purge every engine row with its mount id, and the Authority's state (PKI);
 *      d. delete the mount row.
 *    From (a) on, the triggers abort every INSERT or UPDATE of a row of kv_* and pki_* for the
 *    mount, and every new sync association for it, with "mount is being disabled" (409). A
 *    write is one statement or one batch, so it commits either before (a), and then (c)
 *    deletes it, or after (a), and then it aborts as a whole. (c) and (d) delete by mount id
 *    only and are idempotent: a disable that fails part-way leaves the mount "disabling"
 *    (still refusing writes, its path still taken) and repeating the DELETE finishes it.
 *    Sync associations are the one exception to "no row outlives the mount": (b) turns them
 *    into removals that the sync engine carries out at the provider afterwards.
 * 3. A namespace's rows never outlive it. Deleting marks the namespace "deleting" with one
 *    UPDATE whose WHERE requires it to be empty (no child namespace, no mount, no row of a
 *    table an engine declares in `namespaceTables` of ./engine.ts: sync destinations and
 *    repohost apps), so the emptiness test and the mark are one atomic step. From then on the
 *    triggers abort every new mount, child namespace, policy, token, sync destination, app or
 *    association in it with "namespace is being deleted" (409); nothing can make it non-empty
 *    again, so its policies, tokens and sync tombstones are purged and its row deleted without
 *    a race, and a retried DELETE finishes an interrupted one.
 * 4. A row can never be created for a mount or namespace that does not exist (the same
 *    triggers): a writer that resolved its mount before the mount was removed gets 409.
 *
 * The triggers live in the database, not in Drizzle's schema: a migration that rebuilds one of
 * the guarded tables must create its triggers again (migrations/0006_lifecycle_states.sql).
 * The Authority Durable Object is outside D1: a serial reservation or tidy start that reaches
 * it after its purge leaves that (non-secret) state behind in the object.
 */
import { ApiError } from "./errors";

/** The RAISE messages of migrations/0006_lifecycle_states.sql, word for word. */
export const MOUNT_DISABLING = "mount is being disabled";
export const NAMESPACE_DELETING = "namespace is being deleted";

/** The messages of an error and of its causes (D1 and Drizzle wrap the SQLite message). */
function messagesOf(err: unknown): string[] {
  const out: string[] = [];
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) out.push(e.message);
  return out;
}

/**
 * The 409 for a write that a lifecycle trigger aborted, or null for any other error. Matching
 * the message is the only way: D1 reports a RAISE(ABORT) as a constraint error with its text.
 */
export function lifecycleConflict(err: unknown): ApiError | null {
  for (const m of messagesOf(err)) {
    if (m.includes(MOUNT_DISABLING)) return new ApiError(409, MOUNT_DISABLING);
    if (m.includes(NAMESPACE_DELETING)) return new ApiError(409, NAMESPACE_DELETING);
  }
  return null;
}

export function isUniqueViolation(err: unknown): boolean {
  return messagesOf(err).some((m) => /UNIQUE constraint failed/i.test(m));
}
