/** Valid create bodies per destination type, and the secrets they carry, for integration tests. */
import { serviceAccountJson } from "./sync-fixtures";

export const SECRETS = {
  awsKey: "AKIAIOSFODNN7EXAMPLE",
  awsSecret: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
  clientSecret: "client-secret-value-0123456789",
  ghToken: "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
  vercelToken: "vercel-token-0123456789abcdef",
};

export const BODIES = {
  "cloudone-sm": {
    access_key_id: SECRETS.awsKey,
    secret_access_key: SECRETS.awsSecret,
    region: "us-east-1",
  },
  "cloudtwo-kv": {
    key_vault_uri: "https://lanyard-kv.vault.azure.net",
    client_id: "11111111-2222-3333-4444-555555555555",
    client_secret: SECRETS.clientSecret,
    tenant_id: "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
  },
  "cloudthree-sm": {
    credentials: serviceAccountJson(),
  },
  repohost: {
    access_token: SECRETS.ghToken,
    repository_owner: "octo-org",
    repository_name: "hello-world",
  },
  "webhost-project": {
    access_token: SECRETS.vercelToken,
    project_id: "prj_abc123",
    deployment_environments: ["production", "preview"],
  },
} as const;

export const uid = () => crypto.randomUUID().slice(0, 8);
