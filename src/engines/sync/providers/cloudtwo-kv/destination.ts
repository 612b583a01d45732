/**
 * `cloudtwo-kv`: a key vault with client-credentials OAuth (docs/secrets-sync.md "Destinations: `sys/sync/destinations/<type>/<name>`"; Vault API: /v1/sys/sync/destinations/:type/:name,
 * Azure Key Vault REST API). The app authenticates with its client secret or, with
 * `identity_token_audience`, with a client assertion Lanyard signs (a federated credential on the
 * app registration; docs/secrets-sync.md "Keyless destinations"), never both. The key vault URI decides where the connector connects, so it passes the outbound-host
 * safeguard (../hosts.ts) unless CLOUDTWO_ENDPOINT is set. `key_vault_uri`, `tenant_id` and
 * `cloud` are immutable.
 */
import { defineFields } from "../../../../core/fields";
import { MAX_URL_BYTES } from "../../../../core/limits";
import { checkOutboundUrl } from "../../hosts";
import { ENDPOINT_VAR } from "./client";
import { credentialMode, FEDERATION_FIELDS, switchCredentials } from "../../connectors/federation";
import { envVar, invalid, plainText, str, type DestinationDef } from "../../destinations/types";

/**
 * Known cloud names (case-insensitive) → the key-vault DNS suffix of that cloud (Azure Key Vault REST API). "cloud" is
 * the spec's default and means the public cloud; upstream's environment names are accepted too.
 */
const CLOUDS: Record<string, string> = {
  cloud: ".vault.azure.net",
  public: ".vault.azure.net",
  azurepubliccloud: ".vault.azure.net",
  china: ".vault.azure.cn",
  azurechinacloud: ".vault.azure.cn",
  usgovernment: ".vault.usgovcloudapi.net",
  azureusgovernmentcloud: ".vault.usgovcloudapi.net",
};

export const destination: DestinationDef = {
  type: "cloudtwo-kv",
  fields: defineFields({
    key_vault_uri: { type: "string", required: true, maxBytes: MAX_URL_BYTES, description: "URI of an existing key vault, e.g. https://kv1.vault.azure.net. Immutable." },
    client_id: { type: "string", required: true, description: "Client id of an app registration." },
    client_secret: { type: "string", default: "", description: "Client secret of the app registration (or identity_token_audience for federation)." },
    tenant_id: { type: "string", required: true, description: "Directory (tenant) id. Immutable." },
    cloud: { type: "string", default: "cloud", description: "Cloud of the vault: cloud (public, the default), public, china, usgovernment. Immutable." },
    ...FEDERATION_FIELDS,
  }),
  sensitive: ["client_secret"],
  immutable: ["key_vault_uri", "tenant_id", "cloud"],
  defaultGranularity: "secret-path",
  defaultTemplate: {
    "secret-path": "vault-{{ .MountAccessor }}-{{ .SecretPath }}",
    "secret-key": "vault-{{ .MountAccessor }}-{{ .SecretPath }}-{{ .SecretKey }}",
  },
  // Key-vault names allow only [0-9A-Za-z-]: every other character becomes "-".
  normalizeName: (name) => name.replace(/[^0-9A-Za-z-]/g, "-"),
  // 15 tags per secret, one taken by the ownership tag; names ≤ 512, values ≤ 256.
  tags: { maxTags: 14, maxKeyLength: 512, maxValueLength: 256 },
  // A PATCH sending one credential form clears the other.
  afterMerge: switchCredentials(["client_secret"], []),
  async validate(conn, ctx) {
    const cloud = str(conn, "cloud");
    const suffix = CLOUDS[cloud.toLowerCase()];
    if (!suffix) throw invalid("cloud", `unknown cloud "${cloud}"; use one of cloud, public, china, usgovernment`);
    const uri = str(conn, "key_vault_uri").trim();
    if (uri === "") throw invalid("key_vault_uri", "is required");
    const problem = checkOutboundUrl(uri, {
      field: "key_vault_uri",
      allowedHosts: [suffix],
      endpointOverride: envVar(ctx.env, ENDPOINT_VAR) !== undefined,
    });
    if (problem) throw invalid("key_vault_uri", problem.replace(/^key_vault_uri: /, ""));
    if (!/^\/?$/.test(new URL(uri).pathname)) throw invalid("key_vault_uri", "must be the vault's base URI, without a path");
    const tenant = str(conn, "tenant_id");
    if (!/^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$/.test(tenant)) {
      throw invalid("tenant_id", "must be a tenant id (GUID) or a tenant domain name");
    }
    const client = str(conn, "client_id");
    if (client === "") throw invalid("client_id", "is required");
    plainText("client_id", client, 256);
    if (/\s/.test(client)) throw invalid("client_id", "must not contain whitespace");
    if (credentialMode(conn, ["client_secret"], []) === "stored") {
      if (str(conn, "client_secret") === "") throw invalid("client_secret", "is required (or identity_token_audience, for a federated credential on the app registration)");
      plainText("client_secret", str(conn, "client_secret"), 1024);
    }
    return { ...conn, key_vault_uri: uri };
  },
};
