/** sys/policies/acl: ACL policies of the request's namespace, in HCL or JSON (src/auth/policy-parser.ts). */
import { DEFAULT_POLICY_TEXT } from "../../auth/policies";
import { PolicyParseError, parsePolicy } from "../../auth/policy-parser";
import { deletePolicy, getPolicy, listPolicyNames, putPolicy } from "../../auth/policy-store";
import { badRequest, notFound } from "../../core/errors";
import { defineFields } from "../../core/fields";
import { route } from "../../core/route";

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

export const policyRoutes = [
  route({
    pattern: "policies/acl",
    handlers: {
      async list(req) {
        const names = new Set(await listPolicyNames(req.db, req.ns.id));
        names.add("default");
        if (req.ns.id === "root") names.add("root");
        return { data: { keys: [...names].sort(), policies: [...names].sort() } };
      },
    },
  }),
  route({
    pattern: "policies/acl/:name",
    fields: policyFields,
    handlers: {
      async read(req) {
        const name = policyName(req.fields.name);
        if (name === "root") return { data: { name, policy: "" } };
        const row = await getPolicy(req.db, req.ns.id, name);
        if (row) return { data: { name, policy: row.text } };
        if (name === "default") return { data: { name, policy: DEFAULT_POLICY_TEXT } };
        throw notFound();
      },
      async update(req) {
        const name = policyName(req.fields.name);
        if (name === "root") throw badRequest("cannot update the root policy");
        const text = req.fields.policy;
        if (text === undefined || text.trim() === "") throw badRequest("policy: a policy document is required");
        try {
          parsePolicy(text);
        } catch (e) {
          if (e instanceof PolicyParseError) throw badRequest(`failed to parse policy: ${e.message}`);
          throw e;
        }
        await putPolicy(req.db, { namespaceId: req.ns.id, name, text, updatedAt: Date.now() });
        return null;
      },
      async delete(req) {
        const name = policyName(req.fields.name);
        if (name === "root") throw badRequest("cannot delete the root policy");
        if (name === "default") throw badRequest("cannot delete the default policy");
        await deletePolicy(req.db, req.ns.id, name);
        return null;
      },
    },
  }),
];
