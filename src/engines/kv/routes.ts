/**
 * Routes of the KV-v2 engine (paths relative to the mount): data/, metadata/, delete/,
 * undelete/, destroy/, subkeys/ and config. Handlers coerce and validate input, then call the
 * operations in engine.ts; nothing here touches storage.
 */
import { badRequest } from "../../core/errors";
import { defineFields } from "../../core/fields";
import { route, type Req, type RouteDef } from "../../core/route";
import * as kv from "./engine";
import {
  isJsonObject,
  mergePatch,
  parseCas,
  requireNonNegative,
  requireVersions,
  validateCustomMetadata,
  validateFolder,
  validateSecretPath,
  type JsonObject,
} from "./service";

const pathField = { type: "string", description: "Location of the secret, relative to the mount." } as const;

const dataFields = defineFields({
  path: pathField,
  version: { type: "int", description: "On reads: the version to return (0 or absent: the current one).", default: 0 },
  data: { type: "map", description: "The secret's key/value data." },
  options: { type: "map", description: "Write options; `cas` makes the write conditional on the current version." },
});

const metadataFields = defineFields({
  path: pathField,
  max_versions: { type: "int", description: "Versions to keep (0: the mount's setting)." },
  cas_required: { type: "bool", description: "Require the cas option on every write of this key." },
  delete_version_after: { type: "duration", description: "Soft-delete each version this long after it is written (0: never)." },
  custom_metadata: { type: "map", description: "String key/value metadata (not secret) kept with the key." },
});

const versionsFields = defineFields({
  path: pathField,
  versions: { type: "int-slice", description: "The versions to act on." },
});

const subkeysFields = defineFields({
  path: pathField,
  version: { type: "int", description: "The version to describe (0 or absent: the current one).", default: 0 },
  depth: { type: "int", description: "How deep to descend (0: no limit).", default: 0 },
});

const configFields = defineFields({
  max_versions: { type: "int", description: "Versions kept per key (0: the default of 10)." },
  cas_required: { type: "bool", description: "Require the cas option on every write." },
  delete_version_after: { type: "duration", description: "Soft-delete each version this long after it is written (0: never)." },
});

/** The data of a write or patch: a JSON object under `data`. */
function requireData(req: { has(name: "data"): boolean; fields: { data?: JsonObject | undefined } }): JsonObject {
  const data = req.fields.data;
  if (!req.has("data") || data === undefined) throw badRequest("data: no data provided");
  return data;
}

async function writeData(req: Req<typeof dataFields>) {
  const path = validateSecretPath(req.fields.path);
  const data = requireData(req);
  return kv.writeSecret(kv.kvCtx(req), path, data, parseCas(req.fields.options));
}

/** Every path-taking route refuses a missing path with 400 rather than an opaque 404. */
const missingPath = async (): Promise<never> => {
  throw badRequest("path: a secret path is required");
};

const missingPathRoute = (pattern: string): RouteDef =>
  route({ pattern, handlers: { read: missingPath, update: missingPath, patch: missingPath, delete: missingPath } });

function metadataInput(req: Req<typeof metadataFields>, mode: "write" | "patch"): kv.MetadataInput {
  const f = req.fields;
  const input: kv.MetadataInput = {};
  if (f.max_versions !== undefined) input.maxVersions = requireNonNegative("max_versions", f.max_versions);
  if (f.cas_required !== undefined) input.casRequired = f.cas_required;
  if (f.delete_version_after !== undefined) input.deleteVersionAfter = f.delete_version_after;
  // Read raw: the generic coercion treats null as "absent", but in a merge patch null values
  // remove keys (and a null custom_metadata removes them all). On a write null stays "absent".
  const rawCustom = req.body.custom_metadata;
  if (rawCustom === null && mode === "patch") {
    input.customMetadata = {};
    input.clearCustomMetadata = true;
  } else if (rawCustom !== undefined && rawCustom !== null) {
    input.customMetadata = validateCustomMetadata(rawCustom, mode === "patch");
  }
  return input;
}

export const kvRoutes: RouteDef[] = [
  route({
    pattern: "config",
    fields: configFields,
    handlers: {
      async read(req) {
        return kv.readConfig(kv.kvCtx(req));
      },
      async update(req) {
        const f = req.fields;
        return kv.writeConfig(kv.kvCtx(req), {
          maxVersions: f.max_versions === undefined ? undefined : requireNonNegative("max_versions", f.max_versions),
          casRequired: f.cas_required,
          deleteVersionAfter: f.delete_version_after,
        });
      },
    },
  }),
  route({
    pattern: "data/*path",
    fields: dataFields,
    exists: (req) => kv.keyExists(req, req.params.path ?? ""),
    handlers: {
      async read(req) {
        return kv.readSecret(kv.kvCtx(req), validateSecretPath(req.fields.path), req.fields.version);
      },
      create: writeData,
      update: writeData,
      async patch(req) {
        const path = validateSecretPath(req.fields.path);
        const patchDoc = requireData(req);
        return kv.patchSecret(
          kv.kvCtx(req),
          path,
          (current) => {
            const merged = mergePatch(current, patchDoc);
            return isJsonObject(merged) ? merged : {};
          },
          parseCas(req.fields.options),
        );
      },
      async delete(req) {
        return kv.deleteLatest(kv.kvCtx(req), validateSecretPath(req.fields.path));
      },
    },
  }),
  route({
    pattern: "metadata",
    fields: metadataFields,
    handlers: {
      async list(req) {
        return kv.listKeys(kv.kvCtx(req), "");
      },
      read: missingPath,
      update: missingPath,
      patch: missingPath,
      delete: missingPath,
    },
  }),
  route({
    pattern: "metadata/*path",
    fields: metadataFields,
    exists: (req) => kv.keyExists(req, req.params.path ?? ""),
    handlers: {
      async list(req) {
        return kv.listKeys(kv.kvCtx(req), validateFolder(req.fields.path));
      },
      async read(req) {
        return kv.readMetadata(kv.kvCtx(req), validateSecretPath(req.fields.path));
      },
      async create(req) {
        const path = validateSecretPath(req.fields.path);
        return kv.writeMetadata(kv.kvCtx(req), path, metadataInput(req, "write"), "write");
      },
      async update(req) {
        const path = validateSecretPath(req.fields.path);
        return kv.writeMetadata(kv.kvCtx(req), path, metadataInput(req, "write"), "write");
      },
      async patch(req) {
        const path = validateSecretPath(req.fields.path);
        return kv.writeMetadata(kv.kvCtx(req), path, metadataInput(req, "patch"), "patch");
      },
      async delete(req) {
        return kv.deleteMetadata(kv.kvCtx(req), validateSecretPath(req.fields.path));
      },
    },
  }),
  ...(
    [
      ["delete", "deleted"],
      ["undelete", "undeleted"],
      ["destroy", "destroyed"],
    ] as const
  ).map(([verb, kind]) =>
    route({
      pattern: `${verb}/*path`,
      fields: versionsFields,
      handlers: {
        async update(req) {
          const path = validateSecretPath(req.fields.path);
          return kv.changeVersions(kv.kvCtx(req), path, requireVersions(req.fields.versions), kind);
        },
      },
    }),
  ),
  route({
    pattern: "subkeys/*path",
    fields: subkeysFields,
    handlers: {
      async read(req) {
        const f = req.fields;
        return kv.readSubkeys(kv.kvCtx(req), validateSecretPath(f.path), f.version, f.depth);
      },
    },
  }),
  ...["data", "delete", "undelete", "destroy", "subkeys"].map(missingPathRoute),
];
