/**
 * AppRole SecretID endpoints (Vault API: /auth/approle/role/:role_name/secret-id; OpenBao builtin/credential/approle
 * path_role.go, path_tidy_user_id.go): generate (`role/:role_name/secret-id` POST, or
 * `custom-secret-id` with the caller's value), LIST accessors, lookup and destroy by value or by
 * accessor, and `tidy/secret-id`. The SecretID appears in exactly one answer, the generate
 * response; lookups show the accessor, never the value, and no error message quotes it (Vault's
 * login echoes it in one message, `invalid secret_id "<raw>"`; Lanyard does not).
 */
import { cidrsWithin, parseCidrs } from "../../../core/cidr";
import { ApiError, badRequest, notFound } from "../../../core/errors";
import { defineFields } from "../../../core/fields";
import { effectiveTtls } from "../../../core/mount-store";
import { route, type JsonReply, type Req } from "../../../core/route";
import { type LoadedRole, loadRole, MAX_ID_LENGTH, mountIdOf, requireRole, roleNameOf, scopeOf, subsetError } from "./role";
import { parseSecretIdMetadata } from "./secret-id-metadata";
import {
  deleteExpiredSecretIds,
  deleteSecretId,
  deleteSecretIdByAccessor,
  findSecretId,
  findSecretIdByAccessor,
  insertSecretId,
  listSecretIdAccessors,
  type SecretIdEntry,
} from "./secret-id-store";

const roleNameField = defineFields({
  role_name: { type: "string", description: "Name of the role (stored lower-case).", required: true },
});

const generateFields = defineFields({
  ...roleNameField,
  metadata: {
    type: "any",
    description: "Metadata for the SecretID, shown in its lookups and in its tokens' meta: a JSON object, a string holding one (hvac), or k1=v1,k2=v2.",
  },
  cidr_list: { type: "comma-string-slice", description: "CIDR blocks the SecretID may be used from; within the role's secret_id_bound_cidrs." },
  token_bound_cidrs: { type: "comma-string-slice", description: "CIDR blocks the issued tokens may be used from; within the role's token_bound_cidrs." },
  num_uses: { type: "int", description: "Uses of this SecretID (default: the role's secret_id_num_uses, which it may not exceed)." },
  ttl: { type: "duration", description: "Lifetime of this SecretID (default: the role's secret_id_ttl, which it may not exceed)." },
});

const customFields = defineFields({
  ...generateFields,
  secret_id: { type: "string", description: "The SecretID to register." },
});

const bySecretFields = defineFields({ ...roleNameField, secret_id: { type: "string", description: "The SecretID." } });
const byAccessorFields = defineFields({ ...roleNameField, secret_id_accessor: { type: "string", description: "Accessor of the SecretID." } });

/** Vault's tidy answer (path_tidy_user_id.go); the tidy itself is done before answering. */
export const TIDY_WARNING = "Tidy operation successfully started. Any information from the operation will be printed to Vault's server logs.";

/** Go's zero time, which Vault shows as the expiration_time of a SecretID that never expires. */
const ZERO_TIME = "0001-01-01T00:00:00Z";

/** A SecretID lookup (secretIDStorageEntry.ToResponseData); never the SecretID itself. */
function lookupView(e: SecretIdEntry): Record<string, unknown> {
  return {
    secret_id_accessor: e.accessor,
    secret_id_num_uses: e.numUses > 0 ? e.usesLeft : 0,
    secret_id_ttl: e.ttl,
    creation_time: new Date(e.creationTime).toISOString(),
    expiration_time: e.expirationTime > 0 ? new Date(e.expirationTime).toISOString() : ZERO_TIME,
    last_updated_time: new Date(e.lastUpdatedTime).toISOString(),
    metadata: e.metadata,
    cidr_list: e.cidrList,
    token_bound_cidrs: e.tokenBoundCidrs,
  };
}

/** The part of a SecretID generate that checks the request against the role (handleRoleSecretIDCommon). */
function secretIdSettings(req: Req<typeof generateFields>, loaded: LoadedRole) {
  const { role } = loaded;
  const f = req.fields;
  if (!role.bindSecretId) throw badRequest("bind_secret_id is not set on the role");

  const cidrList = parseCidrs("cidr_list", f.cidr_list ?? []);
  if (!cidrsWithin(cidrList, role.secretIdBoundCidrs)) throw subsetError("cidr_list", role.secretIdBoundCidrs, cidrList);
  const tokenBoundCidrs = parseCidrs("token_bound_cidrs", f.token_bound_cidrs ?? []);
  if (!cidrsWithin(tokenBoundCidrs, role.token.boundCidrs)) throw subsetError("token_bound_cidrs", role.token.boundCidrs, tokenBoundCidrs);

  // Omitted num_uses / ttl inherit the role's; a given one may not exceed it (0 = unlimited
  // exceeds any limit).
  let numUses = role.secretIdNumUses;
  if (req.has("num_uses")) {
    numUses = f.num_uses ?? 0;
    if (numUses < 0) throw badRequest("num_uses cannot be negative");
    if (role.secretIdNumUses > 0 && (numUses === 0 || numUses > role.secretIdNumUses)) {
      throw badRequest("num_uses cannot be higher than the role's secret_id_num_uses");
    }
  }
  let ttl = role.secretIdTtl;
  if (req.has("ttl")) {
    ttl = f.ttl ?? 0;
    if (role.secretIdTtl > 0 && (ttl === 0 || ttl > role.secretIdTtl)) throw badRequest("ttl cannot be longer than the role's secret_id_ttl");
  }
  // Vault's deriveSecretIDTTL: a TTL above the mount's max lease TTL is cut down to it.
  const maxTtl = req.mount ? effectiveTtls(req.mount).maxTtl : 0;
  if (maxTtl > 0 && ttl > maxTtl) ttl = maxTtl;

  const metadata = parseSecretIdMetadata(f.metadata);
  return { cidrList, tokenBoundCidrs, numUses, ttl, metadata };
}

