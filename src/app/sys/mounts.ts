/**
 * sys/mounts: enable, read, tune and disable secrets engines (docs/http-conventions.md, "System
 * paths"). The mount types, their aliases and their options come from the engine registry.
 * Enable, tune and disable answer 204. Disabling removes the engine's data for that mount, and
 * for a KV-v2 mount first unsyncs the secrets-sync associations of its secrets.
 *
 * Concurrency (invariants 1 and 2 of src/core/lifecycle.ts): an enable is one conditional INSERT, so of
 * racing enables of the same or nested paths one wins and the rest answer 400; a disable marks
 * the mount "disabling" before it unsyncs and purges, so a write racing it either lands before
 * the mark and is purged, or is refused with 409 "mount is being disabled". The order of the
 * disable's steps is what makes that hold: do not purge before marking.
 */
import { getNamespaceByPath } from "../../auth/namespace-store";
import { isAuthMount } from "../../auth/methods/method";
import { ENGINES, MOUNT_ENGINES, MOUNT_TYPE_NAMES } from "../engines";
import { parseDurationSeconds as parseTtl } from "../../core/duration";
import { ApiError, badRequest } from "../../core/errors";
import { defineFields } from "../../core/fields";
import { route, type Req } from "../../core/route";
import { randomHex } from "../../core/encoding";
import { deleteMountLeases } from "../../core/lease-store";
import { isUniqueViolation, MOUNT_DISABLING } from "../../core/lifecycle";
import { deleteMountRow, effectiveTtls, findMountForPath, getMount, insertMountIfFree, listMounts, markMountDisabling, overlappingMount, updateMount, type MountRow } from "../../core/mount-store";

import { MAX_MOUNT_PATH_SEGMENTS, SYSTEM_MAX_TTL } from "../../core/limits";
import { checkEnableFlags, checkEngineOptions, checkMountConfig, enableFlagFields, tuneSettingFields, tuneSettings } from "./mount-options";

export { SYSTEM_MAX_TTL };

const RESERVED_MOUNT_ROOTS = new Set(["sys", "auth", "identity", "cubbyhole"]);

/** Normalizes a mount path to "a/b/" and checks its segments. */
export function normalizeMountPath(raw: string): string {
  const segs = raw.split("/").filter((s) => s !== "");
  if (segs.length === 0) throw badRequest("path: a mount path is required");
  // Mount lookups try one prefix per segment up to this bound (mountCandidates).
  if (segs.length > MAX_MOUNT_PATH_SEGMENTS) {
    throw badRequest(`path: a mount path has at most ${MAX_MOUNT_PATH_SEGMENTS} segments, got ${segs.length}`);
  }
  for (const s of segs) {
    if (!/^[\w.-]+$/.test(s) || s === "." || s === "..") {
      throw badRequest(`path: invalid mount path segment "${s}" (letters, digits, '_', '-', '.')`);
    }
  }
  if (RESERVED_MOUNT_ROOTS.has(segs[0] as string)) throw badRequest(`path: "${segs[0]}/" is reserved`);
  return `${segs.join("/")}/`;
}

export function mountView(m: MountRow): Record<string, unknown> {
  const { defaultTtl, maxTtl } = effectiveTtls(m);
  return {
    type: m.type,
    description: m.description,
    accessor: m.accessor,
    uuid: m.id,
    config: { default_lease_ttl: defaultTtl, max_lease_ttl: maxTtl, force_no_cache: false },
    options: { ...MOUNT_ENGINES[m.type]?.engine.mounts?.defaultOptions, ...m.options },
    ...BUILTIN_MOUNT_FLAGS,
  };
}

/** The mountInfo keys that are the same for every mount Lanyard has (built in, one cluster). */
export const BUILTIN_MOUNT_FLAGS = {
  local: false,
  seal_wrap: false,
  external_entropy_access: false,
  plugin_version: "",
  running_plugin_version: "",
  running_sha256: "",
} as const;

/**
 * Resolves an enable's `type` (a mount type or an alias, ../engines.ts MOUNT_TYPE_NAMES) and
 * `options` to the type and options the mount is stored with; the engine checks its options.
 */
function engineType(asked: string, options: Record<string, unknown>): { type: string; options: Record<string, string> } {
  const type = MOUNT_TYPE_NAMES.get(asked);
  const engine = type === undefined ? undefined : MOUNT_ENGINES[type]?.engine.mounts;
  if (type === undefined || !engine) {
    const supported = [...MOUNT_TYPE_NAMES.keys()].sort().join(", ");
    throw badRequest(`type: unknown secrets engine type "${asked}" (supported: ${supported})`);
  }
  return { type, options: engine.normalizeOptions?.(asked, options) ?? {} };
}

/**
 * A lease TTL from a mount's config or a tune body: seconds or a duration string; "" and
 * "system" mean the system default (0). Vault's message: `unable to parse <kind> TTL of <v>: …`.
 */
