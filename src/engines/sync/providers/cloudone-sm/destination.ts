/**
 * `cloudone-sm`: a secrets manager with JSON 1.1 + SigV4 (docs/secrets-sync.md "Destinations: `sys/sync/destinations/<type>/<name>`"; Vault API: /v1/sys/sync/destinations/:type/:name,
 * AWS Secrets Manager API Reference). Either both keys or federation (`identity_token_audience`
 * with `role_arn`: STS AssumeRoleWithWebIdentity with an identity token Lanyard signs,
 * docs/secrets-sync.md "Keyless destinations"), never both: upstream falls back to the
 * environment's default credential chain when keys are omitted, but a Worker has no such chain
 * (no instance metadata, no credential files, no AWS_* environment), so a destination with
 * neither could never sync; it is refused at once instead. `region` is immutable (empty means
 * us-east-1); `role_arn` may change only to a role in the same account (Vault API: /v1/sys/sync/destinations/:type/:name, Terraform docs).
 */
import { defineFields } from "../../../../core/fields";
import { credentialMode, FEDERATION_FIELDS, switchCredentials } from "../../connectors/federation";
import { invalid, str, type Connection, type DestinationDef } from "../../destinations/types";

const ROLE_ARN = /^arn:aws(?:-[a-z]+)*:iam::(\d{12}):role\/[\w+=,.@/-]{1,512}$/;
const REGION = /^[a-z]{2}(?:-[a-z]+)+-\d{1,2}$/;

function account(arn: string): string | null {
  return ROLE_ARN.exec(arn)?.[1] ?? null;
}

/** Stored keys: both required (no credential chain to fall back on) and well-formed. */
function checkKeys(conn: Connection): void {
  const akid = str(conn, "access_key_id");
  const secret = str(conn, "secret_access_key");
  const noChain = "is required: this service runs on Cloudflare Workers, which have no environment credential chain to fall back on (or set identity_token_audience and role_arn to use federation)";
  if (akid === "") throw invalid("access_key_id", noChain);
  if (secret === "") throw invalid("secret_access_key", noChain);
  if (!/^\w{16,128}$/.test(akid)) throw invalid("access_key_id", "must be 16 to 128 letters or digits");
  if (secret.length > 512 || /\s/.test(secret)) throw invalid("secret_access_key", "is not a valid secret access key");
}

/** Federation: AssumeRoleWithWebIdentity needs the role and takes no external id. */
function checkFederated(conn: Connection): void {
  if (str(conn, "role_arn") === "") throw invalid("role_arn", "is required with identity_token_audience (the role AssumeRoleWithWebIdentity assumes)");
  if (str(conn, "external_id") !== "") throw invalid("external_id", "cannot be used with identity_token_audience (AssumeRoleWithWebIdentity takes no external id)");
}

export const destination: DestinationDef = {
  type: "cloudone-sm",
  fields: defineFields({
    access_key_id: { type: "string", default: "", description: "Access key id (required unless the destination is federated: a Worker has no environment credential chain)." },
    secret_access_key: { type: "string", default: "", description: "Secret access key (required with access_key_id)." },
    role_arn: { type: "string", default: "", description: "Role to assume (temporary credentials); may be in another account. Required with identity_token_audience." },
    external_id: { type: "string", default: "", description: "External id the role's trust policy requires." },
    region: { type: "string", default: "", description: "Region of the secrets manager; empty means us-east-1. Immutable." },
    ...FEDERATION_FIELDS,
  }),
  sensitive: ["access_key_id", "secret_access_key"],
  immutable: ["region"],
  defaultGranularity: "secret-path",
  defaultTemplate: {
    "secret-path": "vault/{{ .MountAccessor }}/{{ .SecretPath }}",
    "secret-key": "vault/{{ .MountAccessor }}/{{ .SecretPath }}/{{ .SecretKey }}",
  },
  // Secrets-manager names allow [A-Za-z0-9/_+=.@-]; "/" is kept as the hierarchy separator.
  normalizeName: (name) => name.replace(/[^A-Za-z0-9/_+=.@-]/g, "_"),
  // ≤ 50 tags per secret, one taken by the ownership tag; keys ≤ 128, values ≤ 256; "aws:" reserved.
  tags: {
    maxTags: 49,
    maxKeyLength: 128,
    maxValueLength: 256,
    checkKey: (k) =>
      k.toLowerCase().startsWith("aws:")
        ? 'the "aws:" prefix is reserved'
        : /^[\p{L}\p{Z}\p{N}_.:/=+\-@]+$/u.test(k)
          ? null
          : "may contain only letters, digits, spaces and _ . : / = + - @",
    checkValue: (v) => (/^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$/u.test(v) ? null : "may contain only letters, digits, spaces and _ . : / = + - @"),
  },
  // A PATCH sending one credential form clears the other.
  afterMerge: switchCredentials(["access_key_id", "secret_access_key"], []),
  async validate(conn, ctx) {
    const federated = credentialMode(conn, ["access_key_id", "secret_access_key"], []) === "federated";
    if (federated) checkFederated(conn);
    else checkKeys(conn);
    const region = str(conn, "region");
    if (region !== "" && !REGION.test(region)) throw invalid("region", `"${region}" is not a region name such as us-east-1`);
    const role = str(conn, "role_arn");
    if (role !== "" && !ROLE_ARN.test(role)) throw invalid("role_arn", "must be a role ARN: arn:aws:iam::<12-digit account>:role/<name>");
    const before = ctx.previous ? str(ctx.previous, "role_arn") : "";
    if (role !== "" && before !== "" && account(role) !== account(before)) {
      throw invalid("role_arn", "can only change to a role in the same account");
    }
    const ext = str(conn, "external_id");
    if (ext !== "") {
      if (role === "") throw invalid("external_id", "is only used together with role_arn");
      if (!/^[\w+=,.@:/-]{2,1224}$/.test(ext)) throw invalid("external_id", "must be 2 to 1224 characters of letters, digits and +=,.@:/-");
    }
    return conn;
  },
};