/** Generates (or registers a custom) SecretID for a role; the one answer that carries it. */
async function issueSecretId(req: Req<typeof generateFields>, secretId: string): Promise<JsonReply> {
  const name = roleNameOf(req.fields.role_name);
  if (secretId === "") throw badRequest("missing secret_id");
  if (new TextEncoder().encode(secretId).length > MAX_ID_LENGTH) throw badRequest(`secret_id is longer than maximum of ${MAX_ID_LENGTH} bytes`);
  const loaded = await loadRole(req, name);
  // Vault answers a generate for a missing role with 404 (error response + unsupported path).
  if (!loaded) throw new ApiError(404, `role "${name}" does not exist`);
  const s = secretIdSettings(req, loaded);
  const accessor = crypto.randomUUID();
  const stored = await insertSecretId(req.db, scopeOf(req, loaded), secretId, { accessor, ...s, now: Date.now() });
  if (!stored) throw badRequest("SecretID is already registered");
  return { data: { secret_id: secretId, secret_id_accessor: accessor, secret_id_ttl: s.ttl, secret_id_num_uses: s.numUses } };
}

function requiredString(v: string | undefined, field: string): string {
  const s = (v ?? "").trim();
  if (s === "") throw badRequest(`missing ${field}`);
  return s;
}

async function destroyBySecret(req: Req<typeof bySecretFields>): Promise<null> {
  const secretId = requiredString(req.fields.secret_id, "secret_id");
  const loaded = await requireRole(req, roleNameOf(req.fields.role_name));
  // 204 whether or not it existed (Vault).
  await deleteSecretId(req.db, scopeOf(req, loaded), secretId);
  return null;
}

async function destroyByAccessor(req: Req<typeof byAccessorFields>): Promise<null> {
  const accessor = requiredString(req.fields.secret_id_accessor, "secret_id_accessor");
  const loaded = await requireRole(req, roleNameOf(req.fields.role_name));
  if (!(await deleteSecretIdByAccessor(req.db, mountIdOf(req), loaded.name, accessor))) {
    throw new ApiError(403, "invalid secret id accessor");
  }
  return null;
}

export const secretIdRoutes = [
  route({
    pattern: "role/:role_name/secret-id",
    fields: generateFields,
    handlers: {
      update: (req) => issueSecretId(req, crypto.randomUUID()),
      async list(req) {
        const loaded = await requireRole(req, roleNameOf(req.fields.role_name));
        const keys = await listSecretIdAccessors(req.db, mountIdOf(req), loaded.name);
        if (keys.length === 0) throw notFound();
        return { data: { keys } };
      },
    },
  }),
  route({
    pattern: "role/:role_name/custom-secret-id",
    fields: customFields,
    handlers: {
      update: (req) => issueSecretId(req, (req.fields.secret_id ?? "").trim()),
    },
  }),
  route({
    pattern: "role/:role_name/secret-id/lookup",
    fields: bySecretFields,
    handlers: {
      async update(req) {
        const secretId = requiredString(req.fields.secret_id, "secret_id");
        const loaded = await requireRole(req, roleNameOf(req.fields.role_name));
        const entry = await findSecretId(req.db, scopeOf(req, loaded), secretId);
        // Unknown SecretID: 204, not 404 (Vault).
        return entry ? { data: lookupView(entry) } : null;
      },
    },
  }),
  route({
    pattern: "role/:role_name/secret-id/destroy",
    fields: bySecretFields,
    handlers: { update: destroyBySecret, delete: destroyBySecret },
  }),
  route({
    pattern: "role/:role_name/secret-id-accessor/lookup",
    fields: byAccessorFields,
    handlers: {
      async update(req) {
        const accessor = requiredString(req.fields.secret_id_accessor, "secret_id_accessor");
        const loaded = await requireRole(req, roleNameOf(req.fields.role_name));
        const entry = await findSecretIdByAccessor(req.db, mountIdOf(req), loaded.name, accessor);
        // Vault answers 404 with a full envelope whose data holds the error (RespondWithStatusCode).
        if (!entry) return { status: 404, data: { error: `failed to find accessor entry for secret_id_accessor: ${JSON.stringify(accessor)}` } };
        return { data: lookupView(entry) };
      },
    },
  }),
  route({
    pattern: "role/:role_name/secret-id-accessor/destroy",
    fields: byAccessorFields,
    handlers: { update: destroyByAccessor, delete: destroyByAccessor },
  }),
  route({
    pattern: "tidy/secret-id",
    handlers: {
      // Vault tidies in the background and answers 202 at once; one DELETE is quick enough to
      // run before answering, so the answer is the same and the tidy is done when it arrives.
      async update(req) {
        await deleteExpiredSecretIds(req.db, mountIdOf(req), Date.now());
        return { status: 202, warnings: [TIDY_WARNING] };
      },
    },
  }),
];
