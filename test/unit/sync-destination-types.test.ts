import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { ENDPOINT_OVERRIDE_SUFFIX } from "../../src/core/config";
import { ApiError } from "../../src/core/errors";
import { renderSecretName, validateTags, validateTemplate, writeFields } from "../../src/engines/sync/destinations/options";
import type { Connection, ValidationContext } from "../../src/engines/sync/destinations/types";
import { DESTINATION_TYPES, findProvider, PROVIDERS, providerOf } from "../../src/engines/sync/providers/registry";
import type { DestinationOptions } from "../../src/engines/sync/store";
import { serviceAccountJson } from "../helpers/sync-fixtures";

const ctx = (over: Partial<ValidationContext> = {}): ValidationContext => ({
  env,
  previous: null,
  appExists: async (name) => name === "my-app",
  ...over,
});

async function refusal(type: string, conn: Connection, c: ValidationContext = ctx()): Promise<string> {
  const err = await providerOf(type).validate(conn, c).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err, `expected ${type} to refuse ${JSON.stringify(conn)}`).toBeInstanceOf(ApiError);
  const e = err as ApiError;
  expect(e.status).toBe(400);
  return e.messages[0] ?? "";
}

const cloudtwo: Connection = {
  key_vault_uri: "https://kv1.vault.azure.net",
  client_id: "11111111-2222-3333-4444-555555555555",
  client_secret: "s3cr3t-value",
  tenant_id: "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
  cloud: "cloud",
};

describe("the provider registry", () => {
  it("has one provider per type and per Vault name, found by either name", () => {
    expect(DESTINATION_TYPES).toEqual(["cloudone-sm", "cloudtwo-kv", "cloudthree-sm", "repohost", "webhost-project"]);
    expect(new Set(PROVIDERS.map((p) => p.vaultType)).size).toBe(PROVIDERS.length);
    for (const p of PROVIDERS) {
      expect(providerOf(p.type)).toBe(p);
      expect(findProvider(p.vaultType)).toBe(p);
    }
    expect(findProvider("in-mem")).toBeNull();
  });

  it("gives each provider its own endpoint variable, one that production refuses", () => {
    const vars = PROVIDERS.map((p) => p.endpointVar);
    expect(new Set(vars).size).toBe(PROVIDERS.length);
    for (const v of vars) expect(v.endsWith(ENDPOINT_OVERRIDE_SUFFIX), v).toBe(true);
  });

  it("declares sensitive and immutable members among the type's fields", () => {
    for (const t of DESTINATION_TYPES) {
      const def = providerOf(t);
      for (const f of [...def.sensitive, ...def.immutable]) expect(Object.keys(def.fields), `${t}.${f}`).toContain(f);
    }
  });

  it("offers custom tags only on the three cloud types (Vault API: /v1/sys/sync/destinations/:type/:name)", () => {
    const withTags = DESTINATION_TYPES.filter((t) => "custom_tags" in writeFields(providerOf(t)));
    expect(withTags).toEqual(["cloudone-sm", "cloudtwo-kv", "cloudthree-sm"]);
  });

  it("every default template passes its own validation and references .SecretKey under secret-key", async () => {
    for (const t of DESTINATION_TYPES) {
      for (const g of ["secret-path", "secret-key"] as const) {
        const opts: DestinationOptions = { granularity: g, secretNameTemplate: "", customTags: {}, driftRepair: true };
        await validateTemplate(providerOf(t), opts, { destinationType: t, destinationName: "d", namespacePath: "", namespaceId: "root" });
      }
    }
  });

  it("renders the documented default names", async () => {
    const inputs = {
      destinationName: "d",
      namespacePath: "",
      namespaceId: "root",
      mountPath: "kv/",
      mountAccessor: "kv_1234",
      secretPath: "my-secret",
      secretKey: "foo",
    };
    const name = (t: string, g: "secret-path" | "secret-key") =>
      renderSecretName(providerOf(t), { granularity: g, secretNameTemplate: "", customTags: {}, driftRepair: true }, { ...inputs, destinationType: t });
    expect(await name("cloudone-sm", "secret-path")).toBe("vault/kv_1234/my-secret");
    expect(await name("cloudtwo-kv", "secret-path")).toBe("vault-kv-1234-my-secret");
    expect(await name("cloudthree-sm", "secret-path")).toBe("vault_kv_1234_my-secret");
    expect(await name("repohost", "secret-key")).toBe("VAULT_KV_1234_MY_SECRET_FOO");
    expect(await name("repohost", "secret-path")).toBe("VAULT_KV_1234_MY_SECRET");
    expect(await name("webhost-project", "secret-key")).toBe("VAULT_KV_1234_MY_SECRET_FOO");
  });
});

