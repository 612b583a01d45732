/**
 * Every destination type through the API: create, read (obfuscated), full update, patch,
 * immutable fields, required fields, delete. Behaviour shared by all types (lists, purge,
 * policies) is in sync-destinations.test.ts.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, del, patch, read, write } from "../helpers/api";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { RSA_PKCS8_PEM, serviceAccountJson } from "../helpers/sync-fixtures";

const path = (type: string, name: string) => `sys/sync/destinations/${type}/${name}`;

/** The stored row never holds a credential in the clear. */
async function rowText(type: string, name: string): Promise<string> {
  const row = await env.DB.prepare("SELECT * FROM sync_destinations WHERE type = ? AND name = ?").bind(type, name).first();
  expect(row).not.toBeNull();
  return JSON.stringify(row);
}

describe("cloudone-sm", () => {
  it("create answers the read form with custom_tags; read obfuscates the keys", async () => {
    const name = `aws-${uid()}`;
    const r = await write(path("cloudone-sm", name), { ...BODIES["cloudone-sm"], custom_tags: { team: "blue" } });
    expect(r.body.data).toEqual({
      type: "cloudone-sm",
      name,
      connection_details: { access_key_id: "*****", secret_access_key: "*****", role_arn: "", external_id: "", region: "us-east-1", identity_token_audience: "", identity_token_ttl: "" },
      options: { granularity_level: "secret-path", secret_name_template: "vault/{{ .MountAccessor }}/{{ .SecretPath }}", custom_tags: { team: "blue" }, drift_repair: true },
    });
    const got = await read(path("cloudone-sm", name));
    expect(got.body.data).toEqual(r.body.data);
    expect(got.text).not.toContain(SECRETS.awsSecret);
    expect(got.text).not.toContain(SECRETS.awsKey);
    const stored = await rowText("cloudone-sm", name);
    expect(stored).not.toContain(SECRETS.awsSecret);
    expect(stored).not.toContain(SECRETS.awsKey);
  });

  it("requires both keys, each named (a Worker has no environment credential chain); nothing is stored", async () => {
    const name = `aws-${uid()}`;
    const keys = { access_key_id: SECRETS.awsKey, secret_access_key: SECRETS.awsSecret };
    for (const field of ["access_key_id", "secret_access_key"] as const) {
      const missing: Record<string, string> = { ...keys, region: "us-east-1" };
      delete missing[field];
      const r = await write(path("cloudone-sm", name), missing, {}, 400);
      expect(r.body.errors[0]).toContain(field);
      const empty = await write(path("cloudone-sm", name), { ...keys, [field]: "" }, {}, 400);
      expect(empty.body.errors[0]).toMatch(new RegExp(`^${field}: is required`));
      expect(empty.text).not.toContain(SECRETS.awsSecret);
    }
    expect((await write(path("cloudone-sm", name), {}, {}, 400)).body.errors[0]).toContain("access_key_id");
    await read(path("cloudone-sm", name), {}, 404);
    // Nor can a PATCH take them away.
    await write(path("cloudone-sm", name), BODIES["cloudone-sm"]);
    expect((await patch(path("cloudone-sm", name), { access_key_id: null }, {}, 400)).body.errors[0]).toContain("access_key_id");
    expect((await patch(path("cloudone-sm", name), { secret_access_key: "" }, {}, 400)).body.errors[0]).toContain("secret_access_key");
  });

  it("POST on an existing name is a full update; region stays immutable", async () => {
    const name = `aws-${uid()}`;
    await write(path("cloudone-sm", name), { ...BODIES["cloudone-sm"], custom_tags: { a: "1" }, granularity: "secret-key" });
    const keys = { access_key_id: SECRETS.awsKey, secret_access_key: SECRETS.awsSecret };
    const u = await write(path("cloudone-sm", name), { ...keys, role_arn: "arn:aws:iam::123456789012:role/sync" });
    expect(u.body.data.connection_details).toEqual({ access_key_id: "*****", secret_access_key: "*****", role_arn: "arn:aws:iam::123456789012:role/sync", external_id: "", region: "us-east-1", identity_token_audience: "", identity_token_ttl: "" });
    expect(u.body.data.options).toEqual({ granularity_level: "secret-path", secret_name_template: "vault/{{ .MountAccessor }}/{{ .SecretPath }}", custom_tags: {}, drift_repair: true });
    const bad = await write(path("cloudone-sm", name), { ...keys, region: "eu-west-1" }, {}, 400);
    expect(bad.body.errors).toEqual(["region: cannot be changed after the destination is created"]);
    expect((await read(path("cloudone-sm", name))).body.data.connection_details.region).toBe("us-east-1");
  });

  it("PATCH changes only what it sends; rotating keys is allowed", async () => {
    const name = `aws-${uid()}`;
    await write(path("cloudone-sm", name), BODIES["cloudone-sm"]);
    const p = await patch(path("cloudone-sm", name), { access_key_id: "AKIAIOSFODNN7EXAMPL2", secret_access_key: "rotated" });
    expect(p.body.data.connection_details).toMatchObject({ access_key_id: "*****", secret_access_key: "*****", region: "us-east-1" });
    await patch(path("cloudone-sm", name), { region: "us-west-2" }, {}, 400);
    await patch(path("cloudone-sm", name), { region: "us-east-1" }); // unchanged is fine
  });

  it("DELETE removes it; reading it then is 404", async () => {
    const name = `aws-${uid()}`;
    await write(path("cloudone-sm", name), BODIES["cloudone-sm"]);
    await del(path("cloudone-sm", name));
    await read(path("cloudone-sm", name), {}, 404);
    await del(path("cloudone-sm", name)); // idempotent
    await patch(path("cloudone-sm", name), { region: "us-east-1" }, {}, 404);
  });
});

