/**
 * `repohost`: repository action secrets (docs/secrets-sync.md "Destinations: `sys/sync/destinations/<type>/<name>`"; Vault API: /v1/sys/sync/destinations/:type/:name, Vault API: /v1/sys/sync/github-apps, GitHub REST API, Actions secrets). The
 * destination authenticates either with an access token or with a configured app
 * (`app_name` + `installation_id`), never both. Owner, repository and environment are immutable.
 */
import { defineFields } from "../../../../core/fields";
import { OBFUSCATED, invalid, plainText, str, type Connection, type DestinationDef, UPPER_SNAKE_TEMPLATE, upperSnakeName } from "../../destinations/types";

const OWNER = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$/;
const REPOSITORY = /^[A-Za-z0-9._-]{1,100}$/;

export const destination: DestinationDef = {
  type: "repohost",
  fields: defineFields({
    access_token: { type: "string", default: "", description: "Fine-grained or personal access token; alternative to app_name + installation_id." },
    app_name: { type: "string", default: "", description: "Name of a repository-host app configured at sys/sync/repohost-apps." },
    installation_id: { type: "string", default: "", description: "Installation id of the app; required with app_name." },
    repository_owner: { type: "string", required: true, description: "Organization or user owning the repository. Immutable." },
    repository_name: { type: "string", required: true, description: "Repository name. Immutable." },
    environment_name: { type: "string", default: "", description: "Environment in the repository; empty for repository secrets. Immutable." },
  }),
  sensitive: ["access_token"],
  immutable: ["repository_owner", "repository_name", "environment_name"],
  defaultGranularity: "secret-key",
  defaultTemplate: UPPER_SNAKE_TEMPLATE,
  normalizeName: upperSnakeName,
  tags: null,
  async validate(conn, ctx) {
    const owner = str(conn, "repository_owner");
    if (!OWNER.test(owner)) throw invalid("repository_owner", "must be 1 to 39 letters, digits or hyphens, starting with a letter or digit");
    const repo = str(conn, "repository_name");
    if (!REPOSITORY.test(repo) || repo === "." || repo === "..") {
      throw invalid("repository_name", "must be 1 to 100 letters, digits, '.', '_' or '-'");
    }
    plainText("environment_name", str(conn, "environment_name"), 255);
    const token = str(conn, "access_token");
    const app = str(conn, "app_name");
    const installation = str(conn, "installation_id");
    if (token !== "" && app !== "") throw invalid("app_name", "use either access_token or app_name with installation_id, not both");
    if (token === "" && app === "") throw invalid("access_token", "either access_token or app_name with installation_id is required");
    if (token !== "") {
      plainText("access_token", token, 1024);
      if (/\s/.test(token)) throw invalid("access_token", "must not contain whitespace");
      if (installation !== "") throw invalid("installation_id", "is only used together with app_name");
      return conn;
    }
    if (installation === "") throw invalid("installation_id", "is required when app_name is set");
    if (!/^[1-9]\d{0,18}$/.test(installation) || BigInt(installation) > 9223372036854775807n) {
      throw invalid("installation_id", "must be a positive integer");
    }
    if (!(await ctx.appExists(app))) throw invalid("app_name", `no repository-host app named "${app}" is configured`);
    return conn;
  },
  view(conn) {
    const app = str(conn, "app_name");
    const out: Record<string, unknown> = {
      access_token: str(conn, "access_token") === "" ? "" : OBFUSCATED,
      repository_owner: str(conn, "repository_owner"),
      repository_name: str(conn, "repository_name"),
      environment_name: str(conn, "environment_name"),
    };
    if (app !== "") {
      // Read-back of the app form as upstream shows it (Vault API: /v1/sys/sync/github-apps): app_config.app_name + installation_id.
      out.app_config = { app_name: app };
      out.installation_id = Number(str(conn, "installation_id"));
    }
    return out;
  },
  afterMerge(merged: Connection, sent: ReadonlySet<string>): Connection {
    // Sending one authentication form replaces the other, so a PATCH can switch between them.
    if (sent.has("access_token") && str(merged, "access_token") !== "" && !sent.has("app_name")) {
      return { ...merged, app_name: "", installation_id: "" };
    }
    if (sent.has("app_name") && str(merged, "app_name") !== "" && !sent.has("access_token")) {
      return { ...merged, access_token: "" };
    }
    return merged;
  },
};