/**
 * A TTL of a tune body: absent, null or "" leaves the mount's value as it is, "system" sets the
 * system's (0), anything else is parsed (Vault's handleTuneWriteCommon does the same).
 */
export function tunedTtl(body: Record<string, unknown>, key: "default_lease_ttl" | "max_lease_ttl", current: number): number {
  const v = body[key];
  return v === undefined || v === null || v === "" ? current : ttlFrom(body, key);
}

export function ttlFrom(config: Record<string, unknown>, key: "default_lease_ttl" | "max_lease_ttl"): number {
  const v = config[key];
  if (v === undefined || v === null || v === "" || v === "system") return 0;
  try {
    return parseTtl(v);
  } catch (e) {
    const kind = key === "default_lease_ttl" ? "default" : "max";
    throw badRequest(`unable to parse ${kind} TTL of ${String(v)}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/**
 * Enable-time checks, as Vault's handleMount makes them: a default above the given max, or (with
 * no max) above the system max, is refused. A max above the system default is allowed: Vault
 * does not cap a mount's max lease TTL at the system's.
 */
export function checkEnableTtls(defaultTtl: number, maxTtl: number): void {
  if (maxTtl !== 0 && defaultTtl > maxTtl) throw badRequest("given default lease TTL greater than given max lease TTL");
  if (maxTtl === 0 && defaultTtl > SYSTEM_MAX_TTL) {
    throw badRequest(`given default lease TTL greater than system max lease TTL of ${SYSTEM_MAX_TTL}`);
  }
}

/**
 * Tune-time check, Vault's tuneMountTTLs: default ≤ max is compared only when both are set
 * (0 is "system" and skips it), and the max is not capped at the system default, so the PKI
 * tutorial's `max_lease_ttl=87600h` is accepted.
 */
export function checkTuneTtls(defaultTtl: number, maxTtl: number): void {
  if (defaultTtl !== 0 && maxTtl !== 0 && maxTtl < defaultTtl) {
    throw badRequest(`backend max lease TTL of ${maxTtl} would be less than backend default lease TTL of ${defaultTtl}`);
  }
}

const enableFields = defineFields({
  path: { type: "string", description: "Where to mount the engine.", required: true },
  type: { type: "string", description: "Engine type: pki, kv (options.version \"2\") or kv-v2.", required: true },
  description: { type: "string", description: "Human-friendly description.", default: "" },
  config: { type: "map", description: "default_lease_ttl, max_lease_ttl.", default: {} },
  options: { type: "map", description: "Engine options; kv takes version \"2\".", default: {} },
  ...enableFlagFields,
});

/** The enable's `config` keys the route acts on; every other one is checked by ./mount-options.ts. */
const ENABLE_CONFIG_HANDLED = ["default_lease_ttl", "max_lease_ttl"] as const;

async function requireMount(req: Req, raw: string): Promise<MountRow> {
  const mount = await getMount(req.db, req.ns.id, normalizeMountPath(raw));
  if (!mount) throw badRequest(`no mount at path "${raw}"`);
  return mount;
}

const tuneFields = defineFields({
  path: { type: "string", description: "The mount.", required: true },
  default_lease_ttl: { type: "string", description: "Default lease TTL (seconds, duration or \"system\")." },
  max_lease_ttl: { type: "string", description: "Maximum lease TTL (seconds, duration or \"system\")." },
  description: { type: "string", description: "Human-friendly description." },
  // Vault's ACME guide tunes allowed_response_headers and passthrough_request_headers on the PKI
  // mount so that its HTTP layer lets ACME's headers through. Lanyard's routes set Replay-Nonce,
  // Location, Link and Retry-After themselves (docs/pki-acme.md), so those values are accepted
  // without a warning; the other settings of Vault's tune are checked by ./mount-options.ts.
  ...tuneSettingFields,
});

export const mountRoutes = [
  route({
    pattern: "mounts",
    handlers: {
      async read(req) {
        const out: Record<string, unknown> = {};
        // Auth mounts share the table (at "auth/<path>/") but are listed by sys/auth only.
        for (const m of await listMounts(req.db, req.ns.id)) if (!isAuthMount(m)) out[m.path] = mountView(m);
        return { data: out, topLevel: out };
      },
    },
  }),
  route({
    pattern: "mounts/*path/tune",
    fields: tuneFields,
    handlers: {
      async read(req) {
        const m = await requireMount(req, req.fields.path);
        const { defaultTtl, maxTtl } = effectiveTtls(m);
        return {
          data: {
            default_lease_ttl: defaultTtl,
            max_lease_ttl: maxTtl,
            force_no_cache: false,
            description: m.description,
            options: mountView(m).options,
          },
        };
      },
      async update(req) {
        const m = await requireMount(req, req.fields.path);
        const f = req.fields;
        checkMountConfig(tuneSettings(req.body), { kind: "secret", type: m.type }, "", [], req.warnings);
        const raw = { default_lease_ttl: f.default_lease_ttl, max_lease_ttl: f.max_lease_ttl };
        const defaultTtl = tunedTtl(raw, "default_lease_ttl", m.defaultLeaseTtl);
        const maxTtl = tunedTtl(raw, "max_lease_ttl", m.maxLeaseTtl);
        checkTuneTtls(defaultTtl, maxTtl);
        const tuned = await updateMount(req.db, m.id, {
          defaultLeaseTtl: defaultTtl,
          maxLeaseTtl: maxTtl,
          description: f.description ?? m.description,
        });
        if (!tuned) throw new ApiError(409, MOUNT_DISABLING);
        return null;
      },
    },
  }),
  route({
    pattern: "mounts/*path",
    fields: enableFields,
    handlers: {
      async read(req) {
        // Vault's handleReadMount: the longest mount that prefixes the path (sys/mounts/secret/a/b
        // reads secret/); none is 400 "No secret engine mount at <path>/". Keys are also copied to
        // the top level, as for every sys/mounts/* answer (injectDataIntoTopRoutes).
        const path = normalizeMountPath(req.params.path ?? "");
        const mount = await findMountForPath(req.db, req.ns.id, path);
        if (!mount) throw badRequest(`No secret engine mount at ${path}`);
        const view = mountView(mount);
        return { data: view, topLevel: view };
      },
      async update(req) {
        const f = req.fields;
        const path = normalizeMountPath(f.path);
        const { type, options } = engineType(f.type, f.options);
        checkEnableFlags(f, f.type, req.warnings);
        checkEngineOptions("options", f.options, { kind: "secret", type }, req.warnings);
        checkMountConfig(f.config, { kind: "secret", type }, "config.", ENABLE_CONFIG_HANDLED, req.warnings);
        const defaultTtl = ttlFrom(f.config, "default_lease_ttl");
        const maxTtl = ttlFrom(f.config, "max_lease_ttl");
        checkEnableTtls(defaultTtl, maxTtl);
        // A child namespace of the same name would shadow the mount (path prefixes select namespaces).
        const firstSegment = path.split("/")[0] as string;
        const shadowing = `${req.ns.path}${firstSegment}/`;
        // The conditional insert is the check (lifecycle.ts invariant 1); the reads below only
        // explain a refusal. A refusal with nothing left in the way means the obstacle was
        // removed meanwhile, so the insert is simply tried again; so is a colliding accessor.
        for (let attempt = 0; attempt < 3; attempt++) {
          const row: MountRow = {
            id: crypto.randomUUID(),
            namespaceId: req.ns.id,
            path,
            type,
            accessor: `${type}_${randomHex(4)}`,
            description: f.description,
            options,
            defaultLeaseTtl: defaultTtl,
            maxLeaseTtl: maxTtl,
            createdAt: Date.now(),
            state: "active",
          };
          try {
            if (await insertMountIfFree(req.db, row, shadowing)) return null;
          } catch (e) {
            if (!isUniqueViolation(e)) throw e;
          }
          const taken = await overlappingMount(req.db, req.ns.id, path);
          if (taken) throw badRequest(`path is already in use at ${taken.path}`);
          if (await getNamespaceByPath(req.db, shadowing)) throw badRequest(`path: "${firstSegment}" is the name of a child namespace`);
        }
        throw new ApiError(409, `path "${path}": concurrent changes to the mount table; try again`);
      },
      async delete(req) {
        const mount = await getMount(req.db, req.ns.id, normalizeMountPath(req.params.path ?? ""));
        if (!mount) return null;
        // (a) First the mark: from here on no write of the mount's rows can commit, so the purge
        // below sees every row there will ever be (lifecycle.ts invariant 2).
        await markMountDisabling(req.db, mount.id);
        // (b) Engines that keep something about other engines' mounts let go of it first (the sync
        // engine unsyncs the associations of a KV mount's secrets, through the queue, so no
        // provider copy outlives the mount and no association stays SYNCED).
        for (const e of ENGINES) await e.onMountDisable?.({ env: req.env, db: req.db }, mount);
        // (c) and (d): by mount id, idempotent, so a repeated DELETE finishes a failed one. The
        // mount's leases go first (migrations/0008: none can be written after the mark). Vault
        // revokes them on unmount; their secrets die with the mount's storage here, so revoking
        // each certificate into a CRL that is deleted next would change nothing.
        await deleteMountLeases(req.db, mount.id);
        const engine = MOUNT_ENGINES[mount.type];
        if (engine) await engine.purge(req.db, mount, req.env);
        await deleteMountRow(req.db, mount.id);
        return null;
      },
    },
  }),
];
