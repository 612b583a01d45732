/**
 * sys/policies/acl: ACL policies of the request's namespace, in HCL or JSON (src/auth/policy-parser.ts).
 * sys/policy[/:name]: Vault's legacy paths over the same store (Vault API: /sys/policy), which
 * hvac's create_or_update_policy/read_policy/list_policies and node-vault's
 * addPolicy/getPolicy/policies use: the text is `rules` on read, `policy` or `rules` on write.
 */
import { DEFAULT_POLICY_TEXT } from "../../auth/policies";
import { PolicyParseError, parsePolicy } from "../../auth/policy-parser";
import { deletePolicy, getPolicy, listPolicyNames, putPolicy } from "../../auth/policy-store";
import { badRequest, notFound } from "../../core/errors";
import { defineFields } from "../../core/fields";
import { route, type JsonReply, type Req } from "../../core/route";
import { base64ToBytes } from "../../core/encoding";

const policyFields = defineFields({
  name: { type: "string", description: "Name of the policy (stored lower-case).", required: true },
  policy: { type: "string", description: "The policy document, HCL or JSON." },
});

/** Policy names are case-insensitive upstream; stored lower-case. */
function policyName(raw: string): string {
  const name = raw.trim().toLowerCase();
  if (!/^[\w.-]+$/.test(name)) throw badRequest(`name: invalid policy name "${raw}"`);
  return name;
}

/** The sorted policy names of the namespace: stored ones, `default`, and `root` in the root namespace. */
async function policyNames(req: Req): Promise<string[]> {
  const names = new Set(await listPolicyNames(req.db, req.ns.id));
  names.add("default");
  if (req.ns.id === "root") names.add("root");
  return [...names].sort();
}

/** The text of a policy, or null when there is none (`root` has no text). */
async function policyText(req: Req, name: string): Promise<string | null> {
  if (name === "root") return "";
  const row = await getPolicy(req.db, req.ns.id, name);
  if (row) return row.text;
  if (name === "default") return DEFAULT_POLICY_TEXT;
  return null;
}

async function storePolicy(req: Req, name: string, text: string): Promise<void> {
  try {
    parsePolicy(text);
  } catch (e) {
    if (e instanceof PolicyParseError) throw badRequest(`failed to parse policy: ${e.message}`);
    throw e;
  }
  await putPolicy(req.db, { namespaceId: req.ns.id, name, text, updatedAt: Date.now() });
}

async function removePolicy(req: Req, name: string): Promise<void> {
  if (name === "root") throw badRequest("cannot delete the root policy");
  if (name === "default") throw badRequest("cannot delete the default policy");
  await deletePolicy(req.db, req.ns.id, name);
}

const legacyFields = defineFields({
  name: { type: "string", description: "Name of the policy (stored lower-case).", required: true },
  policy: { type: "string", description: "The policy document, HCL or JSON (may be base64)." },
  rules: { type: "string", description: "Deprecated name of `policy`." },
});

/** Vault's handlePoliciesSet accepts a base64-encoded document and decodes it. */
function maybeBase64(text: string): string {
  const t = text.trim();
  if (t === "" || !/^[A-Za-z0-9+/]+={0,2}$/.test(t) || t.length % 4 !== 0) return text;
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(base64ToBytes(t));
  } catch {
    return text;
  }
}

/** Vault's legacy policy list: `keys` and `policies` (the same names), also at the top level. */
async function legacyList(req: Req): Promise<JsonReply> {
  const names = await policyNames(req);
  return { data: { keys: names, policies: names }, topLevel: { keys: names, policies: names } };
}

export const policyRoutes = [
  route({
    pattern: "policies/acl",
    handlers: {
      async list(req) {
        const names = await policyNames(req);
        return { data: { keys: names, policies: names } };
      },
    },
  }),
  route({
    pattern: "policies/acl/:name",
    fields: policyFields,
    handlers: {
      async read(req) {
        const name = policyName(req.fields.name);
        const text = await policyText(req, name);
        if (text === null) throw notFound();
        return { data: { name, policy: text } };
      },
      async update(req) {
        const name = policyName(req.fields.name);
        if (name === "root") throw badRequest("cannot update the root policy");
        const text = req.fields.policy;
        if (text === undefined || text.trim() === "") throw badRequest("policy: a policy document is required");
        await storePolicy(req, name, text);
        return null;
      },
      async delete(req) {
        await removePolicy(req, policyName(req.fields.name));
        return null;
      },
    },
  }),
  // Vault's legacy list: GET and LIST both answer `keys` and `policies` (the same list), also at
  // the top level (Vault copies sys/policy data there for old clients).
  route({
    pattern: "policy",
    handlers: {
      read: legacyList,
      list: legacyList,
    },
  }),
  route({
    pattern: "policy/:name",
    fields: legacyFields,
    handlers: {
      async read(req) {
        const name = policyName(req.fields.name);
        const text = await policyText(req, name);
        if (text === null) throw notFound();
        return { data: { name, rules: text }, topLevel: { name, rules: text } };
      },
      async update(req) {
        const name = policyName(req.fields.name);
        if (name === "root") throw badRequest('cannot update "root" policy');
        // Vault: `policy` is preferred; `rules` still works, with a deprecation warning.
        const usedRules = (req.fields.policy ?? "") === "" && (req.fields.rules ?? "") !== "";
        const text = maybeBase64(usedRules ? (req.fields.rules ?? "") : (req.fields.policy ?? ""));
        if (text.trim() === "") throw badRequest("'policy' parameter not supplied or empty");
        await storePolicy(req, name, text);
        if (usedRules) return { warnings: ["'rules' is deprecated, please use 'policy' instead"] };
        return null;
      },
      async delete(req) {
        await removePolicy(req, policyName(req.fields.name));
        return null;
      },
    },
  }),
];
