/**
 * Destination writes, reads and deletes (Vault API: /v1/sys/sync; Vault API: read a destination–1.8), independent of
 * HTTP: the routes (../routes/destinations.ts) only translate requests into these calls.
 *
 * POST is create-or-full-update: the body is the whole definition, absent fields take their
 * defaults, except immutable ones, which keep their stored value when absent. PATCH is a
 * partial update (a JSON merge patch: absent fields stay, null resets a field to its default,
 * custom tags merge and `tags_to_remove` removes some). Every rule is checked before anything
 * is stored, and a failed check stores nothing.
 */
import type { SealKeys } from "../../../core/db/seal";
import type { Db } from "../../../core/db/client";
import { badRequest, notFound } from "../../../core/errors";
import type { NamespaceRef } from "../../../core/mount-store";
import {
  appExists,
  countAssociations,
  deleteDestinationIfUnassociated,
  destinationExists,
  getDestination,
  insertDestination,
  updateDestination,
  type DestinationKey,
  type DestinationOptions,
  type DestinationRecord,
} from "../store";
import { deleteOrphanTombstones } from "../association-store";
import { effectiveTemplate, isGranularity, validateTags, validateTemplate } from "./options";
import { OBFUSCATED, invalid, type Connection, type ConnectionValue, type DestinationDef } from "./types";

export interface WriteRequest {
  db: Db;
  keys: SealKeys;
  env: Env;
  ns: NamespaceRef;
  def: DestinationDef;
  name: string;
  /** Coerced field values (defaults applied for absent fields). */
  fields: Record<string, unknown>;
  has(name: string): boolean;
  /** The raw body: a merge patch's nulls are only visible here. */
  body: Record<string, unknown>;
  warnings: string[];
}

function connectionValue(field: string, v: unknown): ConnectionValue {
  if (typeof v === "string") return v;
  if (Array.isArray(v) && v.every((x) => typeof x === "string")) return v;
  if (v === undefined) return "";
  throw invalid(field, "has an unexpected type");
}

function sameValue(a: ConnectionValue | undefined, b: ConnectionValue | undefined): boolean {
  return JSON.stringify(a ?? "") === JSON.stringify(b ?? "");
}

function purgeRefusal(rec: DestinationRecord): Error {
  return badRequest(`destination "${rec.type}/${rec.name}" is being purged and cannot be changed`);
}

/** Connection details of a POST: the body with defaults; immutable fields keep their value. */
function connectionForWrite(w: WriteRequest, existing: DestinationRecord | null): Connection {
  const conn: Connection = {};
  for (const name of Object.keys(w.def.fields)) {
    const keep = existing && w.def.immutable.includes(name) && !w.has(name);
    conn[name] = keep ? (existing.connection[name] ?? "") : connectionValue(name, w.fields[name]);
  }
  return conn;
}

/** Connection details of a PATCH: the stored ones with the sent members merged in. */
function connectionForPatch(w: WriteRequest, existing: DestinationRecord): Connection {
  let conn: Connection = { ...existing.connection };
  const sent = new Set<string>();
  for (const [name, decl] of Object.entries(w.def.fields)) {
    if (w.has(name)) {
      conn[name] = connectionValue(name, w.fields[name]);
      sent.add(name);
    } else if (w.body[name] === null) {
      if (decl.required) throw invalid(name, "is required and cannot be removed");
      conn[name] = connectionValue(name, decl.default);
      sent.add(name);
    }
  }
  if (w.def.afterMerge) conn = w.def.afterMerge(conn, sent);
  return conn;
}

function stringField(w: WriteRequest, name: string): string {
  const v = w.fields[name];
  return typeof v === "string" ? v : "";
}

function optionsForWrite(w: WriteRequest): DestinationOptions {
  const g = stringField(w, "granularity");
  if (w.has("tags_to_remove")) w.warnings.push("tags_to_remove is only used by PATCH; it was ignored");
  const tags = w.fields.custom_tags;
  return {
    granularity: isGranularity(g) ? g : w.def.defaultGranularity,
    secretNameTemplate: stringField(w, "secret_name_template"),
    customTags: validateTags(w.def, typeof tags === "object" && tags !== null ? (tags as Record<string, unknown>) : {}),
    driftRepair: w.fields.drift_repair !== false,
  };
}