describe("cloudtwo-kv", () => {
  it("requires its four fields, each named", async () => {
    for (const field of ["key_vault_uri", "client_id", "client_secret", "tenant_id"]) {
      const body: Record<string, unknown> = { ...BODIES["cloudtwo-kv"] };
      delete body[field];
      const r = await write(path("cloudtwo-kv", `kv-${uid()}`), body, {}, 400);
      // The keyless form names its alternative: `client_secret: is required (or identity_token_audience, …)`.
      expect(r.body.errors[0]).toMatch(new RegExp(`^(.*"${field}"|${field}: )`));
    }
  });

  it("creates with the default cloud; reads with the client secret obfuscated", async () => {
    const name = `kv-${uid()}`;
    const r = await write(path("cloudtwo-kv", name), BODIES["cloudtwo-kv"]);
    expect(r.body.data).toEqual({
      type: "cloudtwo-kv",
      name,
      connection_details: {
        key_vault_uri: "https://lanyard-kv.vault.azure.net",
        client_id: "11111111-2222-3333-4444-555555555555",
        client_secret: "*****",
        tenant_id: "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
        cloud: "cloud",
        identity_token_audience: "",
        identity_token_ttl: "",
      },
      options: { granularity_level: "secret-path", secret_name_template: "vault-{{ .MountAccessor }}-{{ .SecretPath }}", custom_tags: {}, drift_repair: true },
    });
    expect((await read(path("cloudtwo-kv", name))).text).not.toContain(SECRETS.clientSecret);
    expect(await rowText("cloudtwo-kv", name)).not.toContain(SECRETS.clientSecret);
  });

  it("refuses hosts other than the provider's and private literals", async () => {
    for (const uri of ["https://kv.example.com", "https://127.0.0.1", "https://[fe80::1]", "http://lanyard-kv.vault.azure.net"]) {
      const r = await write(path("cloudtwo-kv", `kv-${uid()}`), { ...BODIES["cloudtwo-kv"], key_vault_uri: uri }, {}, 400);
      expect(r.body.errors[0]).toMatch(/^key_vault_uri: /);
    }
    const c = await write(path("cloudtwo-kv", `kv-${uid()}`), { ...BODIES["cloudtwo-kv"], cloud: "mars" }, {}, 400);
    expect(c.body.errors[0]).toMatch(/^cloud: unknown cloud "mars"/);
  });

  it("key_vault_uri, tenant_id and cloud are immutable; the client secret rotates", async () => {
    const name = `kv-${uid()}`;
    await write(path("cloudtwo-kv", name), BODIES["cloudtwo-kv"]);
    for (const [field, value] of [
      ["key_vault_uri", "https://other.vault.azure.net"],
      ["tenant_id", "ffffffff-bbbb-cccc-dddd-eeeeeeeeeeee"],
      ["cloud", "public"],
    ] as const) {
      const r = await patch(path("cloudtwo-kv", name), { [field]: value }, {}, 400);
      expect(r.body.errors).toEqual([`${field}: cannot be changed after the destination is created`]);
    }
    const p = await patch(path("cloudtwo-kv", name), { client_secret: "new-secret", client_id: "new-client" });
    expect(p.body.data.connection_details).toMatchObject({ client_id: "new-client", client_secret: "*****" });
    const full = await write(path("cloudtwo-kv", name), { ...BODIES["cloudtwo-kv"], client_secret: "third" });
    expect(full.body.data.connection_details.client_id).toBe("11111111-2222-3333-4444-555555555555");
    await del(path("cloudtwo-kv", name));
  });
});

