/**
 * `webhost-project`: project environment variables of a web host (docs/secrets-sync.md "Destinations: `sys/sync/destinations/<type>/<name>`";
 * Vault API: /v1/sys/sync/destinations/:type/:name, Vercel REST API, project environment variables). `project_id` is immutable; `deployment_environments` takes values from
 * development, preview and production.
 */
import { defineFields } from "../../../../core/fields";
import { invalid, list, plainText, str, type DestinationDef, UPPER_SNAKE_TEMPLATE, upperSnakeName } from "../../destinations/types";

const DEPLOYMENT_ENVIRONMENTS = ["development", "preview", "production"] as const;

export const destination: DestinationDef = {
  type: "webhost-project",
  fields: defineFields({
    access_token: { type: "string", required: true, description: "Token allowed to manage the project's environment variables." },
    project_id: { type: "string", required: true, description: "Project whose environment variables are managed. Immutable." },
    team_id: { type: "string", default: "", description: "Team owning the project, if any." },
    deployment_environments: {
      type: "comma-string-slice",
      required: true,
      description: "Environments the variables apply to: development, preview, production.",
    },
  }),
  sensitive: ["access_token"],
  immutable: ["project_id"],
  defaultGranularity: "secret-key",
  defaultTemplate: UPPER_SNAKE_TEMPLATE,
  normalizeName: upperSnakeName,
  tags: null,
  async validate(conn) {
    const token = str(conn, "access_token");
    if (token === "") throw invalid("access_token", "is required");
    plainText("access_token", token, 1024);
    if (/\s/.test(token)) throw invalid("access_token", "must not contain whitespace");
    if (!/^[A-Za-z0-9._-]{1,100}$/.test(str(conn, "project_id"))) {
      throw invalid("project_id", "must be 1 to 100 letters, digits, '.', '_' or '-'");
    }
    if (!/^[A-Za-z0-9._-]{0,100}$/.test(str(conn, "team_id"))) throw invalid("team_id", "must be up to 100 letters, digits, '.', '_' or '-'");
    const envs = list(conn, "deployment_environments");
    if (envs.length === 0) throw invalid("deployment_environments", "at least one of development, preview, production is required");
    for (const e of envs) {
      if (!(DEPLOYMENT_ENVIRONMENTS as readonly string[]).includes(e)) {
        throw invalid("deployment_environments", `"${e}" is not one of development, preview, production`);
      }
    }
    // Stored as given, without duplicates: a read returns the list in the caller's order, so a
    // Terraform list does not show a change on every plan. Comparisons use sets.
    return { ...conn, deployment_environments: [...new Set(envs)] };
  },
};
