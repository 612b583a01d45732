/**
 * Kubernetes auth roles (Vault API: /auth/kubernetes/role/:name; vault-plugin-auth-kubernetes path_role.go):
 * the fields, the write rules (defaults on create, only the keys sent change on update) with
 * upstream's messages, the stored document and the read view. Names are lower-cased, as upstream
 * stores them.
 */
import { badRequest } from "../../../core/errors";
import { defineFields } from "../../../core/fields";
import type { Req } from "../../../core/route";
import { tokenParamFields, tokenParamsFrom, tokenParamsOf, tokenParamsView, type TokenParams } from "../token-params";

export const ALIAS_NAME_SOURCES = ["serviceaccount_uid", "serviceaccount_name"] as const;

export const roleFields = defineFields({
  ...tokenParamFields,
  name: { type: "string", description: "Name of the role." },
  bound_service_account_names: { type: "comma-string-slice", description: 'Service account names allowed to log in ("*" alone: all; globs allowed).' },
  bound_service_account_namespaces: { type: "comma-string-slice", description: 'Namespaces allowed to log in ("*" alone: all; globs allowed).' },
  bound_service_account_namespace_selector: { type: "string", description: "Not supported: namespace label selectors need the cluster's namespace API." },
  audience: { type: "string", description: "Audience the JWT and the TokenReview must carry." },
  alias_name_source: { type: "string", description: "serviceaccount_uid (default) or serviceaccount_name." },
});

/** The stored role document. */
export interface KubeRole {
  bound_service_account_names: string[];
  bound_service_account_namespaces: string[];
  audience: string;
  alias_name_source: string;
  token: TokenParams;
}

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);

/** A stored document as KubeRole (tolerates missing keys). */
export function kubeRoleOf(stored: Record<string, unknown>): KubeRole {
  return {
    bound_service_account_names: strings(stored.bound_service_account_names),
    bound_service_account_namespaces: strings(stored.bound_service_account_namespaces),
    audience: typeof stored.audience === "string" ? stored.audience : "",
    alias_name_source: typeof stored.alias_name_source === "string" ? stored.alias_name_source : ALIAS_NAME_SOURCES[0],
    token: tokenParamsOf(stored.token),
  };
}

type RoleReq = Req<typeof roleFields>;

/** The role after a write: `prev` null on create. Throws 400 with upstream's messages. */
export function roleFrom(req: RoleReq, prev: KubeRole | null): KubeRole {
  const f = req.fields;
  const token = tokenParamsFrom(req, prev?.token ?? null);
  const role: KubeRole = prev
    ? { ...prev, token }
    : { bound_service_account_names: [], bound_service_account_namespaces: [], audience: "", alias_name_source: ALIAS_NAME_SOURCES[0], token };

  if (req.has("bound_service_account_names")) role.bound_service_account_names = f.bound_service_account_names ?? [];
  if (role.bound_service_account_names.length === 0) throw badRequest('"bound_service_account_names" can not be empty');
  if (role.bound_service_account_names.length > 1 && role.bound_service_account_names.includes("*")) throw badRequest('can not mix "*" with values');

  if (req.has("bound_service_account_namespace_selector") && (f.bound_service_account_namespace_selector ?? "").trim() !== "") {
    throw badRequest("bound_service_account_namespace_selector: namespace label selectors are not supported; list the namespaces in bound_service_account_namespaces");
  }
  if (req.has("bound_service_account_namespaces")) role.bound_service_account_namespaces = f.bound_service_account_namespaces ?? [];
  if (role.bound_service_account_namespaces.length === 0) {
    throw badRequest('"bound_service_account_namespaces" can not be empty if "bound_service_account_namespace_selector" is not set');
  }
  if (role.bound_service_account_namespaces.length > 1 && role.bound_service_account_namespaces.includes("*")) throw badRequest('can not mix "*" with values');

  if (req.has("audience")) role.audience = f.audience ?? "";
  if (role.audience.trim() === "") {
    req.warnings.push("This role does not specify an audience. In a future version of Vault, specifying an audience will be required.");
  }

  if (req.has("alias_name_source")) {
    const source = f.alias_name_source ?? "";
    role.alias_name_source = source === "" ? ALIAS_NAME_SOURCES[0] : source;
  }
  if (!(ALIAS_NAME_SOURCES as readonly string[]).includes(role.alias_name_source)) {
    throw badRequest(`invalid alias_name_source "${role.alias_name_source}", must be one of: ${ALIAS_NAME_SOURCES.join(", ")}`);
  }
  return role;
}

/** The read view (upstream pathRoleRead): bindings, audience when set, token fields, alias source. */
export function roleView(role: KubeRole): Record<string, unknown> {
  const view: Record<string, unknown> = {
    bound_service_account_names: role.bound_service_account_names,
    bound_service_account_namespaces: role.bound_service_account_namespaces,
    bound_service_account_namespace_selector: "",
    ...tokenParamsView(role.token),
    alias_name_source: role.alias_name_source,
  };
  if (role.audience !== "") view.audience = role.audience;
  return view;
}

/** The stored document of a role. */
export function roleDocument(role: KubeRole): Record<string, unknown> {
  return { ...role };
}