describe("cloudthree-sm", () => {
  it("requires credentials and takes them as JSON text; reads them as asterisks", async () => {
    const r0 = await write(path("cloudthree-sm", `g-${uid()}`), {}, {}, 400);
    expect(r0.body.errors[0]).toMatch(/^credentials: is required/);
    const name = `g-${uid()}`;
    const r = await write(path("cloudthree-sm", name), { ...BODIES["cloudthree-sm"], custom_tags: { team: "blue" } });
    expect(r.body.data).toEqual({
      type: "cloudthree-sm",
      name,
      connection_details: { credentials: "*****", project_id: "", identity_token_audience: "", identity_token_ttl: "", service_account_email: "" },
      options: { granularity_level: "secret-path", secret_name_template: "vault/{{ .MountAccessor }}/{{ .SecretPath }}", custom_tags: { team: "blue" }, drift_repair: true },
    });
    const text = (await read(path("cloudthree-sm", name))).text;
    expect(text).not.toContain("PRIVATE KEY");
    expect(await rowText("cloudthree-sm", name)).not.toContain(RSA_PKCS8_PEM.split("\n")[1]);
  });

  it("refuses bad credentials without echoing them", async () => {
    const secretish = '{"type":"service_account","private_key":"TOPSECRET';
    const r = await write(path("cloudthree-sm", `g-${uid()}`), { credentials: secretish }, {}, 400);
    expect(r.body.errors[0]).toMatch(/^credentials: is not valid JSON/);
    expect(r.text).not.toContain("TOPSECRET");
    const t = await write(path("cloudthree-sm", `g-${uid()}`), { credentials: serviceAccountJson({ token_uri: "https://169.254.169.254/token" }) }, {}, 400);
    expect(t.body.errors[0]).toMatch(/^credentials: token_uri: link-local/);
  });

  it("project_id is immutable; credentials rotate", async () => {
    const name = `g-${uid()}`;
    await write(path("cloudthree-sm", name), { ...BODIES["cloudthree-sm"], project_id: "first-project" });
    const r = await patch(path("cloudthree-sm", name), { project_id: "second-project" }, {}, 400);
    expect(r.body.errors).toEqual(["project_id: cannot be changed after the destination is created"]);
    await patch(path("cloudthree-sm", name), { credentials: serviceAccountJson({ client_email: "rotated@p.iam.gserviceaccount.com" }) });
    const labels = await patch(path("cloudthree-sm", name), { custom_tags: { Bad: "x" } }, {}, 400);
    expect(labels.body.errors[0]).toMatch(/^custom_tags: key "Bad"/);
  });
});

describe("repohost", () => {
  it("defaults to secret-key granularity with the upper-snake template; masks the token; has no tags", async () => {
    const name = `gh-${uid()}`;
    const r = await write(path("repohost", name), BODIES.repohost);
    expect(r.body.data).toEqual({
      type: "repohost",
      name,
      connection_details: { access_token: "*****", repository_owner: "octo-org", repository_name: "hello-world", environment_name: "" },
      options: {
        granularity_level: "secret-key",
        secret_name_template: "VAULT_{{ .MountAccessor | uppercase }}_{{ .SecretPath | uppercase }}_{{ .SecretKey | uppercase }}",
        custom_tags: {},
        drift_repair: true,
      },
    });
    expect((await read(path("repohost", name))).text).not.toContain(SECRETS.ghToken);
    expect(await rowText("repohost", name)).not.toContain(SECRETS.ghToken);
    const tags = await write(path("repohost", `gh-${uid()}`), { ...BODIES.repohost, custom_tags: { a: "b" } });
    expect(tags.body.warnings).toEqual(["Endpoint ignored these unrecognized parameters: [custom_tags]"]);
  });

  it("requires owner and repository, and a token or an app", async () => {
    expect((await write(path("repohost", `gh-${uid()}`), { access_token: "t", repository_name: "r" }, {}, 400)).body.errors[0]).toContain('"repository_owner"');
    expect((await write(path("repohost", `gh-${uid()}`), { access_token: "t", repository_owner: "o" }, {}, 400)).body.errors[0]).toContain('"repository_name"');
    const none = await write(path("repohost", `gh-${uid()}`), { repository_owner: "o", repository_name: "r" }, {}, 400);
    expect(none.body.errors[0]).toMatch(/^access_token: either access_token or app_name/);
    const noApp = await write(path("repohost", `gh-${uid()}`), { repository_owner: "o", repository_name: "r", app_name: "ghost", installation_id: "5" }, {}, 400);
    expect(noApp.body.errors[0]).toMatch(/^app_name: no repository-host app named "ghost"/);
  });

  it("owner, repository and environment are immutable", async () => {
    const name = `gh-${uid()}`;
    await write(path("repohost", name), { ...BODIES.repohost, environment_name: "prod" });
    for (const [field, value] of [
      ["repository_owner", "other-org"],
      ["repository_name", "other-repo"],
      ["environment_name", "staging"],
    ] as const) {
      const r = await patch(path("repohost", name), { [field]: value }, {}, 400);
      expect(r.body.errors).toEqual([`${field}: cannot be changed after the destination is created`]);
    }
    const p = await patch(path("repohost", name), { access_token: "rotated-token" });
    expect(p.body.data.connection_details).toMatchObject({ access_token: "*****", environment_name: "prod" });
    const t = await patch(path("repohost", name), { secret_name_template: "{{ .SecretPath }}" }, {}, 400);
    expect(t.body.errors[0]).toBe(
      "secret_name_template: secret name template is invalid: external name template should contain reference to the secret key",
    );
    const g = await patch(path("repohost", name), { secret_name_template: "{{ .SecretPath }}", granularity: "secret-path" });
    expect(g.body.data.options).toMatchObject({ granularity_level: "secret-path", secret_name_template: "{{ .SecretPath }}" });
    await del(path("repohost", name));
  });
});

