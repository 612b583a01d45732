/**
 * sys/namespaces: child namespaces of the request's namespace. A namespace is deleted only when it
 * is empty: no child namespaces, no mounts, and nothing an engine keeps in it (its
 * `namespaceTables`: sync destinations and repohost apps); its policies, tokens and finished
 * sync removals go with it.
 *
 * Concurrency (invariants 1 and 3 of src/core/lifecycle.ts): a create is one conditional INSERT, so
 * racing creates of one name make one row (the others answer as for an existing namespace); a
 * delete marks the namespace "deleting" in the same statement that checks it is empty, and only
 * then purges, so anything written into it concurrently either lands first (and is purged, or
 * keeps the namespace alive and the delete answers 400) or is refused with 409.
 */
import {
  deleteNamespaceRow,
  getNamespaceById,
  getNamespaceByPath,
  insertNamespaceIfFree,
  listChildNamespaces,
  markNamespaceDeletingIfEmpty,
  updateNamespaceMetadata,
  type NamespaceRow,
} from "../../auth/namespace-store";
import { deleteNamespacePolicies } from "../../auth/policy-store";
import { revokeNamespaceTokens } from "../../auth/token-store";
import { deleteNamespaceTokenRoles } from "../../auth/token-role-store";
import { ApiError, badRequest, notFound } from "../../core/errors";
import { defineFields } from "../../core/fields";
import { route, type Req } from "../../core/route";
import { MAX_NAMESPACE_DEPTH } from "../../core/limits";
import { deleteNamespaceLeases } from "../../core/lease-store";
import { NAMESPACE_DELETING } from "../../core/lifecycle";
import { countMountsInNamespace, mountUnder } from "../../core/mount-store";
import { trimEndChar } from "../../core/text";
import { ENGINES, NAMESPACE_TABLES } from "../engines";

const RESERVED = new Set(["root", "sys", "auth", "identity", "cubbyhole"]);
const ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

function newNamespaceId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return [...bytes].map((b) => ID_ALPHABET[b % ID_ALPHABET.length]).join("");
}

function childPath(req: Req, raw: string): string {
  const name = trimEndChar(raw, "/");
  if (name.includes("/")) {
    throw badRequest(`path: "${raw}" has more than one segment; create nested namespaces from their parent namespace`);
  }
  if (!/^\w(?:[\w-]*\w)?$/.test(name)) throw badRequest(`path: invalid namespace name "${raw}"`);
  if (RESERVED.has(name)) throw badRequest(`path: "${name}" is a reserved name`);
  return `${req.ns.path}${name}/`;
}

function stringMap(raw: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(raw)) {
    if (typeof v !== "string") throw badRequest(`custom_metadata: the value of "${k}" must be a string`);
    out[k] = v;
  }
  return out;
}

function view(row: NamespaceRow): Record<string, unknown> {
  return { id: row.id, path: row.path, custom_metadata: row.customMetadata };
}

/** What a create answers when the namespace is already there (also when a concurrent create won). */
function existingAnswer(req: Req, existing: NamespaceRow): { data: Record<string, unknown> } {
  if (existing.state !== "active") throw new ApiError(409, NAMESPACE_DELETING);
  if (req.has("custom_metadata")) throw badRequest(`namespace "${existing.path}" already exists; use PATCH to change its metadata`);
  return { data: view(existing) };
}

/** Throws the 400 that says why a namespace cannot be deleted; returns when it is empty. */
async function refuseUnlessEmpty(req: Req, row: NamespaceRow): Promise<void> {
  if ((await listChildNamespaces(req.db, row.id)).length > 0) {
    throw badRequest(`namespace "${row.path}" has child namespaces; delete them first`);
  }
  if ((await countMountsInNamespace(req.db, row.id)) > 0) {
    throw badRequest(`namespace "${row.path}" has mounts; disable them first`);
  }
  for (const e of ENGINES) {
    const left = await e.namespaceLeftovers?.(req.db, row.id);
    if (left) throw badRequest(`namespace "${row.path}" has ${left}; delete them first`);
  }
}

const fields = defineFields({
  path: { type: "string", description: "Name of the child namespace.", required: true },
  // A map, not a string map: PATCH sends null to remove a key (RFC 7386).
  custom_metadata: { type: "map", description: "Arbitrary string metadata." },
});

