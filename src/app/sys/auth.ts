/**
 * sys/auth: list, enable, read, tune and disable auth methods (Vault API: /sys/auth).
 * An auth mount is a row of `mounts` at "auth/<path>/" (src/auth/methods/method.ts), so enable and
 * disable share the mount table's invariants (src/core/lifecycle.ts): an enable is one conditional
 * INSERT (of racing enables of overlapping paths one wins), and a disable marks the mount
 * "disabling" before it revokes and purges, so a login racing it either stores its token before
 * the mark (and the revocation removes it) or is refused by migrations/0009's trigger. Every path
 * but the list needs sudo, as Vault's `auth/*` root path does. The built-in `token/` method is
 * listed but cannot be enabled, tuned or disabled.
 */
import { isAuthMount, AUTH_PREFIX } from "../../auth/methods/method";
import { purgeMethodRows } from "../../auth/methods/method-store";
import { revokeIssuedBy } from "../../auth/token-store";
import { ApiError, badRequest } from "../../core/errors";
import { defineFields } from "../../core/fields";
import { randomHex, sha256Hex } from "../../core/encoding";
import { MOUNT_DISABLING } from "../../core/lifecycle";
import { deleteMountRow, effectiveTtls, getMount, insertMountIfFree, listMounts, markMountDisabling, overlappingMount, updateMount, type MountRow } from "../../core/mount-store";
import { route, type Req, type RouteDef } from "../../core/route";
import { AUTH_METHODS } from "../auth-methods";
import { BUILTIN_MOUNT_FLAGS, checkEnableTtls, checkTuneTtls, normalizeMountPath, ttlFrom, tunedTtl } from "./mounts";
import { checkEnableFlags, checkEngineOptions, checkMountConfig, enableFlagFields, tuneSettingFields, tuneSettings } from "./mount-options";

/** Vault's mountInfo for an auth mount: TTLs as configured (0 = system), token_type. */
export function authMountView(m: MountRow): Record<string, unknown> {
  return {
    type: m.type,
    description: m.description,
    accessor: m.accessor,
    uuid: m.id,
    config: { default_lease_ttl: m.defaultLeaseTtl, max_lease_ttl: m.maxLeaseTtl, force_no_cache: false, token_type: "default-service" },
    options: Object.keys(m.options).length > 0 ? m.options : null,
    ...BUILTIN_MOUNT_FLAGS,
  };
}

/** The built-in token method (auth/token/), one per namespace, with a stable accessor. */
export async function tokenMountView(nsId: string): Promise<Record<string, unknown>> {
  const id = await sha256Hex(`auth-token:${nsId}`);
  return {
    type: "token",
    description: "token based credentials",
    accessor: `auth_token_${id.slice(0, 8)}`,
    uuid: `${id.slice(0, 8)}-${id.slice(8, 12)}-${id.slice(12, 16)}-${id.slice(16, 20)}-${id.slice(20, 32)}`,
    config: { default_lease_ttl: 0, max_lease_ttl: 0, force_no_cache: false, token_type: "default-service" },
    options: null,
    ...BUILTIN_MOUNT_FLAGS,
  };
}

/** "approle" → "approle/", validated like a mount path ("token/" is the built-in method's). */
const authPath = normalizeMountPath;

async function requireAuthMount(req: Req, raw: string): Promise<MountRow> {
  const path = authPath(raw);
  const m = await getMount(req.db, req.ns.id, AUTH_PREFIX + path);
  if (!m || !isAuthMount(m)) throw badRequest(`No auth engine at ${path}`);
  return m;
}

const enableFields = defineFields({
  path: { type: "string", description: "Where to mount the method (auth/<path>/).", required: true },
  type: { type: "string", description: "approle, jwt, oidc or kubernetes.", default: "" },
  description: { type: "string", description: "Human-friendly description.", default: "" },
  config: { type: "map", description: "default_lease_ttl, max_lease_ttl.", default: {} },
  options: { type: "map", description: "Method options (none are used; each key is named in a warning).", default: {} },
  ...enableFlagFields,
});

const tuneFields = defineFields({
  path: { type: "string", description: "The auth mount.", required: true },
  default_lease_ttl: { type: "string", description: "Default token TTL (seconds, duration or \"system\")." },
  max_lease_ttl: { type: "string", description: "Maximum token TTL (seconds, duration or \"system\")." },
  description: { type: "string", description: "Human-friendly description." },
  // token_type (default-service or service) and Vault's other tune settings: ./mount-options.ts.
  ...tuneSettingFields,
});