function optionsForPatch(w: WriteRequest, existing: DestinationOptions): DestinationOptions {
  const out: DestinationOptions = { ...existing, customTags: { ...existing.customTags } };
  const g = stringField(w, "granularity");
  if (w.has("granularity") && isGranularity(g)) out.granularity = g;
  else if (w.body.granularity === null) out.granularity = w.def.defaultGranularity;
  if (w.has("secret_name_template")) out.secretNameTemplate = stringField(w, "secret_name_template");
  else if (w.body.secret_name_template === null) out.secretNameTemplate = "";
  if (w.has("drift_repair")) out.driftRepair = w.fields.drift_repair !== false;
  else if (w.body.drift_repair === null) out.driftRepair = true;
  if (!w.def.tags) return out;
  // Tags merge (Vault API: patch a destination): a null value removes a tag, and tags_to_remove removes more.
  const merged: Record<string, unknown> = { ...out.customTags };
  const sent = w.fields.custom_tags;
  if (w.has("custom_tags") && typeof sent === "object" && sent !== null) {
    for (const [k, v] of Object.entries(sent)) {
      if (v === null) delete merged[k];
      else merged[k] = v;
    }
  } else if (w.body.custom_tags === null) {
    for (const k of Object.keys(merged)) delete merged[k];
  }
  const remove = w.fields.tags_to_remove;
  if (Array.isArray(remove)) for (const k of remove) if (typeof k === "string") delete merged[k];
  out.customTags = validateTags(w.def, merged);
  return out;
}

/** Creates or updates a destination; returns what was stored. */
export async function writeDestination(w: WriteRequest, mode: "write" | "patch"): Promise<DestinationRecord> {
  const key: DestinationKey = { namespaceId: w.ns.id, type: w.def.type, name: w.name };
  const existing = await getDestination(w.db, w.keys, key);
  if (mode === "patch" && !existing) throw notFound();
  if (existing?.purgeInitiatedAt != null) throw purgeRefusal(existing);

  const draft = mode === "patch" && existing ? connectionForPatch(w, existing) : connectionForWrite(w, existing);
  const options = mode === "patch" && existing ? optionsForPatch(w, existing.options) : optionsForWrite(w);
  const connection = await w.def.validate(draft, {
    env: w.env,
    previous: existing?.connection ?? null,
    appExists: (app) => appExists(w.db, w.ns.id, app),
  });
  if (existing) {
    for (const name of w.def.immutable) {
      if (!sameValue(connection[name], existing.connection[name])) throw invalid(name, "cannot be changed after the destination is created");
    }
  }
  await validateTemplate(w.def, options, {
    destinationType: w.def.type,
    destinationName: w.name,
    namespacePath: w.ns.path,
    namespaceId: w.ns.id,
  });

  const rec = { ...key, connection, options };
  if (!existing) {
    if (!(await insertDestination(w.db, w.keys, rec, w.def.sensitive))) {
      throw badRequest(`destination "${key.type}/${key.name}" was created by another request meanwhile; retry`);
    }
  } else if (!(await updateDestination(w.db, w.keys, rec, w.def.sensitive, existing.version))) {
    const now = await getDestination(w.db, w.keys, key);
    if (now?.purgeInitiatedAt != null) throw purgeRefusal(now);
    throw badRequest(`destination "${key.type}/${key.name}" was changed by another request meanwhile; retry`);
  }
  const stored = await getDestination(w.db, w.keys, key);
  if (!stored) throw notFound();
  return stored;
}

/**
 * Deletes a destination (Vault API: delete a destination, purge). With associations it is refused unless `purge`; with
 * purge the answer is "purge" and the caller hands the job to the engine (../operations.ts
 * requestPurge), which records `purge_initiated_at` and finishes asynchronously.
 */
export async function deleteDestination(db: Db, key: DestinationKey, purge: boolean): Promise<"done" | "purge"> {
  if (!(await destinationExists(db, key))) return "done";
  if (await deleteDestinationIfUnassociated(db, key)) {
    await deleteOrphanTombstones(db, key);
    return "done";
  }
  const n = await countAssociations(db, key);
  if (n === 0) return "done"; // deleted by a concurrent request
  if (!purge) {
    throw badRequest(
      `destination "${key.type}/${key.name}" cannot be deleted because it is still managing secrets (${n} association${n === 1 ? "" : "s"}); ` +
        "remove the associations first, or delete with purge=true to unsync them and then delete it",
    );
  }
  return "purge";
}

/** The read form (spec "Destination (read form)"; Vault API: read a destination). Never contains a credential. */
export function destinationView(def: DestinationDef, rec: DestinationRecord): Record<string, unknown> {
  let details: Record<string, unknown>;
  if (def.view) {
    details = def.view(rec.connection);
  } else {
    details = {};
    for (const name of Object.keys(def.fields)) {
      const v = rec.connection[name] ?? "";
      details[name] = def.sensitive.includes(name) ? (v === "" ? "" : OBFUSCATED) : v;
    }
  }
  const out: Record<string, unknown> = {
    type: rec.type,
    name: rec.name,
    connection_details: details,
    options: {
      granularity_level: rec.options.granularity,
      secret_name_template: effectiveTemplate(def, rec.options),
      custom_tags: rec.options.customTags,
      drift_repair: rec.options.driftRepair,
    },
  };
  if (rec.purgeInitiatedAt != null) {
    out.purge_initiated_at = new Date(rec.purgeInitiatedAt).toISOString();
    if (rec.purgeError) out.purge_error = rec.purgeError;
  }
  return out;
}
