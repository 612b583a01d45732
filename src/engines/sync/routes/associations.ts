/**
 * Associations (Vault API: /v1/sys/sync; Vault API: /v1/sys/sync/destinations/:type/:name/associations, Vault docs: secrets sync policies): per destination (read, set, remove)
 * and per secret (list, read by path, read by query). Thin: resolution and shapes here, the
 * engine's work in ../operations.ts.
 */
import { ApiError, badRequest, notFound } from "../../../core/errors";
import { defineFields } from "../../../core/fields";
import { route, type Req, type RouteDef } from "../../../core/route";
import * as kvStore from "../../kv";
import { findMountForPath, getMount, type MountRow } from "../../../core/mount-store";
import { associationsOfDestination, associationsOfNamespace, findAssociationByStoredMount, type Association, type Link } from "../association-store";
import type { DestinationType } from "../destinations/types";
import { findProvider } from "../providers/registry";
import { removeAssociation, setAssociation } from "../operations";
import { destinationExists, getDestination } from "../store";
import { loadConfig } from "../../../core/config";
import { trimChar } from "../../../core/text";
import { engineDeps } from "./deps";

const rfc3339 = (ms: number): string => new Date(ms).toISOString();
const timeOrEmpty = (ms: number | null): string => (ms === null ? "" : rfc3339(ms));

/**
 * What every association read shows about its last attempts (docs/secrets-sync.md "3. Drift is detected and repaired" and "5. Failures are visible"), whatever
 * the status: Vault's reads show only `sync_status` and `updated_at`, which hides why a secret is
 * not at the destination and when it will be tried again. `last_error` is a provider code and
 * message or a Lanyard message, never a value ("" when the last attempt succeeded).
 */
function attemptFields(a: Association): Record<string, unknown> {
  return {
    last_error: a.lastError ?? "",
    last_attempt_at: timeOrEmpty(a.lastAttemptAt),
    attempts: a.attempts,
    next_retry_at: timeOrEmpty(a.nextRetryAt),
    dead_letter: a.deadLetteredAt !== null,
    dead_lettered_at: timeOrEmpty(a.deadLetteredAt),
    drift_detected_at: timeOrEmpty(a.driftDetectedAt),
    drift_count: a.driftCount,
  };
}

/**
 * The entries of one association in `associated_secrets`: one per external secret under
 * secret-key granularity (key `<accessor>/<secret>/<sub_key>`), else one.
 */
function associationEntries(a: Association): Record<string, Record<string, unknown>> {
  const base = { accessor: a.mountAccessor, mount: a.mountPath.replace(/\/$/, ""), secret_name: a.secretName };
  const error = attemptFields(a);
  const subKeys = Object.keys(a.external).filter((k) => k !== "" && !k.includes("\u0000"));
  const out: Record<string, Record<string, unknown>> = {};
  if (subKeys.length === 0) {
    out[`${a.mountAccessor}/${a.secretName}`] = { ...base, sync_status: a.status, updated_at: rfc3339(a.updatedAt), ...error };
    return out;
  }
  for (const k of subKeys.sort()) {
    const e = a.external[k];
    if (!e) continue;
    // A settled association shows each key's own result; otherwise the in-flight or failed status.
    const settled = a.status === "SYNCED";
    out[`${a.mountAccessor}/${a.secretName}/${k}`] = {
      ...base,
      sub_key: k,
      sync_status: settled ? e.status : a.status,
      updated_at: rfc3339(settled ? e.updatedAt : a.updatedAt),
      ...error,
    };
  }
  return out;
}

function destinationKey(req: Req) {
  // A Vault alias (aws-sm, gh, ...) names the same destination as the spec's type name.
  const type = findProvider(req.params.type ?? "")?.type;
  if (!type) throw badRequest(`type: unknown destination type "${req.params.type ?? ""}"`);
  return { namespaceId: req.ns.id, type, name: req.params.name ?? "" };
}