describe("webhost-project", () => {
  it("creates, reads with the token masked, and lists environments in the order given", async () => {
    const name = `v-${uid()}`;
    const r = await write(path("webhost-project", name), { ...BODIES["webhost-project"], team_id: "team_1" });
    expect(r.body.data).toEqual({
      type: "webhost-project",
      name,
      connection_details: { access_token: "*****", project_id: "prj_abc123", team_id: "team_1", deployment_environments: ["production", "preview"] },
      options: {
        granularity_level: "secret-key",
        secret_name_template: "VAULT_{{ .MountAccessor | uppercase }}_{{ .SecretPath | uppercase }}_{{ .SecretKey | uppercase }}",
        custom_tags: {},
        drift_repair: true,
      },
    });
    expect((await read(path("webhost-project", name))).text).not.toContain(SECRETS.vercelToken);
    expect(await rowText("webhost-project", name)).not.toContain(SECRETS.vercelToken);
  });

  it("requires token, project and environments; checks the environments", async () => {
    for (const field of ["access_token", "project_id", "deployment_environments"]) {
      const body: Record<string, unknown> = { ...BODIES["webhost-project"] };
      delete body[field];
      expect((await write(path("webhost-project", `v-${uid()}`), body, {}, 400)).body.errors[0]).toContain(`"${field}"`);
    }
    const bad = await write(path("webhost-project", `v-${uid()}`), { ...BODIES["webhost-project"], deployment_environments: "production,staging" }, {}, 400);
    expect(bad.body.errors[0]).toMatch(/^deployment_environments: "staging"/);
  });

  it("project_id is immutable; environments and team change; PATCH null resets team_id", async () => {
    const name = `v-${uid()}`;
    await write(path("webhost-project", name), { ...BODIES["webhost-project"], team_id: "team_1" });
    expect((await patch(path("webhost-project", name), { project_id: "prj_other" }, {}, 400)).body.errors[0]).toMatch(/^project_id: cannot be changed/);
    const p = await patch(path("webhost-project", name), { deployment_environments: "development", team_id: null });
    expect(p.body.data.connection_details).toMatchObject({ team_id: "", deployment_environments: ["development"] });
    const req = await patch(path("webhost-project", name), { access_token: null }, {}, 400);
    expect(req.body.errors[0]).toBe("access_token: is required and cannot be removed");
    await del(path("webhost-project", name));
    await read(path("webhost-project", name), {}, 404);
  });
});

describe("failures store nothing", () => {
  it("a refused create leaves no destination; a refused update leaves the old one", async () => {
    const name = `kv-${uid()}`;
    await write(path("cloudtwo-kv", name), { ...BODIES["cloudtwo-kv"], custom_tags: { ["x".repeat(600)]: "v" } }, {}, 400);
    await read(path("cloudtwo-kv", name), {}, 404);
    await write(path("cloudtwo-kv", name), BODIES["cloudtwo-kv"]);
    await write(path("cloudtwo-kv", name), { ...BODIES["cloudtwo-kv"], client_id: "changed", secret_name_template: "{{ .Nope }}" }, {}, 400);
    expect((await read(path("cloudtwo-kv", name))).body.data.connection_details.client_id).toBe("11111111-2222-3333-4444-555555555555");
    expect((await api("GET", path("cloudtwo-kv", name))).status).toBe(200);
  });
});