describe("template validation", () => {
  const def = providerOf("cloudone-sm");
  const sample = { destinationType: "cloudone-sm", destinationName: "d", namespacePath: "", namespaceId: "root" };
  const check = (template: string, granularity: "secret-path" | "secret-key" = "secret-path") =>
    validateTemplate(def, { granularity, secretNameTemplate: template, customTags: {}, driftRepair: true }, sample);

  it("requires .SecretKey with secret-key granularity, with upstream's message", async () => {
    await expect(check("{{ .SecretPath }}", "secret-key")).rejects.toThrow(
      "secret_name_template: secret name template is invalid: external name template should contain reference to the secret key",
    );
    await check("{{ $k := .SecretKey }}{{ .SecretPath }}", "secret-key");
  });

  it("refuses templates that do not parse or render nothing", async () => {
    await expect(check("{{ .Nope }}")).rejects.toThrow(/secret_name_template: secret name template is invalid: unknown variable/);
    await expect(check("{{ .SecretKey }}")).rejects.toThrow(/renders an empty name/);
    await expect(check("{{ .SecretPath | truncate 0 }}")).rejects.toThrow(/must be > 0/);
  });
});

describe("custom tag limits", () => {
  it("cloudone-sm: 49 custom tags, key ≤ 128, value ≤ 256, no aws: prefix", () => {
    const def = providerOf("cloudone-sm");
    expect(validateTags(def, { team: "blue", "cost:center": "42" })).toEqual({ team: "blue", "cost:center": "42" });
    const many = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, "v"]));
    expect(() => validateTags(def, many)).toThrow(/at most 49 custom tags/);
    expect(() => validateTags(def, { ["k".repeat(129)]: "v" })).toThrow(/custom_tags: key .* 1 to 128/);
    expect(() => validateTags(def, { k: "v".repeat(257) })).toThrow(/at most 256/);
    expect(() => validateTags(def, { "AWS:thing": "v" })).toThrow(/reserved/);
    expect(() => validateTags(def, { "a#b": "v" })).toThrow(/custom_tags/);
    expect(() => validateTags(def, { k: 3 })).toThrow(/must be a string/);
  });

  it("cloudtwo-kv: 14 custom tags", () => {
    const many = Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`k${i}`, "v"]));
    expect(() => validateTags(providerOf("cloudtwo-kv"), many)).toThrow(/at most 14/);
  });

  it("cloudthree-sm: label rules (lower-case, start with a letter, ≤ 63)", () => {
    const def = providerOf("cloudthree-sm");
    expect(validateTags(def, { team: "blue_1", "a-b": "" })).toEqual({ team: "blue_1", "a-b": "" });
    expect(() => validateTags(def, { Team: "x" })).toThrow(/lower-case letter/);
    expect(() => validateTags(def, { "1team": "x" })).toThrow(/lower-case letter/);
    expect(() => validateTags(def, { team: "Blue" })).toThrow(/value of "team"/);
    expect(() => validateTags(def, { team: "x".repeat(64) })).toThrow(/at most 63/);
  });
});