async function destinationView(req: Req, type: DestinationType, name: string, extra?: Association | null) {
  const assocs = await associationsOfDestination(req.db, { namespaceId: req.ns.id, type, name });
  const secrets: Record<string, Record<string, unknown>> = {};
  for (const a of assocs) Object.assign(secrets, associationEntries(a));
  if (extra && !assocs.some((a) => a.id === extra.id)) Object.assign(secrets, associationEntries(extra));
  return { data: { associated_secrets: secrets, store_name: name, store_type: type } };
}

const memberFields = defineFields({
  mount: { type: "string", description: "Path of the KV-v2 mount holding the secret.", required: true },
  secret_name: { type: "string", description: "Path of the secret inside the mount.", required: true },
});

function normalizeMount(raw: string): string {
  // Not `replace(/^\/+|\/+$/g, "")`: quadratic on a long run of "/" (src/core/text.ts).
  const p = trimChar(raw, "/");
  if (p === "") throw badRequest("mount: is required");
  return `${p}/`;
}

function validateSecretName(raw: string): string {
  if (raw === "") throw badRequest("secret_name: is required");
  if (raw.endsWith("/")) throw badRequest("secret_name: Secret not found. Please provide full path to existing secret");
  if (raw.startsWith("/") || raw.split("/").some((s) => s === "" || s === "." || s === "..")) throw badRequest("secret_name: is not a valid secret path");
  if (raw.length > 1024) throw badRequest("secret_name: must be at most 1024 characters");
  return raw;
}

async function kvMount(req: Req, mountPath: string): Promise<MountRow> {
  const m = await getMount(req.db, req.ns.id, mountPath);
  if (!m) throw badRequest(`mount: no mount at "${mountPath}"`);
  if (m.type !== "kv") throw badRequest(`mount: "${mountPath}" is a ${m.type} mount; only KV version 2 secrets can be synced`);
  return m;
}

/** Resolves the body of set/remove; set also checks the caller may read the secret. */
async function resolveLink(req: Req, forSet: boolean): Promise<Link> {
  const key = destinationKey(req);
  const mountPath = normalizeMount(String(req.fields.mount ?? ""));
  const secretName = validateSecretName(String(req.fields.secret_name ?? ""));
  const dest = await getDestination(req.db, loadConfig(req.env).seal, key);
  if (!dest) throw notFound();
  if (forSet && dest.purgeInitiatedAt != null) throw badRequest(`destination "${key.type}/${key.name}" is being purged; no new associations`);
  if (!forSet && !(await getMount(req.db, req.ns.id, mountPath))) {
    // The mount was disabled: the association is found by the mount path (or accessor) it was
    // made with, so it can still be removed.
    const a = await findAssociationByStoredMount(req.db, {
      namespaceId: req.ns.id,
      destinationType: key.type,
      destinationName: key.name,
      mount: trimChar(String(req.fields.mount ?? ""), "/"),
      secretName,
    });
    if (a) {
      const { namespaceId, destinationType, destinationName, mountId, mountPath: path, mountAccessor, secretName: name } = a;
      return { namespaceId, destinationType, destinationName, mountId, mountPath: path, mountAccessor, secretName: name };
    }
  }
  const m = await kvMount(req, mountPath);
  if (forSet) {
    // Vault API: /v1/sys/sync/destinations/:type/:name/associations: the caller must be able to read the secret (checked at set time only).
    // The secret's path as seen from the request's namespace, resolved like the dispatcher's own
    // check (checking it as a root-namespace path would leak another namespace's secrets).
    const caps = req.capabilities(`${mountPath}data/${secretName}`);
    if (!caps.has("read")) throw new ApiError(403, `permission denied to read the content of the secret ${secretName} in mount ${mountPath.slice(0, -1)}`);
    if (!(await kvStore.getMetadata(req.db, m.id, secretName))) throw badRequest("secret_name: Secret not found. Please provide full path to existing secret");
  }
  return {
    namespaceId: req.ns.id,
    destinationType: key.type,
    destinationName: key.name,
    mountId: m.id,
    mountPath: m.path,
    mountAccessor: m.accessor,
    secretName,
  };
}