export const namespaceRoutes = [
  route({
    pattern: "namespaces",
    handlers: {
      async list(req) {
        const rows = await listChildNamespaces(req.db, req.ns.id);
        if (rows.length === 0) throw notFound();
        const keys = rows.map((r) => r.path.slice(req.ns.path.length));
        const keyInfo = Object.fromEntries(rows.map((r, i) => [keys[i], view(r)]));
        return { data: { keys, key_info: keyInfo } };
      },
    },
  }),
  route({
    pattern: "namespaces/*path",
    fields,
    handlers: {
      async read(req) {
        const row = await getNamespaceByPath(req.db, childPath(req, req.fields.path));
        if (!row) throw notFound();
        return { data: view(row) };
      },
      async update(req) {
        const path = childPath(req, req.fields.path);
        // The dispatcher looks namespaces up only this deep (src/app/dispatch.ts firstRound).
        if (path.split("/").length - 1 > MAX_NAMESPACE_DEPTH) throw badRequest(`path: namespaces nest at most ${MAX_NAMESPACE_DEPTH} levels deep`);
        const existing = await getNamespaceByPath(req.db, path);
        if (existing) return existingAnswer(req, existing);
        const name = path.slice(req.ns.path.length);
        const row: NamespaceRow = {
          id: newNamespaceId(),
          path,
          parentId: req.ns.id,
          customMetadata: stringMap(req.fields.custom_metadata ?? {}),
          createdAt: Date.now(),
          state: "active",
        };
        // The conditional insert is the check (lifecycle.ts invariant 1); the reads below only
        // explain a refusal, and find nothing only when the obstacle went away meanwhile.
        for (let attempt = 0; attempt < 3; attempt++) {
          if (await insertNamespaceIfFree(req.db, row, name)) return { data: view(row) };
          const winner = await getNamespaceByPath(req.db, path);
          if (winner) return existingAnswer(req, winner);
          // A path prefix selects a namespace, so a mount under the same first segment would be shadowed.
          const clash = await mountUnder(req.db, req.ns.id, name);
          if (clash) throw badRequest(`path: a mount already uses "${clash.path}" in this namespace`);
        }
        throw new ApiError(409, `namespace "${path}": concurrent changes; try again`);
      },
      async patch(req) {
        const path = childPath(req, req.fields.path);
        const row = await getNamespaceByPath(req.db, path);
        if (!row) throw notFound();
        const merged: Record<string, string> = { ...row.customMetadata };
        for (const [k, v] of Object.entries(req.fields.custom_metadata ?? {})) {
          if (v === null) delete merged[k];
          else merged[k] = stringMap({ [k]: v })[k] as string;
        }
        await updateNamespaceMetadata(req.db, row.id, merged);
        return { data: view({ ...row, customMetadata: merged }) };
      },
      async delete(req) {
        const row = await getNamespaceByPath(req.db, childPath(req, req.fields.path));
        if (!row) return null;
        await refuseUnlessEmpty(req, row);
        // The emptiness check that counts is the one in the same statement as the mark; the one
        // above only words the usual refusal. Something created in between is caught here.
        for (let attempt = 0; !(await markNamespaceDeletingIfEmpty(req.db, row.id, NAMESPACE_TABLES)); attempt++) {
          // Not marked: it was not empty at that instant, or a concurrent delete removed it.
          if (!(await getNamespaceById(req.db, row.id))) return null;
          await refuseUnlessEmpty(req, row);
          if (attempt === 2) throw new ApiError(409, `namespace "${row.path}": concurrent changes; try again`);
        }
        // From the mark on nothing new can enter the namespace (lifecycle.ts invariant 3), so these
        // purges miss nothing; each is idempotent, so a retried DELETE finishes an interrupted one.
        for (const e of ENGINES) await e.purgeNamespace?.(req.db, row.id);
        // Leases go with their mounts, which are all disabled by now; this only sweeps leftovers.
        await deleteNamespaceLeases(req.db, [row.id]);
        await deleteNamespacePolicies(req.db, [row.id]);
        await deleteNamespaceTokenRoles(req.db, [row.id]);
        await revokeNamespaceTokens(req.db, [row.id]);
        await deleteNamespaceRow(req.db, row.id);
        return null;
      },
    },
  }),
];