describe("cloudone-sm rules", () => {
  const base: Connection = { access_key_id: "AKIAIOSFODNN7EXAMPLE", secret_access_key: "wJalrXUtnFEMI/K7MDENG", role_arn: "", external_id: "", region: "" };

  it("accepts a complete key pair", async () => {
    await providerOf("cloudone-sm").validate(base, ctx());
    await providerOf("cloudone-sm").validate({ ...base, region: "us-gov-west-1" }, ctx());
  });

  it("refuses missing keys (no environment chain in a Worker), half a key pair, bad regions, bad role ARNs, an external id without a role", async () => {
    expect(await refusal("cloudone-sm", { ...base, access_key_id: "", secret_access_key: "" })).toMatch(/^access_key_id: is required: .*no environment credential chain/);
    expect(await refusal("cloudone-sm", { ...base, secret_access_key: "" })).toMatch(/^secret_access_key: is required/);
    expect(await refusal("cloudone-sm", { ...base, access_key_id: "" })).toMatch(/^access_key_id: /);
    expect(await refusal("cloudone-sm", { ...base, region: "Mars" })).toMatch(/^region: /);
    expect(await refusal("cloudone-sm", { ...base, role_arn: "arn:aws:iam::123:role/x" })).toMatch(/^role_arn: /);
    expect(await refusal("cloudone-sm", { ...base, external_id: "abc" })).toMatch(/^external_id: .*role_arn/);
  });

  it("lets role_arn change only within the same account", async () => {
    const previous = { ...base, role_arn: "arn:aws:iam::123456789012:role/a" };
    await providerOf("cloudone-sm").validate({ ...base, role_arn: "arn:aws:iam::123456789012:role/b" }, ctx({ previous }));
    expect(await refusal("cloudone-sm", { ...base, role_arn: "arn:aws:iam::999999999999:role/b" }, ctx({ previous }))).toMatch(/same account/);
  });

  it("never echoes the secret access key", async () => {
    const msg = await refusal("cloudone-sm", { ...base, secret_access_key: "has space secret" });
    expect(msg).not.toContain("has space secret");
  });
});

