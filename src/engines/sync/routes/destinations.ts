/**
 * sys/sync/destinations (Vault API: /v1/sys/sync; Vault API: /v1/sys/sync, Vault API: read a destination–1.8, Vault docs: secrets sync policies). One route per type
 * (its own field table from the registry), a catch-all that names unknown types, and the lists.
 * `exists` lets the dispatcher tell create from update for the ACL (Vault docs: secrets sync policies).
 */
import { loadConfig } from "../../../core/config";
import { badRequest, fieldError, notFound } from "../../../core/errors";
import { coerceValue } from "../../../core/fields";
import { route, type Req, type RouteDef } from "../../../core/route";
import { writeFields } from "../destinations/options";
import { deleteDestination, destinationView, writeDestination } from "../destinations/service";
import type { DestinationDef } from "../destinations/types";
import { DESTINATION_TYPES, findProvider, PROVIDERS } from "../providers/registry";
import { engineDeps } from "./deps";
import { requestPurge } from "../operations";
import { destinationExists, getDestination, listDestinations } from "../store";

function keyOf(req: Req, def: DestinationDef) {
  return { namespaceId: req.ns.id, type: def.type, name: req.params.name ?? "" };
}

/**
 * The purge's warning about the secrets it leaves (at most 20 names, then a count). On the web
 * host a name is several variables: the purge deletes those Lanyard created and leaves the others.
 */
function leftWarning(names: string[], type: string): string {
  const shown = names.slice(0, 20).map((n) => `"${n}"`).join(", ");
  const more = names.length > 20 ? ` and ${names.length - 20} more` : "";
  const why =
    type === "webhost-project"
      ? "or have variables Lanyard did not create on other deployment environments (Lanyard only deletes the variables it created; the others stay as they are)"
      : "(Lanyard only deletes what it created; they keep the last value it wrote)";
  return `the purge leaves ${names.length} secret${names.length === 1 ? "" : "s"} at the destination that existed before Lanyard first wrote ${names.length === 1 ? "it" : "them"} ${why}: ${shown}${more}`;
}

function purgeFlag(req: Req): boolean {
  const raw = req.body.purge;
  if (raw === undefined || raw === null) return false;
  try {
    return coerceValue({ type: "bool", description: "" }, Array.isArray(raw) ? raw[0] : raw) === true;
  } catch (e) {
    throw fieldError("purge", e instanceof Error ? e.message : String(e));
  }
}

/** The routes of one type, under its spec name or (`pathType`) one of Vault's aliases. */
function typeRoute(def: DestinationDef, pathType: string = def.type): RouteDef {
  const write = (mode: "write" | "patch") => async (req: Req) => {
    const rec = await writeDestination(
      {
        db: req.db,
        keys: loadConfig(req.env).seal,
        env: req.env,
        ns: req.ns,
        def,
        name: req.params.name ?? "",
        fields: req.fields,
        has: (n) => req.has(n),
        body: req.body,
        warnings: req.warnings,
      },
      mode,
    );
    return { data: destinationView(def, rec) };
  };
  return route({
    pattern: `sync/destinations/${pathType}/:name`,
    fields: writeFields(def),
    exists: (req) => destinationExists(req.db, keyOf(req, def)),
    handlers: {
      async read(req) {
        const rec = await getDestination(req.db, loadConfig(req.env).seal, keyOf(req, def));
        if (!rec) throw notFound();
        return { data: destinationView(def, rec) };
      },
      create: write("write"),
      update: write("write"),
      patch: write("patch"),
      async delete(req) {
        const key = keyOf(req, def);
        if ((await deleteDestination(req.db, key, purgeFlag(req))) === "purge") {
          // A purge leaves what Lanyard did not create (docs/secrets-sync.md "2. Never delete what Lanyard did not create"); with such secrets the
          // answer is 200 with a warning listing them instead of 204.
          const left = await requestPurge(engineDeps(req), key);
          if (left.length > 0) req.warnings.push(leftWarning(left, def.type));
        }
        return null;
      },
    },
  });
}

function unknownType(type: string): Error {
  return badRequest(`type: unknown destination type "${type}"; known types: ${DESTINATION_TYPES.join(", ")}`);
}

const refuseUnknown = async (req: Req) => {
  throw unknownType(req.params.type ?? "");
};

export const destinationRoutes: RouteDef[] = [
  route({
    pattern: "sync/destinations",
    handlers: {
      async list(req) {
        const rows = await listDestinations(req.db, req.ns.id);
        if (rows.length === 0) throw notFound();
        const keyInfo: Record<string, string[]> = {};
        for (const r of rows) (keyInfo[`${r.type}/`] ??= []).push(r.name);
        return { data: { key_info: keyInfo, keys: Object.keys(keyInfo), total_destinations: rows.length } };
      },
    },
  }),
  route({
    pattern: "sync/destinations/:type",
    handlers: {
      async list(req) {
        const type = findProvider(req.params.type ?? "")?.type;
        if (!type) throw unknownType(req.params.type ?? "");
        const rows = await listDestinations(req.db, req.ns.id, type);
        if (rows.length === 0) throw notFound();
        return { data: { keys: rows.map((r) => r.name), total_destinations: rows.length } };
      },
    },
  }),
  ...PROVIDERS.map((p) => typeRoute(p)),
  ...PROVIDERS.map((p) => typeRoute(p, p.vaultType)),
  route({
    pattern: "sync/destinations/:type/:name",
    handlers: { read: refuseUnknown, update: refuseUnknown, patch: refuseUnknown, delete: refuseUnknown },
  }),
];
