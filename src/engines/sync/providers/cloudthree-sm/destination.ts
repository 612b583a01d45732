/**
 * `cloudthree-sm`: a secret manager reached with a service account's JSON key (spec
 * "cloudthree-sm"; Vault API: /v1/sys/sync/destinations/:type/:name, Google Secret Manager API). `credentials` is the key file's JSON text: the
 * `@path/to/file` form of the spec is a client-side convenience (a CLI reads the file); a Worker
 * has no files, so the service takes the contents. The key's `token_uri` decides where the token
 * exchange goes, so it passes the outbound-host safeguard unless CLOUDTHREE_ENDPOINT is set.
 * `project_id` is immutable. Instead of a key, a destination may be federated
 * (`identity_token_audience`, optionally `service_account_email`: Google STS token exchange of an
 * identity token Lanyard signs, then impersonation; docs/secrets-sync.md "Keyless destinations").
 */
import { defineFields } from "../../../../core/fields";
import { MAX_URL_BYTES } from "../../../../core/limits";
import { utf8Length } from "../../../../core/text";
import { checkOutboundUrl } from "../../hosts";
import { ENDPOINT_VAR } from "./client";
import { KeyError, parsePem } from "../../rsa";
import { envVar, invalid, str, type Connection, type DestinationDef } from "../../destinations/types";
import { credentialMode, FEDERATION_FIELDS, switchCredentials } from "../../connectors/federation";

const TOKEN_HOSTS = ["oauth2.googleapis.com", "accounts.google.com", "www.googleapis.com"];
// Project ids: 6–30 characters, lower-case letters, digits and hyphens, starting with a letter.
const PROJECT_ID = /^[a-z][a-z0-9-]{4,28}[a-z0-9]$/;
// Label keys start with a lower-case letter; keys and values use lower-case letters, digits, _ and -.
const LABEL_KEY = /^[\p{Ll}\p{Lo}][\p{Ll}\p{Lo}\p{N}_-]{0,62}$/u;
const LABEL_VALUE = /^[\p{Ll}\p{Lo}\p{N}_-]{0,63}$/u;

/**
 * `local@domain.tld`: one "@", no white space, a non-empty local part, and a "." inside the
 * domain with characters on both sides. The regex this replaces, /^[^@\s]+@[^@\s]+\.[^@\s]+$/,
 * backtracks over every "." of a long domain and took 16 s on a 100 KB client_email.
 */
export function isEmailShaped(s: string): boolean {
  const at = s.indexOf("@");
  if (at < 1 || s.indexOf("@", at + 1) >= 0 || /\s/.test(s)) return false;
  return s.slice(at + 2, -1).includes(".");
}

interface ServiceAccountKey {
  projectId: string;
}

/** Checks a service-account key file without ever putting its contents in a message. */
async function parseCredentials(text: string, env: Env): Promise<ServiceAccountKey> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    // The parser's message quotes the input, which is a credential: say only what is wrong.
    throw invalid("credentials", "is not valid JSON; pass the service account key file's contents");
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) throw invalid("credentials", "must be a JSON object");
  const o = json as Record<string, unknown>;
  const field = (k: string): string => (typeof o[k] === "string" ? (o[k] as string) : "");
  if (field("type") !== "service_account") throw invalid("credentials", 'must be a service account key (its "type" must be "service_account")');
  // The token URI is stored and read back by every sync: its size is bounded like any stored URL.
  if (utf8Length(field("token_uri")) > MAX_URL_BYTES) throw invalid("credentials", `token_uri is longer than ${MAX_URL_BYTES} bytes`);
  if (!isEmailShaped(field("client_email"))) throw invalid("credentials", "client_email is missing or not an e-mail address");
  const pem = field("private_key");
  if (pem === "") throw invalid("credentials", "private_key is missing");
  try {
    const { label, der } = parsePem(pem);
    if (label !== "PRIVATE KEY") throw new KeyError("not PKCS#8");
    await crypto.subtle.importKey("pkcs8", der, { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, false, ["sign"]);
  } catch {
    throw invalid("credentials", "private_key is not a PKCS#8 RSA private key");
  }
  const tokenUri = field("token_uri");
  if (tokenUri !== "") {
    const problem = checkOutboundUrl(tokenUri, {
      field: "token_uri",
      allowedHosts: TOKEN_HOSTS,
      endpointOverride: envVar(env, ENDPOINT_VAR) !== undefined,
    });
    if (problem) throw invalid("credentials", problem);
  }
  return { projectId: field("project_id") };
}