describe("cloudtwo-kv rules", () => {
  it("accepts the public cloud and the other clouds' hosts", async () => {
    await providerOf("cloudtwo-kv").validate(cloudtwo, ctx());
    await providerOf("cloudtwo-kv").validate({ ...cloudtwo, cloud: "AzureChinaCloud", key_vault_uri: "https://kv.vault.azure.cn/" }, ctx());
    await providerOf("cloudtwo-kv").validate({ ...cloudtwo, cloud: "usgovernment", key_vault_uri: "https://kv.vault.usgovcloudapi.net" }, ctx());
  });

  it("refuses unknown clouds, foreign hosts, private literals and paths", async () => {
    expect(await refusal("cloudtwo-kv", { ...cloudtwo, cloud: "moon" })).toMatch(/^cloud: unknown cloud/);
    expect(await refusal("cloudtwo-kv", { ...cloudtwo, key_vault_uri: "https://kv.vault.azure.cn" })).toMatch(/^key_vault_uri: .*provider's hosts/);
    expect(await refusal("cloudtwo-kv", { ...cloudtwo, key_vault_uri: "https://169.254.169.254" })).toMatch(/^key_vault_uri: link-local/);
    expect(await refusal("cloudtwo-kv", { ...cloudtwo, key_vault_uri: "not a uri" })).toMatch(/^key_vault_uri: not a valid/);
    expect(await refusal("cloudtwo-kv", { ...cloudtwo, key_vault_uri: "https://kv1.vault.azure.net/secrets" })).toMatch(/without a path/);
    expect(await refusal("cloudtwo-kv", { ...cloudtwo, tenant_id: "a/b" })).toMatch(/^tenant_id: /);
  });

  it("accepts any host when CLOUDTWO_ENDPOINT is set", async () => {
    const c = ctx({ env: { ...env, CLOUDTWO_ENDPOINT: "http://127.0.0.1:9000" } as Env });
    await providerOf("cloudtwo-kv").validate({ ...cloudtwo, key_vault_uri: "http://127.0.0.1:9000" }, c);
  });
});

describe("cloudthree-sm rules", () => {
  it("accepts a service-account key and takes its project", async () => {
    await providerOf("cloudthree-sm").validate({ credentials: serviceAccountJson(), project_id: "" }, ctx());
    await providerOf("cloudthree-sm").validate({ credentials: serviceAccountJson({ project_id: undefined }), project_id: "other-project" }, ctx());
  });

  it.each([
    ["not json {", /not valid JSON/],
    ["[1]", /must be a JSON object/],
    [serviceAccountJson({ type: "authorized_user" }), /service account key/],
    [serviceAccountJson({ client_email: "nobody" }), /client_email/],
    [serviceAccountJson({ private_key: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n" }), /private_key is not a PKCS#8 RSA/],
    [serviceAccountJson({ private_key: undefined }), /private_key is missing/],
    [serviceAccountJson({ token_uri: "https://evil.example.com/token" }), /token_uri: host "evil.example.com"/],
    [serviceAccountJson({ token_uri: "https://10.0.0.1/token" }), /token_uri: private \(RFC 1918\) addresses are not allowed/],
  ])("refuses bad credentials (%#) naming the field, never their contents", async (credentials, msg) => {
    const m = await refusal("cloudthree-sm", { credentials, project_id: "" });
    expect(m).toMatch(/^credentials: /);
    expect(m).toMatch(msg);
    expect(m).not.toMatch(/MII|BEGIN/);
  });

  it("needs a project from the field or the key; checks the field's form", async () => {
    expect(await refusal("cloudthree-sm", { credentials: serviceAccountJson({ project_id: undefined }), project_id: "" })).toMatch(/^project_id: is required/);
    expect(await refusal("cloudthree-sm", { credentials: serviceAccountJson(), project_id: "Bad_Project" })).toMatch(/^project_id: /);
  });
});

describe("repohost rules", () => {
  const base: Connection = {
    access_token: "",
    app_name: "",
    installation_id: "",
    repository_owner: "octo-org",
    repository_name: "hello.world",
    environment_name: "",
  };

  it("takes a token or a configured app with an installation id", async () => {
    await providerOf("repohost").validate({ ...base, access_token: "github_pat_abc" }, ctx());
    await providerOf("repohost").validate({ ...base, app_name: "my-app", installation_id: "42" }, ctx());
  });

  it("refuses both, neither, a missing installation, an unknown app, bad names", async () => {
    expect(await refusal("repohost", base)).toMatch(/^access_token: either access_token or app_name/);
    expect(await refusal("repohost", { ...base, access_token: "t", app_name: "my-app", installation_id: "1" })).toMatch(/^app_name: .*not both/);
    expect(await refusal("repohost", { ...base, app_name: "my-app" })).toMatch(/^installation_id: is required/);
    expect(await refusal("repohost", { ...base, app_name: "my-app", installation_id: "x1" })).toMatch(/^installation_id: must be a positive integer/);
    expect(await refusal("repohost", { ...base, app_name: "other", installation_id: "1" })).toMatch(/^app_name: no repository-host app named "other"/);
    expect(await refusal("repohost", { ...base, access_token: "t", installation_id: "1" })).toMatch(/^installation_id: is only used/);
    expect(await refusal("repohost", { ...base, access_token: "t", repository_owner: "-bad" })).toMatch(/^repository_owner: /);
    expect(await refusal("repohost", { ...base, access_token: "t", repository_name: ".." })).toMatch(/^repository_name: /);
  });

  it("reads back the app form as app_config + installation_id and masks the token", () => {
    const view = providerOf("repohost").view;
    expect(view?.({ ...base, app_name: "my-app", installation_id: "42" })).toMatchObject({ access_token: "", app_config: { app_name: "my-app" }, installation_id: 42 });
    expect(view?.({ ...base, access_token: "ghp_x" })).toMatchObject({ access_token: "*****" });
  });

  it("switching the authentication form in a PATCH clears the other one", () => {
    const merge = providerOf("repohost").afterMerge;
    const app = merge?.({ ...base, access_token: "old", app_name: "my-app", installation_id: "1" }, new Set(["app_name", "installation_id"]));
    expect(app?.access_token).toBe("");
    const tok = merge?.({ ...base, access_token: "new", app_name: "my-app", installation_id: "1" }, new Set(["access_token"]));
    expect(tok).toMatchObject({ app_name: "", installation_id: "" });
  });
});

describe("webhost-project rules", () => {
  const base: Connection = { access_token: "tok", project_id: "prj_123", team_id: "", deployment_environments: ["production", "preview", "production"] };

  it("keeps the environment list in the order given, without duplicates", async () => {
    const out = await providerOf("webhost-project").validate(base, ctx());
    expect(out.deployment_environments).toEqual(["production", "preview"]);
  });

  it("refuses unknown or no environments and a bad project", async () => {
    expect(await refusal("webhost-project", { ...base, deployment_environments: ["staging"] })).toMatch(/^deployment_environments: "staging"/);
    expect(await refusal("webhost-project", { ...base, deployment_environments: [] })).toMatch(/^deployment_environments: at least one/);
    expect(await refusal("webhost-project", { ...base, project_id: "a/b" })).toMatch(/^project_id: /);
    expect(await refusal("webhost-project", { ...base, access_token: "" })).toMatch(/^access_token: is required/);
  });
});
