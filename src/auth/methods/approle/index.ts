/**
 * The AppRole auth method (Vault API: /auth/approle): machines log in with a RoleID and a
 * SecretID and get a token with the role's policies. What the framework registers for mount
 * type `approle`; routes are relative to the auth mount ("login", "role/:role_name", …).
 *
 * - ./login-route.ts: `login` (public);
 * - ./role-routes.ts, ./role-field-routes.ts: roles, their RoleID and single-field endpoints;
 * - ./secret-id-routes.ts: SecretIDs (generate, custom, list, lookup, destroy) and tidy;
 * - ./role.ts: the role's model and the rules every write keeps;
 * - ./secret-id-store.ts: the only door of the approle_secret_ids table (hashed SecretIDs,
 *   use limits spent by one conditional UPDATE).
 */
import { openDb } from "../../../core/db/client";
import type { AuthMethod } from "../method";
import { loginRoutes } from "./login-route";
import { roleFieldRoutes } from "./role-field-routes";
import { roleRoutes } from "./role-routes";
import { secretIdRoutes } from "./secret-id-routes";
import { deleteExpiredSecretIdsEverywhere, deleteMountSecretIds } from "./secret-id-store";

export const approleMethod: AuthMethod = {
  type: "approle",
  routes: [...loginRoutes, ...roleRoutes, ...roleFieldRoutes, ...secretIdRoutes],
  // The framework removes roles, config and tokens; the SecretIDs are this method's own rows.
  purge: (db, mount) => deleteMountSecretIds(db, mount.id),
  // Vault tidies expired SecretIDs about every minute; they cannot log in meanwhile (login checks
  // expiry strictly), they only take up rows. At most 1,000 per run, within D1's per-invocation limits.
  cron: [{ name: "approle-tidy-secret-ids", run: async (env) => void (await deleteExpiredSecretIdsEverywhere(openDb(env.DB), Date.now())) }],
};