/**
 * The workload identity pool provider's full resource name (Google STS API: token exchange
 * `audience`), which is also the identity token's `aud` (add it to the provider's allowed
 * audiences).
 */
const PROVIDER_AUDIENCE = /^\/\/iam\.googleapis\.com\/projects\/\d{1,20}\/locations\/global\/workloadIdentityPools\/[a-z0-9-]{4,32}\/providers\/[a-z0-9-]{4,32}$/;

/** Federation: the audience names a pool provider; the service account, when set, is an e-mail. */
function checkFederated(conn: Connection): ServiceAccountKey {
  if (!PROVIDER_AUDIENCE.test(str(conn, "identity_token_audience"))) {
    throw invalid("identity_token_audience", "must be the workload identity pool provider's resource name: //iam.googleapis.com/projects/<project number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>");
  }
  const email = str(conn, "service_account_email");
  if (email !== "" && (!isEmailShaped(email) || email.length > 320)) throw invalid("service_account_email", "must be a service account's e-mail address");
  return { projectId: "" };
}

export const destination: DestinationDef = {
  type: "cloudthree-sm",
  fields: defineFields({
    credentials: { type: "string", default: "", description: "The service account key file's JSON contents (a Worker cannot read @path/to/file); or use identity_token_audience." },
    project_id: { type: "string", default: "", description: "Project to manage secrets in; defaults to the key's project (required with federation). Immutable." },
    service_account_email: { type: "string", default: "", description: "With federation: the service account to impersonate (generateAccessToken); empty uses the federated identity directly." },
    ...FEDERATION_FIELDS,
  }),
  sensitive: ["credentials"],
  immutable: ["project_id"],
  defaultGranularity: "secret-path",
  defaultTemplate: {
    "secret-path": "vault/{{ .MountAccessor }}/{{ .SecretPath }}",
    "secret-key": "vault/{{ .MountAccessor }}/{{ .SecretPath }}/{{ .SecretKey }}",
  },
  // Secret-manager ids allow [A-Za-z0-9_-]: every other character becomes "_".
  normalizeName: (name) => name.replace(/[^A-Za-z0-9_-]/g, "_"),
  // Labels: ≤ 64 per secret (one is the ownership label), key 1–63, value ≤ 63 characters.
  tags: {
    maxTags: 63,
    maxKeyLength: 63,
    maxValueLength: 63,
    checkKey: (k) => (LABEL_KEY.test(k) ? null : "must start with a lower-case letter and use only lower-case letters, digits, _ and -"),
    checkValue: (v) => (LABEL_VALUE.test(v) ? null : "may use only lower-case letters, digits, _ and -"),
  },
  // A PATCH sending one credential form clears the other.
  afterMerge: switchCredentials(["credentials"], ["service_account_email"]),
  async validate(conn, ctx) {
    const federated = credentialMode(conn, ["credentials"], ["service_account_email"]) === "federated";
    if (!federated && str(conn, "credentials") === "") throw invalid("credentials", "is required (or identity_token_audience, for workload identity federation)");
    const key = federated ? checkFederated(conn) : await parseCredentials(str(conn, "credentials"), ctx.env);
    const project = str(conn, "project_id");
    if (project !== "" && !PROJECT_ID.test(project)) {
      throw invalid("project_id", "must be 6 to 30 lower-case letters, digits or hyphens, starting with a letter");
    }
    if (project === "" && key.projectId === "") throw invalid("project_id", federated ? "is required with identity_token_audience" : "is required when the credentials name no project");
    return conn;
  },
};