async function enable(req: Req<typeof enableFields>): Promise<null> {
  const f = req.fields;
  const path = authPath(f.path);
  if (path === "token/") throw badRequest("path is already in use at token/");
  if (f.type === "") throw badRequest("backend type must be specified as a string");
  if (f.type === "token") throw badRequest("token credential backend cannot be instantiated");
  if (!AUTH_METHODS[f.type]) throw badRequest(`type: unknown auth method type "${f.type}" (supported: ${Object.keys(AUTH_METHODS).join(", ")})`);
  const target = { kind: "auth", type: f.type } as const;
  checkEnableFlags(f, f.type, req.warnings);
  checkEngineOptions("options", f.options, target, req.warnings);
  checkMountConfig(f.config, target, "config.", ["default_lease_ttl", "max_lease_ttl"], req.warnings);
  const defaultTtl = ttlFrom(f.config, "default_lease_ttl");
  const maxTtl = ttlFrom(f.config, "max_lease_ttl");
  checkEnableTtls(defaultTtl, maxTtl);
  const full = AUTH_PREFIX + path;
  for (let attempt = 0; attempt < 3; attempt++) {
    const row: MountRow = {
      id: crypto.randomUUID(),
      namespaceId: req.ns.id,
      path: full,
      type: f.type,
      accessor: `auth_${f.type}_${randomHex(4)}`,
      description: f.description,
      options: {},
      defaultLeaseTtl: defaultTtl,
      maxLeaseTtl: maxTtl,
      createdAt: Date.now(),
      state: "active",
    };
    // No namespace can be named "auth" (it is reserved), so nothing can shadow an auth mount.
    if (await insertMountIfFree(req.db, row, "")) return null;
    const taken = await overlappingMount(req.db, req.ns.id, full);
    if (taken) throw badRequest(`path is already in use at ${taken.path.slice(AUTH_PREFIX.length)}`);
  }
  throw new ApiError(409, `path "${path}": concurrent changes to the mount table; try again`);
}

/** Disable (Vault answers 204 even when nothing is mounted): mark, revoke its tokens, purge, delete. */
async function disable(req: Req): Promise<null> {
  const path = authPath(req.params.path ?? "");
  const m = await getMount(req.db, req.ns.id, AUTH_PREFIX + path);
  if (!m || !isAuthMount(m)) return null;
  // (a) the mark first: from here no role, SecretID or token of the mount can be written.
  await markMountDisabling(req.db, m.id);
  // (b) every token the mount issued, with its descendants; (c) the method's rows; (d) the mount.
  await revokeIssuedBy(req.db, m.id);
  await AUTH_METHODS[m.type]?.method.purge?.(req.db, m);
  await purgeMethodRows(req.db, m.id);
  await deleteMountRow(req.db, m.id);
  return null;
}

/**
 * Tuning an auth method: at sys/auth/<path>/tune, and at sys/mounts/auth/<path>/tune, the path the
 * vault CLI's `vault auth tune` writes (Vault API /sys/mounts/:path/tune with an "auth/" path).
 * Both need sudo, as Vault's sys/auth/* paths do.
 */
function authTuneRoute(pattern: string): RouteDef {
  return route({
    pattern,
    fields: tuneFields,
    sudo: ["read", "update"],
    handlers: {
      async read(req) {
        const m = await requireAuthMount(req, req.fields.path);
        const { defaultTtl, maxTtl } = effectiveTtls(m);
        const data = { default_lease_ttl: defaultTtl, max_lease_ttl: maxTtl, force_no_cache: false, description: m.description, token_type: "default-service" };
        return { data, topLevel: data };
      },
      async update(req) {
        const m = await requireAuthMount(req, req.fields.path);
        const f = req.fields;
        checkMountConfig(tuneSettings(req.body), { kind: "auth", type: m.type }, "", [], req.warnings);
        const raw = { default_lease_ttl: f.default_lease_ttl, max_lease_ttl: f.max_lease_ttl };
        const defaultTtl = tunedTtl(raw, "default_lease_ttl", m.defaultLeaseTtl);
        const maxTtl = tunedTtl(raw, "max_lease_ttl", m.maxLeaseTtl);
        checkTuneTtls(defaultTtl, maxTtl);
        const tuned = await updateMount(req.db, m.id, { defaultLeaseTtl: defaultTtl, maxLeaseTtl: maxTtl, description: f.description ?? m.description });
        if (!tuned) throw new ApiError(409, MOUNT_DISABLING);
        return null;
      },
    },
  });
}

/** sys/mounts/auth/<path>/tune: listed before sys/mounts' own routes, which refuse "auth/" paths. */
export const authTuneViaMountsRoute = authTuneRoute("mounts/auth/*path/tune");

export const authRoutes = [
  route({
    pattern: "auth",
    handlers: {
      async read(req) {
        const out: Record<string, unknown> = { "token/": await tokenMountView(req.ns.id) };
        for (const m of await listMounts(req.db, req.ns.id)) if (isAuthMount(m)) out[m.path.slice(AUTH_PREFIX.length)] = authMountView(m);
        return { data: out, topLevel: out };
      },
    },
  }),
  authTuneRoute("auth/*path/tune"),
  route({
    pattern: "auth/*path",
    fields: enableFields,
    sudo: ["read", "update", "create", "delete"],
    handlers: {
      async read(req) {
        const view = authMountView(await requireAuthMount(req, req.params.path ?? ""));
        return { data: view, topLevel: view };
      },
      update: enable,
      delete: disable,
    },
  }),
];