function destinationsView(assocs: Association[]) {
  const out: Record<string, Record<string, unknown>> = {};
  for (const a of assocs) {
    const entry: Record<string, unknown> = { type: a.destinationType, name: a.destinationName, sync_status: a.status, updated_at: rfc3339(a.updatedAt), ...attemptFields(a) };
    out[`${a.destinationType}/${a.destinationName}`] = entry;
  }
  return { data: { associated_destinations: out } };
}

async function bySecret(req: Req, mountRaw: string, secretRaw: string) {
  const m = await getMount(req.db, req.ns.id, normalizeMount(mountRaw));
  if (!m) return destinationsView([]);
  return destinationsView(await associationsOfNamespace(req.db, req.ns.id, { mountId: m.id, secretName: secretRaw }));
}

const queryFields = defineFields({
  mount: { type: "string", description: "Mount path of the secret.", required: true },
  secret_name: { type: "string", description: "Path of the secret inside the mount.", required: true },
});

export const associationRoutes: RouteDef[] = [
  route({
    pattern: "sync/destinations/:type/:name/associations",
    handlers: {
      async read(req) {
        const key = destinationKey(req);
        if (!(await destinationExists(req.db, key))) throw notFound();
        return destinationView(req, key.type, key.name);
      },
    },
  }),
  route({
    pattern: "sync/destinations/:type/:name/associations/set",
    fields: memberFields,
    handlers: {
      async update(req) {
        const link = await resolveLink(req, true);
        await setAssociation(engineDeps(req), link);
        return destinationView(req, link.destinationType, link.destinationName);
      },
    },
  }),
  route({
    pattern: "sync/destinations/:type/:name/associations/remove",
    fields: memberFields,
    handlers: {
      async update(req) {
        const link = await resolveLink(req, false);
        const removed = await removeAssociation(engineDeps(req), link);
        // Never delete what Lanyard did not create (docs/secrets-sync.md "2. Never delete what Lanyard did not create"): say what stays.
        // On the web host a name is several variables: only those Lanyard created were deleted.
        const webhost = link.destinationType === "webhost-project";
        for (const name of removed?.left ?? []) {
          req.warnings.push(
            webhost
              ? `the external secret "${name}" existed at the destination before Lanyard first wrote it, or has variables Lanyard did not create on other deployment environments: only the variables Lanyard created were deleted, the others were left in place; delete them at the provider if they are no longer needed`
              : `the external secret "${name}" existed at the destination before Lanyard first wrote it, so it was left in place (with the last value Lanyard wrote); delete it at the provider if it is no longer needed`,
          );
        }
        return destinationView(req, link.destinationType, link.destinationName, removed?.assoc ?? null);
      },
    },
  }),
  route({
    pattern: "sync/associations",
    handlers: {
      async list(req) {
        const assocs = await associationsOfNamespace(req.db, req.ns.id);
        if (assocs.length === 0) throw notFound();
        const keyInfo: Record<string, Record<string, unknown>[]> = {};
        for (const a of assocs) {
          (keyInfo[`${a.mountPath}${a.secretName}`] ??= []).push({
            mount: a.mountPath,
            secret_path: a.secretName,
            type: a.destinationType,
            name: a.destinationName,
            sync_status: a.status,
            updated_at: rfc3339(a.updatedAt),
            ...attemptFields(a),
          });
        }
        const keys = Object.keys(keyInfo).sort();
        return { data: { key_info: keyInfo, keys, total_associations: assocs.length, total_secrets: keys.length } };
      },
    },
  }),
  route({
    pattern: "sync/associations/destinations",
    fields: queryFields,
    handlers: {
      async read(req) {
        return bySecret(req, String(req.fields.mount ?? ""), validateSecretName(String(req.fields.secret_name ?? "")));
      },
    },
  }),
  route({
    pattern: "sync/associations/*rest",
    handlers: {
      async read(req) {
        // The mount is the longest mount path that prefixes the rest (mounts may be nested).
        const rest = req.params.rest ?? "";
        const m = await findMountForPath(req.db, req.ns.id, rest);
        if (!m || rest.length <= m.path.length) throw badRequest("path: expected sys/sync/associations/<mount>/<secret_name>");
        return bySecret(req, m.path, rest.slice(m.path.length));
      },
    },
  }),
];
