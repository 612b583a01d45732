/**
 * config/external-policy and the external-policy issuance paths (Vault API
 * /pki/external-policy/issue; docs/pki-external-policy.md), plain and per issuer.
 *
 * The issuance routes declare no fields on purpose: apart from the few Lanyard reads itself
 * (src/engines/pki/external-policy/issue.ts), the body is the policy service's input, not ignored, so
 * the "unrecognized parameters" warning would be false.
 */
import { route, type Req } from "../../../core/route";
import { applyExternalPolicyUpdate, externalPolicyConfigFields, externalPolicyView } from "../external-policy/config";
import { issueWithExternalPolicy } from "../external-policy/issue";
import type { IssuanceMode } from "../external-policy/client";
import { getAllConfig, putConfigStmt, runBatch } from "../storage/store";
import { ctxOf, mountOf } from "./common";

function issuance(mode: IssuanceMode) {
  return async (req: Req) =>
    issueWithExternalPolicy(ctxOf(req), {
      mode,
      policy: req.params.policy ?? "",
      pathIssuerRef: req.params.issuer_ref ?? null,
      body: req.body,
      ns: req.ns.path,
    });
}

const PATHS: [string, IssuanceMode][] = [
  ["issue", "issue"],
  ["sign", "sign"],
  ["sign-intermediate", "ica"],
];

export const externalPolicyRoutes = [
  route({
    pattern: "config/external-policy",
    fields: externalPolicyConfigFields,
    handlers: {
      async read(req) {
        const cfg = await getAllConfig(req.db, mountOf(req).id);
        return { data: externalPolicyView(cfg.external_policy, cfg.external_policy_status) };
      },
      async update(req) {
        const mount = mountOf(req);
        const cfg = await getAllConfig(req.db, mount.id);
        const { config, warnings } = await applyExternalPolicyUpdate(req.env, mount.id, cfg.external_policy, req.fields, req.has, new Date());
        await runBatch(req.db, [putConfigStmt(req.db, mount.id, "external_policy", config)]);
        return { data: externalPolicyView(config, cfg.external_policy_status), warnings };
      },
    },
  }),
  ...PATHS.flatMap(([segment, mode]) => [
    route({ pattern: `external-policy/${segment}/:policy?`, handlers: { update: issuance(mode) } }),
    route({ pattern: `issuer/:issuer_ref/external-policy/${segment}/:policy?`, handlers: { update: issuance(mode) } }),
  ]),
];
