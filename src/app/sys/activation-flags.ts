/**
 * sys/activation-flags (Vault API: /sys/activation-flags): Vault requires a one-time
 * `vault write -f sys/activation-flags/secrets-sync/activate` before secrets sync, and clients
 * (the UI, Terraform) read the flags unauthenticated. Lanyard records the activation and answers
 * as Vault does; sync itself works without it, so existing set-ups keep working.
 */
import { activatedFeatures, activateFeature } from "../../core/activation-store";
import { permissionDenied } from "../../core/errors";
import { route, type Req } from "../../core/route";
import { mayLearnNamespace } from "./namespace-visibility";

/** Features that can be activated. */
const FEATURES = ["secrets-sync"] as const;

async function flags(req: Req): Promise<{ data: { activated: string[]; unactivated: string[] } }> {
  const activated = (await activatedFeatures(req.db)).filter((f) => (FEATURES as readonly string[]).includes(f));
  return { data: { activated, unactivated: FEATURES.filter((f) => !activated.includes(f)) } };
}

export const activationFlagRoutes = [
  route({
    pattern: "activation-flags",
    public: ["read"],
    // The flags are the cluster's, but the read must not tell an existing namespace from a
    // missing one: outside the root namespace it needs a token that may know it.
    publicSeesToken: true,
    handlers: {
      async read(req) {
        if (!mayLearnNamespace(req)) throw permissionDenied();
        return flags(req);
      },
    },
  }),
  route({
    pattern: "activation-flags/secrets-sync/activate",
    handlers: {
      async update(req) {
        await activateFeature(req.db, "secrets-sync");
        return flags(req);
      },
    },
  }),
];
